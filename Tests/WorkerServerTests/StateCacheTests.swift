import APNsSimulator
import Foundation
import LiveDeliveryCore
import Postgres
import TestSupport
import Testing

@testable import LiveDelivery

@Suite("Order state cache", .timeLimit(.minutes(6)))
struct StateCacheTests {
    private func state(_ orderID: String, user: String) -> OrderState {
        var state = OrderState(orderID: orderID, now: Date(timeIntervalSince1970: 1_800_000_000))
        state.seenEventIDs = ["evt-\(user)"]
        return state
    }

    @Test("bounded: two generations of half the capacity; the newest write of an order wins")
    func bounded() {
        let cache = OrderStateCache(capacity: 4)
        cache.store((1...3).map { .init(orderID: "o\($0)", version: Int64($0), state: state("o\($0)", user: "a")) })
        // o1 and o2 filled the young generation; o3 started a new one.
        cache.store([.init(orderID: "o4", version: 4, state: state("o4", user: "a"))])
        cache.store([.init(orderID: "o5", version: 5, state: state("o5", user: "a"))])
        let held = cache.entries(["o1", "o2", "o3", "o4", "o5"])
        #expect(Set(held.keys) == ["o3", "o4", "o5"])
        #expect(cache.count <= 4)
        cache.store([.init(orderID: "o3", version: 9, state: state("o3", user: "b"))])
        #expect(cache.entries(["o3"])["o3"]?.version == 9)
        #expect(cache.entries(["o3"])["o3"]?.state.seenEventIDs == ["evt-b"])
        #expect(OrderStateCache(capacity: 0).entries(["o3"]).isEmpty)
    }

    @Test("entries older than the maximum age are not used")
    func expiry() {
        let cache = OrderStateCache(capacity: 8, maximumAge: .zero)
        cache.store([.init(orderID: "o1", version: 1, state: state("o1", user: "a"))])
        #expect(cache.entries(["o1"]).isEmpty)
    }

    /// The cache is trusted only at the row's current version: proven by holding a state that differs
    /// from the row's. It is served while the row is untouched, and dropped for the row's own state
    /// as soon as anything writes the row.
    @Test("a held state is served only while the row's version (xmin) is the one it was written as")
    func servedOnlyAtTheWrittenVersion() async throws {
        let database = try await TestDatabase.create()
        try await database.using {
            let orderID = "O-cache"
            let cache = OrderStateCache()
            let stored = state(orderID, user: "stored")
            let written = try await database.client.withTransaction { connection in
                _ = try await OrderStore.lockOrders([orderID], on: connection)
                return try await OrderStore.write(
                    [OrderChange(original: nil, state: stored)], kind: "event", now: Date(), on: connection)
            }
            #expect(written.map(\.orderID) == [orderID])
            let version = try #require(written.first?.version)
            // The same version with another state: only the cache can return it.
            let impostor = state(orderID, user: "held")
            cache.store([.init(orderID: orderID, version: version, state: impostor)])
            let read = try await database.client.withTransaction { connection in
                try await OrderStore.lockExisting([orderID], cache: cache, on: connection)
            }
            #expect(read[orderID]??.seenEventIDs == ["evt-held"])

            // Any write gives the row a new version: the row's own state comes back.
            try await database.client.query("UPDATE orders SET updated_at = now() WHERE order_id = \(orderID)")
            let after = try await database.client.withTransaction { connection in
                try await OrderStore.lockExisting([orderID, "O-missing"], cache: cache, on: connection)
            }
            #expect(after[orderID]??.seenEventIDs == ["evt-stored"])
            #expect(after.keys.sorted() == [orderID])
        }
    }

    @Test("a worker's push outcome is recorded from the state its event wrote, and both land in the row")
    func consumerThenDispatcherShareTheCache() async throws {
        try await withWorker { harness, worker in
            let order = TestEnvironment.uniqueName("C")
            let token = Events.token()
            _ = try await worker.processor.process([
                Events.status(order, "confirmed", sequence: 1),
                Events.activityToken(order, activity: "act-" + order, token: token),
            ])
            #expect(worker.processor.states === worker.dispatcher.states)
            #expect(worker.processor.states.entries([order])[order] != nil)
            while try await worker.dispatcher.dispatchOnce() > 0 {}
            let held = try #require(worker.processor.states.entries([order])[order])
            // The cache holds what a read of the row gives: the accepted push is in both (in the
            // activity's row, settled on reading; the order's row is not written again for it).
            let row = try await harness.database.client.query(
                "SELECT state, xmin::text::bigint AS version FROM orders WHERE order_id = \(order)")
            var stored = try OrderStore.decodeState(try row[0].decode([UInt8]?.self, "state"))
            stored?.settleDelivered(
                try OrderStore.accepted(
                    from: try await harness.database.client.query(OrderStore.acceptedQuery([order])))[
                        order] ?? [])
            #expect(try row[0].decode(Int64.self, "version") == held.version)
            #expect(stored == held.state)
            #expect(held.state.activities.first?.sent != nil)
            #expect(held.state.activities.first?.pending == nil)
        }
    }

    /// APNs' acceptance of an activity's current update does not rewrite the order's state: its id goes
    /// to the activity's row, and every read settles it (`sql/116`). Proven on the rows
    /// themselves, by a reader with no cache, and by a second worker's next event.
    @Test("a delivered current update leaves the order's state as it was; every later read settles it")
    func deliveredUpdateFolded() async throws {
        try await withWorker { harness, worker in
            let (order, token) = try await trackedOrder(worker)
            let planned = try await harness.database.client.withTransaction { connection in
                try await OrderStore.lockExisting([order], on: connection)
            }
            let pendingID = try #require(planned[order]??.activities.first?.pending?.apnsID)
            let stateText: PostgresQuery = "SELECT state::text FROM orders WHERE order_id = \(order)"
            let before = try await harness.database.strings(stateText)
            try await eventually("the outbox is empty") {
                try await worker.dispatcher.dispatchOnce()
                return try await harness.database.count("SELECT count(*) FROM outbox") == 0
            }
            #expect(harness.simulator.pushes(token: token).filter { $0.status == 200 }.count == 1)
            #expect(try await harness.database.strings(stateText) == before)  // the state is as it was
            #expect(
                try await harness.database.strings(
                    "SELECT delivered_apns_id::text FROM activities WHERE order_id = \(order)") == [pendingID])
            #expect(
                try await harness.database.strings(
                    """
                    SELECT concat_ws(' ', coalesce(pending_kind, '-'), last_sent_step)
                    FROM activities WHERE order_id = \(order)
                    """) == ["- confirmed"])
            #expect(
                try await harness.database.strings("SELECT outcome FROM push_attempts WHERE order_id = \(order)")
                    == ["delivered"])
            #expect(
                try await harness.database.count(
                    "SELECT count(*) FROM timeline_decisions WHERE order_id = \(order) AND code = 'push_accepted'") == 0
            )

            // A reader with no cache settles it as the worker's cache holds it.
            let read = try await harness.database.client.withTransaction { connection in
                try await OrderStore.lockExisting([order], on: connection)
            }
            let settled = try #require(read[order] ?? nil)
            #expect(settled.activities.first?.pending == nil)
            #expect(settled.activities.first?.sent?.step == "confirmed")
            #expect(worker.processor.states.entries([order])[order]?.state == settled)

            // A second worker (its own cache, empty) applies the next event on the settled state; its
            // write carries the acceptance into the state, where the id left in the activity's row settles
            // nothing more.
            let second = try harness.worker()
            var failure: (any Error)?
            do {
                _ = try await second.processor.process([Events.status(order, "preparing", sequence: 2)])
            } catch {
                failure = error
            }
            await second.dispatcher.sender.shutdown()
            await second.client.shutdown()
            if let failure { throw failure }
            let row = try await harness.database.client.query("SELECT state FROM orders WHERE order_id = \(order)")
            let written = try #require(try OrderStore.decodeState(try row[0].decode([UInt8]?.self, "state")))
            #expect(written.activities.first?.sent?.step == "confirmed")
            #expect(written.activities.first?.pending?.mark.step == "preparing")
            #expect(written.activities.first?.pending?.apnsID != pendingID)
            let reread = try await harness.database.client.withTransaction { connection in
                try await OrderStore.lockExisting([order], on: connection)
            }
            #expect(reread[order] == written)
        }
    }

    /// A read whose lock waited for the transaction that recorded a delivery settles that delivery. (The
    /// ids live in the activities' rows, which that transaction writes without writing the order's: read
    /// by a statement of their own after the lock, they are seen; read with the lock's snapshot, they
    /// were missed.)
    @Test("a read that waited for the lock of a delivery's record sees that delivery")
    func readAfterWaitingSeesTheDelivery() async throws {
        try await withWorker { harness, worker in
            let (order, _) = try await trackedOrder(worker)
            let client = harness.database.client
            let planned = try await client.withTransaction { try await OrderStore.lockExisting([order], on: $0) }
            let pending = try #require(planned[order]??.activities.first?.pending)
            let reader = try await client.withTransaction { recording in
                // What the dispatcher writes for a delivered current update, not yet committed.
                try await recording.query("SELECT 1 FROM orders WHERE order_id = \(order) FOR UPDATE")
                try await recording.query(
                    """
                    UPDATE activities SET delivered_apns_id = \(pending.apnsID)::uuid, pending_kind = NULL
                    WHERE order_id = \(order)
                    """)
                let reader = Task {
                    try await client.withTransaction { try await OrderStore.lockExisting([order], on: $0) }
                }
                try await eventually("the reader waits for the order's lock") {
                    // As the worker's login: pg_stat_activity shows a query's text to its own role only.
                    try await client.query(
                        """
                        SELECT count(*) FROM pg_stat_activity
                        WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%FOR UPDATE OF o%'
                        """
                    ).first?.decode(Int.self, at: 0) == 1
                }
                return reader
            }
            let state = try #require(try await reader.value[order] ?? nil)
            #expect(state.activities.first?.pending == nil)
            #expect(state.activities.first?.sent == pending.mark)
        }
    }
}
