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
    @Test("a new push is inserted leased to this worker and handed over after commit, without a NOTIFY")
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
            #expect(claim.generation == 1 && claim.attempts == 1)
            #expect(claim.push.deviceToken?.hex == token)
            #expect(capacity.inFlight == 1)
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
            let capacity = worker.dispatcher.capacity
            capacity.open()
            let (order, _) = try await trackedOrder(worker)
            #expect(handed(capacity).count == 1)
            clock.set(clock.now.addingTimeInterval(10))
            _ = try await worker.processor.process([Events.status(order, "preparing", sequence: 2)])
            #expect(handed(capacity).isEmpty)
            #expect(capacity.inFlight == 1)  // the slot reserved for the replacement was given back
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
            #expect(
                try await harness.database.count(
                    "SELECT count(*) FROM outbox WHERE order_id = \(order) AND lease_owner IS NOT NULL") == 1)
        }
    }

    /// What the consumer handed over since the last call, as the claim loop takes it.
    func handed(_ capacity: PushCapacity) -> [Outbox.Claim] {
        if case .send(let claims) = capacity.next() { return claims }
        return []
    }
}
