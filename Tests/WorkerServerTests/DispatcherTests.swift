import APNsSimulator
import Foundation
import LiveDelivery
import LiveDeliveryCore
import Postgres
import TestSupport
import Testing

/// Runs `body` with a harness and a worker, then always cleans up.
func withWorker(
    postgresServer: String = TestEnvironment.postgresURL,
    adjust: (inout WorkerConfiguration) -> Void = { _ in },
    now: @escaping @Sendable () -> Date = { Date() },
    _ body: (Harness, Worker) async throws -> Void
) async throws {
    let harness = try await Harness.start(postgresServer: postgresServer, adjust: adjust)
    let worker: Worker
    do {
        worker = try harness.worker(now: now)
    } catch {
        await harness.stop()
        throw error
    }
    do {
        try await body(harness, worker)
    } catch {
        await harness.stop(worker)
        throw error
    }
    await harness.stop(worker)
}

/// Applies a status and a token for a new order; returns the order id and token.
func trackedOrder(_ worker: Worker, status: String = "confirmed") async throws -> (order: String, token: String) {
    let order = TestEnvironment.uniqueName("O")
    let token = Events.token()
    _ = try await worker.processor.process([
        Events.status(order, status, sequence: 1),
        Events.activityToken(order, activity: "act-" + order, token: token),
    ])
    return (order, token)
}

@Suite("Dispatcher", .timeLimit(.minutes(6)))
struct DispatcherTests {
    @Test("a batch that plans a push wakes the dispatchers (NOTIFY at commit); one that plans none does not")
    func newOutboxRowsNotify() async throws {
        try await withWorker { harness, worker in
            var notifications = worker.client.notifications(channel: "livedelivery_outbox").makeAsyncIterator()
            #expect(await notifications.next() == .listening)
            let order = TestEnvironment.uniqueName("O")
            let events = [
                Events.status(order, "confirmed", sequence: 1),
                Events.activityToken(order, activity: "act-" + order, token: Events.token()),
            ]
            _ = try await worker.processor.process(events)
            _ = try await worker.processor.process(events)  // duplicates: nothing planned
            try await worker.client.query("SELECT pg_notify('livedelivery_outbox', 'marker')")
            _ = try await worker.processor.process([Events.status(order, "preparing", sequence: 2)])
            var payloads: [String] = []
            for _ in 0..<3 {
                guard case .notification(let notification) = await notifications.next() else { break }
                payloads.append(notification.payload)
            }
            #expect(payloads == ["", "marker", ""])
        }
    }

    @Test("a newer state replaces a pending one: only the newest is sent, and every attempt is recorded")
    func newestOnly() async throws {
        try await withWorker { harness, worker in
            let (order, token) = try await trackedOrder(worker)
            _ = try await worker.processor.process([Events.status(order, "preparing", sequence: 2)])
            _ = try await worker.processor.process([Events.status(order, "picked_up", sequence: 3, courier: "Ana")])
            #expect(try await harness.database.count("SELECT generation FROM outbox WHERE order_id = \(order)") == 3)
            try await eventually("the outbox is empty") {
                try await worker.dispatcher.dispatchOnce()
                return try await harness.database.count("SELECT count(*) FROM outbox") == 0
            }
            let pushes = harness.simulator.pushes(token: token)
            #expect(pushes.count == 1)
            #expect(try contentState(try #require(pushes.first))["currentStep"] as? String == "pickedUp")
            #expect(
                try await harness.database.count("SELECT count(*) FROM push_attempts WHERE order_id = \(order)") == 1)
            #expect(
                try await harness.database.strings("SELECT state FROM activities WHERE order_id = \(order)") == [
                    "active"
                ])
        }
    }

    @Test("token gone: the activity fails and nothing more is sent to it")
    func tokenGone() async throws {
        try await withWorker { harness, worker in
            let (order, token) = try await trackedOrder(worker)
            harness.simulator.markUnregistered(token: token)
            try await eventually("the outbox is empty") {
                try await worker.dispatcher.dispatchOnce()
                return try await harness.database.count("SELECT count(*) FROM outbox") == 0
            }
            #expect(
                try await harness.database.strings("SELECT state FROM activities WHERE order_id = \(order)") == [
                    "failed"
                ])
            #expect(try await harness.database.strings("SELECT outcome FROM push_attempts") == ["token_gone"])
            _ = try await worker.processor.process([Events.status(order, "preparing", sequence: 2)])
            #expect(try await harness.database.count("SELECT count(*) FROM outbox") == 0)
            #expect(try await worker.dispatcher.dispatchOnce() == 0)
        }
    }

    @Test("a 410 older than the token's arrival does not retire it")
    func staleUnregistered() async throws {
        try await withWorker { harness, worker in
            let (order, token) = try await trackedOrder(worker)
            harness.simulator.markUnregistered(token: token, at: Date().addingTimeInterval(-3600))
            try await eventually("the attempt is recorded") {
                try await worker.dispatcher.dispatchOnce()
                return try await harness.database.count("SELECT count(*) FROM push_attempts") >= 1
            }
            #expect(
                try await harness.database.strings("SELECT state FROM activities WHERE order_id = \(order)") == [
                    "active"
                ])
        }
    }

    @Test("retry later: retried with backoff, then delivered")
    func retryLater() async throws {
        try await withWorker { harness, worker in
            let (order, token) = try await trackedOrder(worker)
            harness.simulator.injectFault(FaultRule(status: 503, reason: "ServiceUnavailable", count: 2))
            try await eventually("the push is delivered") {
                try await worker.dispatcher.dispatchOnce()
                return try await harness.database.count(
                    "SELECT count(*) FROM push_attempts WHERE outcome = 'delivered'") == 1
            }
            #expect(
                try await harness.database.strings(
                    "SELECT outcome FROM push_attempts WHERE order_id = \(order) ORDER BY id")
                    == ["retry_later", "retry_later", "delivered"])
            #expect(harness.simulator.pushes(token: token).filter { $0.status == 200 }.count == 1)
            #expect(try await harness.database.count("SELECT count(*) FROM outbox") == 0)
        }
    }

    @Test("an outbox row whose push cannot be read is kept, leased and counted; the rest of its batch goes out")
    func unreadableRow() async throws {
        try await withWorker { harness, worker in
            let (_, token) = try await trackedOrder(worker)
            let (bad, badToken) = try await trackedOrder(worker)
            try await harness.database.client.query(
                "UPDATE outbox SET push = '{\"orderID\": 1}' WHERE order_id = \(bad)")
            #expect(try await worker.dispatcher.dispatchOnce() == 1)
            #expect(harness.simulator.pushes(token: token).count == 1)
            #expect(harness.simulator.pushes(token: badToken).isEmpty)
            #expect(
                try await harness.database.strings("SELECT order_id FROM outbox WHERE lease_owner IS NOT NULL") == [bad]
            )
            #expect(try await harness.database.count("SELECT count(*) FROM outbox") == 1)
            let metrics = String(decoding: worker.metrics.exposition(), as: UTF8.self)
            #expect(metrics.contains("livedelivery_outbox_unreadable_total 1"))
        }
    }

    @Test("an activity row the change leaves as it was is not written again; the changed one is")
    func unchangedActivityRowsAreNotRewritten() async throws {
        try await withWorker { harness, worker in
            let order = TestEnvironment.uniqueName("O")
            let ended = "act-a-" + order
            let live = "act-b-" + order
            _ = try await worker.processor.process([
                Events.status(order, "confirmed", sequence: 1),
                Events.activityToken(order, activity: ended, token: Events.token()),
                Events.activityToken(order, activity: live, token: Events.token()),
            ])
            let endedEvent = """
                {"type":"activity.ended","version":1,"event_id":"end-\(order)","occurred_at":"2026-11-21T10:04:07Z",\
                "order_id":"\(order)","activity_id":"\(ended)","reason":"dismissed_by_user"}
                """
            _ = try await worker.processor.process([
                InboundMessage(body: Array(endedEvent.utf8), routingKey: "activity.ended", messageID: "end-\(order)")
            ])
            try await eventually("the outbox is empty") {
                try await worker.dispatcher.dispatchOnce()
                return try await harness.database.count("SELECT count(*) FROM outbox") == 0
            }
            func version(_ activity: String) async throws -> Int {
                try await harness.database.count(
                    "SELECT xmin::text::bigint FROM activities WHERE order_id = \(order) AND activity_id = \(activity)")
            }
            #expect(
                try await harness.database.strings(
                    "SELECT state FROM activities WHERE order_id = \(order) ORDER BY activity_id") == [
                        "ended", "active",
                    ])
            let (endedBefore, liveBefore) = (try await version(ended), try await version(live))
            _ = try await worker.processor.process([Events.status(order, "preparing", sequence: 2)])
            try await eventually("the update is recorded") {
                try await worker.dispatcher.dispatchOnce()
                return try await harness.database.count("SELECT count(*) FROM outbox") == 0
            }
            #expect(try await version(ended) == endedBefore)
            #expect(try await version(live) != liveBefore)
            #expect(
                try await harness.database.strings(
                    "SELECT last_sent_step FROM activities WHERE order_id = \(order) AND activity_id = \(live)")
                    == ["preparing"])
        }
    }

    @Test("retries are bounded: the push is given up after maxAttempts")
    func retriesBounded() async throws {
        try await withWorker(adjust: { $0.dispatcher.maxAttempts = 3 }) { harness, worker in
            let (order, _) = try await trackedOrder(worker)
            harness.simulator.injectFault(FaultRule(status: 500, reason: "InternalServerError", count: 100))
            try await eventually("the push is given up") {
                try await worker.dispatcher.dispatchOnce()
                return try await harness.database.count("SELECT count(*) FROM outbox") == 0
            }
            #expect(
                try await harness.database.count("SELECT count(*) FROM push_attempts WHERE order_id = \(order)") == 3)
        }
    }

    @Test("configuration fault: the app is paused, its work kept, nothing more is sent")
    func configurationFault() async throws {
        try await withWorker { harness, worker in
            let (order, _) = try await trackedOrder(worker)
            harness.simulator.injectFault(FaultRule(status: 403, reason: "InvalidProviderToken", count: 1))
            try await eventually("the app is paused") {
                try await worker.dispatcher.dispatchOnce()
                return try await harness.database.count("SELECT count(*) FROM app_pauses") == 1
            }
            #expect(try await harness.database.strings("SELECT reason FROM app_pauses") == ["InvalidProviderToken"])
            #expect(
                try await harness.database.count(
                    "SELECT count(*) FROM outbox WHERE order_id = \(order) AND lease_owner IS NULL") == 1)
            #expect(try await worker.dispatcher.dispatchOnce() == 0)
            #expect(worker.health.snapshot.pausedApps == [bundleID])
            // After the pause the work goes out.
            try await harness.database.client.query("UPDATE app_pauses SET paused_until = now()")
            try await eventually("the push is delivered") {
                try await worker.dispatcher.dispatchOnce()
                return try await harness.database.count(
                    "SELECT count(*) FROM push_attempts WHERE outcome = 'delivered'") == 1
            }
        }
    }

    @Test("two dispatchers share the outbox and send each push once")
    func twoDispatchers() async throws {
        try await withWorker { harness, worker in
            let second = try harness.worker()
            var tokens: [String] = []
            for _ in 0..<20 { tokens.append(try await trackedOrder(worker).token) }
            try await eventually("the outbox is empty") {
                async let a = worker.dispatcher.dispatchOnce()
                async let b = second.dispatcher.dispatchOnce()
                _ = try await (a, b)
                return try await harness.database.count("SELECT count(*) FROM outbox") == 0
            }
            await second.dispatcher.sender.shutdown()
            #expect(try await harness.database.count("SELECT count(*) FROM push_attempts") == 20)
            for token in tokens { #expect(harness.simulator.pushes(token: token).count == 1) }
        }
    }
}

@Suite("Sweeper", .timeLimit(.minutes(6)))
struct SweeperTests {
    @Test("ends an activity that reaches the (shortened) lifetime limit")
    func lifetime() async throws {
        try await withWorker(adjust: {
            $0.tracking.policy.sweep.lifetime = 120
            $0.tracking.policy.sweep.lifetimeMargin = 30
        }) { harness, worker in
            let (order, _) = try await trackedOrder(worker, status: "out_for_delivery")
            try await eventually("the update is delivered") {
                try await worker.dispatcher.dispatchOnce()
                return try await harness.database.count("SELECT count(*) FROM outbox") == 0
            }
            let later = Date().addingTimeInterval(100)
            let sweeper = Sweeper(
                configuration: harness.configuration.sweeper, client: worker.client,
                tracking: harness.configuration.tracking, metrics: worker.metrics, logger: quietLogger, now: { later })
            #expect(try await sweeper.sweepOnce() == 1)
            #expect(try await harness.database.strings("SELECT kind FROM outbox WHERE order_id = \(order)") == ["end"])
            #expect(
                try await harness.database.strings("SELECT state FROM activities WHERE order_id = \(order)") == [
                    "ending"
                ])
            #expect(
                try await harness.database.strings("SELECT code FROM timeline_decisions WHERE kind = 'sweep'").contains(
                    "sweep_lifetime"))
            // Nothing is due again right away.
            #expect(try await sweeper.sweepOnce() == 0)
        }
    }
}
