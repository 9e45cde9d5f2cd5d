import APNsSimulator
import Foundation
import LiveDeliveryCore
import Postgres
import TestSupport
import Testing

@testable import LiveDelivery

/// The consumer's direct handoff of new pushes to its own dispatcher (``PushCapacity``). The tests
/// open the capacity as the dispatcher's claim loop does, take what is handed over, and drive the
/// consumer by hand. (The capacity's decisions alone are unit-tested in `PushCapacityTests`.)
@Suite("Handoff", .timeLimit(.minutes(6)))
struct HandoffTests {
    @Test("a new update is handed over after commit without an outbox row or a NOTIFY; its timeline row lists it")
    func handedOver() async throws {
        try await withWorker { harness, worker in
            let capacity = worker.dispatcher.capacity
            capacity.open()
            var notifications = worker.client.notifications(channel: "livedelivery_outbox").makeAsyncIterator()
            #expect(await notifications.next() == .listening)

            let (order, token) = try await trackedOrder(worker)
            let handed = handed(capacity)
            #expect(handed.count == 1)
            let claim = try #require(handed.first)
            #expect(claim.orderID == order)
            #expect(claim.push.kind == .update)
            #expect(claim.generation == 0 && claim.attempts == 1)
            #expect(claim.push.deviceToken?.hex == token)
            #expect(capacity.inFlight == 1)
            #expect(try await harness.database.count("SELECT count(*) FROM outbox WHERE order_id = \(order)") == 0)
            #expect(
                try await harness.database.strings(
                    "SELECT h::text FROM timeline, unnest(handed) AS h WHERE order_id = \(order)")
                    == [claim.push.apnsID.lowercased()])
            #expect(
                try await harness.database.strings(
                    "SELECT waits_in || ' ' || apns_id FROM pushes_waiting WHERE order_id = \(order)")
                    == ["memory \(claim.push.apnsID.lowercased())"])

            // The next notification is the test's own marker: the handed push sent none.
            try await worker.client.query("SELECT pg_notify('livedelivery_outbox', 'marker')")
            guard case .notification(let notification) = await notifications.next() else {
                Issue.record("no notification")
                return
            }
            #expect(notification.payload == "marker")
            // A claim finds nothing; once sent and answered, the push is no longer waiting.
            #expect(try await worker.dispatcher.dispatchOnce() == 0)
            await worker.dispatcher.dispatch(handed)
            #expect(harness.simulator.pushes(token: token).map(\.status) == [200])
            #expect(try await harness.database.count("SELECT count(*) FROM pushes_waiting") == 0)
            #expect(
                try await harness.database.count(
                    "SELECT count(*) FROM push_attempts WHERE order_id = \(order) AND generation = 0") == 1)
        }
    }

    @Test("a push that replaces one in flight without a row waits in the outbox, held, until that push's answer")
    func replacementWaits() async throws {
        // The worker's clock runs a minute behind and moves ten seconds between the events, so that
        // the replacement is due at once (its timestamp must exceed the first push's).
        let clock = TestClock(Date().addingTimeInterval(-60))
        try await withWorker(now: clock.closure) { harness, worker in
            let capacity = worker.dispatcher.capacity
            capacity.open()
            let (order, token) = try await trackedOrder(worker)
            let first = handed(capacity)
            #expect(first.count == 1)
            clock.set(clock.now.addingTimeInterval(10))
            _ = try await worker.processor.process([Events.status(order, "preparing", sequence: 2)])
            #expect(handed(capacity).isEmpty)
            #expect(capacity.inFlight == 1)  // the slot reserved for the replacement was given back
            let rows = try await harness.database.client.query(
                """
                SELECT lease_owner, attempts, generation, lease_until > now() AS held
                FROM outbox WHERE order_id = \(order)
                """)
            let row = try #require(rows.first)
            #expect(try row.decode(String?.self, "lease_owner") == nil)
            #expect(try row.decode(Int.self, "attempts") == 0)
            #expect(try row.decode(Int64.self, "generation") == 1)
            #expect(try row.decode(Bool.self, "held"))
            #expect(try await worker.dispatcher.dispatchOnce() == 0)  // held: no claim takes it

            // The first push's answer releases it; then it goes.
            await worker.dispatcher.dispatch(first)
            #expect(try await worker.dispatcher.dispatchOnce() == 1)
            #expect(harness.simulator.pushes(token: token).map(\.status) == [200, 200])
            #expect(try await harness.database.count("SELECT count(*) FROM pushes_waiting") == 0)
        }
    }

    @Test("without free slots, or for a paused app, the row is left free for a claim")
    func leftForClaim() async throws {
        try await withWorker { harness, worker in
            let capacity = worker.dispatcher.capacity
            capacity.open()
            // Every slot taken (as by another batch's reservation), then given back.
            let taken = capacity.reserve(upTo: worker.configuration.dispatcher.concurrency)
            let (full, fullToken) = try await trackedOrder(worker)
            #expect(handed(capacity).isEmpty)
            capacity.abandoned(reserved: taken)

            try await harness.database.client.query(
                """
                INSERT INTO app_pauses (bundle_id, reason, status, paused_by, paused_until)
                VALUES (\(bundleID), 'BadTopic', 400, 'test', now() + interval '1 hour')
                """)
            let (paused, _) = try await trackedOrder(worker)
            #expect(handed(capacity).isEmpty)
            #expect(capacity.inFlight == 0)
            #expect(
                try await harness.database.count(
                    "SELECT count(*) FROM outbox WHERE lease_owner IS NULL AND attempts = 0 AND order_id IN (\(full), \(paused))"
                ) == 2)
            // Neither was handed over: their timeline rows list no push (the paused app's was a candidate).
            #expect(
                try await harness.database.count(
                    "SELECT count(*) FROM timeline WHERE handed IS NOT NULL AND order_id IN (\(full), \(paused))") == 0)

            try await harness.database.owner.query("DELETE FROM app_pauses")  // an operator's resume
            try await drain(harness, worker)
            #expect(harness.simulator.pushes(token: fullToken).count == 1)
        }
    }

    @Test("a batch waits for the dispatcher to have room, then hands its push over rather than leave it for a claim")
    func batchWaitsForRoom() async throws {
        try await withWorker(adjust: { $0.dispatcher.handoffWait = .seconds(120) }) { harness, worker in
            let concurrency = worker.configuration.dispatcher.concurrency
            let capacity = worker.dispatcher.capacity
            capacity.open()
            let taken = capacity.reserve(upTo: concurrency)  // every slot, as by another batch
            #expect(taken == concurrency)
            let tracked = Task { try await trackedOrder(worker) }
            try await eventually("the batch waits for room") { capacity.isWaitingForRoom }
            #expect(try await harness.database.count("SELECT count(*) FROM orders") == 0)  // not applied yet

            capacity.abandoned(reserved: taken)
            let (order, _) = try await tracked.value
            #expect(handed(capacity).map(\.orderID) == [order])
            #expect(capacity.inFlight == 1)
            #expect(try await harness.database.count("SELECT count(*) FROM outbox WHERE order_id = \(order)") == 0)
        }
    }

    /// A sweeper that sends again what was handed over without a row at once (a lease of 0).
    func sweeper(_ worker: Worker) -> Sweeper {
        Sweeper(
            configuration: worker.configuration.sweeper, client: worker.client, tracking: worker.configuration.tracking,
            metrics: WorkerMetrics(), logger: quietLogger, lease: .zero)
    }

    @Test("a push handed over whose answer was never recorded is built again and sent by a sweeper, once")
    func lostPushSentAgain() async throws {
        try await withWorker { harness, worker in
            let capacity = worker.dispatcher.capacity
            capacity.open()
            let (order, token) = try await trackedOrder(worker)
            // Its worker stopped before sending it: the claim is dropped.
            let lost = try #require(handed(capacity).first)

            let sweeper = sweeper(worker)
            #expect(try await sweeper.resendLostPushes() == 1)
            let rows = try await harness.database.client.query(
                "SELECT apns_id::text, attempts, lease_until FROM outbox WHERE order_id = \(order)")
            let row = try #require(rows.first)
            #expect(try row.decode(String.self, "apns_id") != lost.push.apnsID.lowercased())  // built again
            #expect(try row.decode(Int.self, "attempts") == 0)
            #expect(try row.decode(Date?.self, "lease_until") == nil)
            #expect(try await sweeper.resendLostPushes() == 0)  // looked at once

            try await drain(harness, worker)  // it may wait for the next second: timestamps strictly increase
            let received = harness.simulator.pushes(token: token)
            #expect(received.map(\.status) == [200])
            #expect(try await harness.database.count("SELECT count(*) FROM pushes_waiting") == 0)
            // The same content, built again with a fresh timestamp.
            let first = try #require(received.first)
            let sent = try #require(contentAndTimestamp(Data(first.payload.utf8)))
            let planned = try #require(contentAndTimestamp(Data(lost.push.payload)))
            #expect(sent.content == planned.content)
            #expect(sent.timestamp > planned.timestamp)
        }
    }

    @Test("a push handed over that was answered, or replaced by a newer one, is not sent again")
    func answeredOrReplacedNotSentAgain() async throws {
        let clock = TestClock(Date().addingTimeInterval(-60))
        try await withWorker(now: clock.closure) { harness, worker in
            let capacity = worker.dispatcher.capacity
            capacity.open()
            let (answered, _) = try await trackedOrder(worker)
            await worker.dispatcher.dispatch(handed(capacity))
            let (replaced, _) = try await trackedOrder(worker)
            #expect(handed(capacity).count == 1)  // dropped: its worker stopped
            clock.set(clock.now.addingTimeInterval(10))
            _ = try await worker.processor.process([Events.status(replaced, "preparing", sequence: 2)])

            #expect(try await sweeper(worker).resendLostPushes() == 0)
            #expect(
                try await harness.database.count(
                    "SELECT count(*) FROM outbox WHERE order_id IN (\(answered), \(replaced))") == 1)  // the held one
        }
    }

    @Test("a transaction still writing holds the search back, so that its pushes are not skipped")
    func openTransactionHoldsTheBound() async throws {
        try await withWorker { harness, worker in
            let capacity = worker.dispatcher.capacity
            capacity.open()
            let sweeper = sweeper(worker)
            try await harness.database.client.withTransaction { open in
                try await open.query("SELECT txid_current()")  // writing: it has a transaction id
                _ = try await trackedOrder(worker)
                _ = handed(capacity)  // dropped
                #expect(try await sweeper.resendLostPushes() == 0)
            }
            #expect(try await sweeper.resendLostPushes() == 1)
        }
    }

    /// A payload's `aps.content-state` and `aps.timestamp`.
    func contentAndTimestamp(_ payload: Data) -> (content: NSDictionary, timestamp: Int)? {
        guard let object = try? JSONSerialization.jsonObject(with: payload) as? [String: Any],
            let aps = object["aps"] as? [String: Any], let content = aps["content-state"] as? NSDictionary,
            let timestamp = aps["timestamp"] as? Int
        else { return nil }
        return (content, timestamp)
    }

    /// What the consumer handed over since the last call, as the claim loop takes it.
    func handed(_ capacity: PushCapacity) -> [Outbox.Claim] {
        if case .send(let claims) = capacity.next() { return claims }
        return []
    }
}
