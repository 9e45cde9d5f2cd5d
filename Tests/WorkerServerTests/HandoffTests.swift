import APNsSimulator
import Foundation
import LiveDeliveryCore
import Postgres
import TestSupport
import Testing

@testable import LiveDelivery

/// The consumer's direct handoff of new pushes to its own dispatcher (``PushHandoff``). The tests
/// open the handoff as the dispatcher's claim loop does, with an ``Answers`` they can inspect, and
/// drive the consumer by hand.
@Suite("Handoff", .timeLimit(.minutes(3)))
struct HandoffTests {
    @Test("a new push is inserted leased to this worker and handed over after commit, without a NOTIFY")
    func handedOver() async throws {
        try await withWorker { harness, worker in
            let answers = Answers()
            worker.dispatcher.handoff.open(answers)
            var notifications = worker.client.notifications(channel: "livedelivery_outbox").makeAsyncIterator()
            #expect(await notifications.next() == .listening)

            let (order, token) = try await trackedOrder(worker)
            let handed = worker.dispatcher.handoff.take()
            #expect(handed.count == 1)
            let claim = try #require(handed.first)
            #expect(claim.orderID == order)
            #expect(claim.generation == 1 && claim.attempts == 1)
            #expect(claim.push.deviceToken.hex == token)
            #expect(answers.inFlight == 1)
            let rows = try await harness.database.client.query(
                """
                SELECT activity_key, lease_owner, attempts, generation, lease_until > now() AS leased
                FROM outbox WHERE order_id = \(order)
                """)
            let row = try #require(rows.first)
            #expect(try row.decode(String.self, "activity_key") == claim.activityKey)
            #expect(try row.decode(String?.self, "lease_owner") == worker.configuration.workerID)
            #expect(try row.decode(Int.self, "attempts") == 1)
            #expect(try row.decode(Int64.self, "generation") == 1)
            #expect(try row.decode(Bool.self, "leased"))

            // The next notification is the test's own marker: the handed row sent none.
            try await worker.client.query("SELECT pg_notify('livedelivery_outbox', 'marker')")
            guard case .notification(let notification) = await notifications.next() else {
                Issue.record("no notification")
                return
            }
            #expect(notification.payload == "marker")
            // A claim finds nothing: the row is leased.
            #expect(try await worker.dispatcher.dispatchOnce() == 0)
        }
    }

    @Test("a push that replaces one in flight is not handed over: the row keeps its lease and waits")
    func replacementWaits() async throws {
        // The worker's clock runs a minute behind and moves ten seconds between the events, so that
        // the replacement is due at once (its timestamp must exceed the first push's).
        let clock = TestClock(Date().addingTimeInterval(-60))
        try await withWorker(now: clock.closure) { harness, worker in
            let answers = Answers()
            worker.dispatcher.handoff.open(answers)
            let (order, _) = try await trackedOrder(worker)
            #expect(worker.dispatcher.handoff.take().count == 1)
            clock.set(clock.now.addingTimeInterval(10))
            _ = try await worker.processor.process([Events.status(order, "preparing", sequence: 2)])
            #expect(worker.dispatcher.handoff.take().isEmpty)
            #expect(answers.inFlight == 1)  // the slot reserved for the replacement was given back
            let rows = try await harness.database.client.query(
                "SELECT lease_owner, attempts, generation FROM outbox WHERE order_id = \(order)")
            let row = try #require(rows.first)
            #expect(try row.decode(String?.self, "lease_owner") == worker.configuration.workerID)
            #expect(try row.decode(Int.self, "attempts") == 1)
            #expect(try row.decode(Int64.self, "generation") == 2)
        }
    }

    @Test("without free slots, or for a paused app, the row is left free for a claim")
    func leftForClaim() async throws {
        try await withWorker { harness, worker in
            let answers = Answers()
            answers.add(inFlight: worker.configuration.dispatcher.concurrency)
            worker.dispatcher.handoff.open(answers)
            let (full, fullToken) = try await trackedOrder(worker)
            #expect(worker.dispatcher.handoff.take().isEmpty)
            answers.remove(inFlight: worker.configuration.dispatcher.concurrency)

            try await harness.database.client.query(
                """
                INSERT INTO app_pauses (bundle_id, reason, status, paused_by, paused_until)
                VALUES (\(bundleID), 'BadTopic', 400, 'test', now() + interval '1 hour')
                """)
            let (paused, _) = try await trackedOrder(worker)
            #expect(worker.dispatcher.handoff.take().isEmpty)
            #expect(answers.inFlight == 0)
            #expect(
                try await harness.database.count(
                    "SELECT count(*) FROM outbox WHERE lease_owner IS NULL AND attempts = 0 AND order_id IN (\(full), \(paused))"
                ) == 2)

            try await harness.database.owner.query("DELETE FROM app_pauses")  // an operator's resume
            try await drain(harness, worker)
            #expect(harness.simulator.pushes(token: fullToken).count == 1)
        }
    }

    @Test("a batch waits for the dispatcher to have room, then hands its push over rather than leave it for a claim")
    func batchWaitsForRoom() async throws {
        try await withWorker(adjust: { $0.dispatcher.handoffWait = .seconds(120) }) { harness, worker in
            let concurrency = worker.configuration.dispatcher.concurrency
            let answers = Answers()
            answers.add(inFlight: concurrency)
            worker.dispatcher.handoff.open(answers)
            let tracked = Task { try await trackedOrder(worker) }
            try await eventually("the batch waits for room") { worker.dispatcher.handoff.isWaitingForRoom }
            #expect(try await harness.database.count("SELECT count(*) FROM orders") == 0)  // not applied yet

            answers.remove(inFlight: concurrency)
            let (order, _) = try await tracked.value
            #expect(worker.dispatcher.handoff.take().map(\.orderID) == [order])
            #expect(answers.inFlight == 1)
            #expect(
                try await harness.database.count(
                    "SELECT count(*) FROM outbox WHERE order_id = \(order) AND lease_owner IS NOT NULL") == 1)
        }
    }

    @Test("room: no wait with room or without a dispatcher; a wait ends with room, or false at its bound")
    func room() async throws {
        let handoff = PushHandoff(
            workerID: "w", leaseSeconds: 60, concurrency: 10, roomWait: .seconds(120), wakeup: Wakeup())
        #expect(await handoff.waitForRoom(5))  // no dispatcher running
        let answers = Answers()
        answers.add(inFlight: 8)
        handoff.open(answers)
        #expect(await handoff.waitForRoom(2))

        let waiter = Task { await handoff.waitForRoom(500) }  // at most all ten slots
        try await eventually("the caller waits") { handoff.isWaitingForRoom }
        #expect(await handoff.waitForRoom(5) == false)  // one waits at a time; another goes on at once
        answers.remove(inFlight: 7)
        #expect(handoff.isWaitingForRoom)  // nine free slots are not ten
        answers.remove(inFlight: 1)
        #expect(await waiter.value)
        #expect(!handoff.isWaitingForRoom)

        let bounded = PushHandoff(
            workerID: "w", leaseSeconds: 60, concurrency: 10, roomWait: .milliseconds(1), wakeup: Wakeup())
        let full = Answers()
        full.add(inFlight: 10)
        bounded.open(full)
        #expect(await bounded.waitForRoom(1) == false)
        let never = PushHandoff(workerID: "w", leaseSeconds: 60, concurrency: 10, roomWait: .zero, wakeup: Wakeup())
        never.open(full)
        #expect(await never.waitForRoom(1))  // 0 turns the wait off: the batch goes on
    }

    @Test("slots: a reservation is bounded by the free slots, and what a transaction does not use is given back")
    func slots() async throws {
        // One real claim, copied under other order ids.
        var handed: Outbox.Claim?
        try await withWorker { _, worker in
            worker.dispatcher.handoff.open(Answers())
            _ = try await trackedOrder(worker)
            handed = worker.dispatcher.handoff.take().first
        }
        let sample = try #require(handed)
        func claim(_ orderID: String) -> Outbox.Claim {
            var claim = sample
            claim.orderID = orderID
            return claim
        }
        let handoff = PushHandoff(workerID: "w", leaseSeconds: 60, concurrency: 10, roomWait: .zero, wakeup: Wakeup())
        #expect(handoff.reserve(upTo: 5) == 0)  // not open: no dispatcher to send
        let answers = Answers()
        answers.add(inFlight: 4)
        handoff.open(answers)

        let failed = Handover(handoff)
        #expect(failed.reserve(upTo: 3) == 3)
        #expect(answers.inFlight == 7)
        failed.abandon()
        #expect(answers.inFlight == 4)

        let committed = Handover(handoff)
        #expect(committed.reserve(upTo: 100) == 6)
        #expect(handoff.reserve(upTo: 1) == 0)
        committed.leased([claim("a"), claim("b")])
        committed.commit()
        #expect(answers.inFlight == 6)
        #expect(handoff.take().map(\.orderID) == ["a", "b"])

        let late = Handover(handoff)
        #expect(late.reserve(upTo: 1) == 1)
        late.leased([claim("c")])
        late.commit()
        #expect(handoff.close().map(\.orderID) == ["c"])
        #expect(handoff.reserve(upTo: 1) == 0)
    }
}
