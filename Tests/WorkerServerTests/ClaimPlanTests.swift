import Foundation
import Postgres
import TestSupport
import Testing

@testable import LiveDelivery

@Suite("Claim plans", .timeLimit(.minutes(6)))
struct ClaimPlanTests {
    /// Pending rows `O-1`…`O-n` (each tenth leased, its lease expired an hour ago), due oldest first,
    /// with pushes of `padding` bytes. Autovacuum is kept off the outbox, so its statistics stay as
    /// the test leaves them.
    static func fill(_ client: PostgresClient, rows: Int, padding: Int = 0) async throws {
        try await client.query("ALTER TABLE outbox SET (autovacuum_enabled = false)")
        try await client.query(
            """
            INSERT INTO outbox (order_id, activity_key, kind, bundle_id, environment, priority, apns_id, push, reason,
                                not_before, lease_owner, lease_until)
            SELECT 'O-' || i, 'a', 'update', 'com.example.delivery', 'production', 5, gen_random_uuid(),
                   convert_to(repeat('x', \(padding)::integer), 'UTF8'), 'test', now() - make_interval(secs => i),
                   CASE WHEN i % 10 = 0 THEN 'w' END, CASE WHEN i % 10 = 0 THEN now() - interval '1 hour' END
            FROM generate_series(1, \(rows)) AS i
            """)
    }

    /// Deletes every row and vacuums without giving the pages back: the statistics then say the
    /// outbox holds no rows, whatever is added next.
    static func emptyAndVacuum(_ client: PostgresClient) async throws {
        try await client.query("DELETE FROM outbox")
        try await client.withConnection { try await $0.execute(unsafeSQL: "VACUUM (TRUNCATE false) outbox") }
    }

    /// The claim is planned every run, so its plan follows the outbox's size. Whatever the statistics
    /// say (fresh, or "empty" after a vacuum while a backlog holds 100k rows), a claim on a large
    /// outbox must read it through its indexes and by TID: a claim that scans the whole outbox stalls
    /// every push once the outbox is large (945k pending rows kept one claim running for minutes).
    @Test("each claim reads a large outbox through an index and by TID, never whole, whatever the statistics")
    func claimPlansNeverScanTheOutbox() async throws {
        let database = try await TestDatabase.create()
        try await database.using {
            let client = database.owner  // VACUUM and ANALYZE are the owner's
            func plans() async throws -> [(Outbox.Lease, String)] {
                var plans: [(Outbox.Lease, String)] = []
                for lease in [Outbox.Lease.free, .expired] {
                    let query = Outbox.leaseQuery(lease, workerID: "w", seconds: 60, limit: 250)
                    #expect(query.planning == .everyRun)
                    let rows = try await client.query(
                        PostgresQuery(unsafeSQL: "EXPLAIN " + query.sql, binds: query.binds).planned(.everyRun))
                    plans.append((lease, try rows.map { try $0.decode(String.self, at: 0) }.joined(separator: "\n")))
                }
                return plans
            }
            try await Self.fill(client, rows: 100_000)
            try await client.query("ANALYZE outbox")
            var all = try await plans()
            // Statistics that say the outbox is empty while it holds the same backlog.
            try await Self.emptyAndVacuum(client)
            try await Self.fill(client, rows: 100_000)
            all += try await plans()
            for (lease, plan) in all {
                #expect(!plan.contains("Seq Scan on outbox"), "\(lease): \(plan)")
                #expect(plan.contains("Tid Scan on outbox"), "\(lease): \(plan)")
            }
        }
    }

    /// A vacuum that finds the outbox empty records no live rows but keeps its pages; until the next
    /// `ANALYZE` the planner then believes one row, however many a backlog adds. Locking a dispatcher
    /// batch's rows by key must still probe the primary key once per key: a join that put the outbox
    /// on the outer side walked the whole backlog once per key (350–600 ms per batch at 80k rows).
    @Test("with statistics that say the outbox is empty while it holds a backlog, rows are locked by key probes")
    func lockingByKeyProbesThePrimaryKeyWhateverTheStatistics() async throws {
        let database = try await TestDatabase.create()
        try await database.using {
            let client = database.owner  // VACUUM and ANALYZE are the owner's
            try await Self.fill(client, rows: 3000)
            try await Self.emptyAndVacuum(client)
            try await Self.fill(client, rows: 20000, padding: 500)
            let believed = try await client.query(
                "SELECT reltuples::bigint AS n, relpages FROM pg_class WHERE relname = 'outbox'")
            #expect(try believed.first?.decode(Int.self, "n") == 0)
            #expect(try believed.first?.decode(Int.self, "relpages") ?? 0 > 0)

            let keys =
                (5000..<5200).map { Outbox.Key(orderID: "O-\($0)", activityKey: "a") } + [
                    Outbox.Key(orderID: "O-missing", activityKey: "a")
                ]
            let (locked, plan) = try await client.withTransaction { connection in
                let locked = try await Outbox.lock(keys, on: connection)
                // The same statement, explained: it is planned afresh on every run, as here.
                let explained = try await connection.query(
                    PostgresQuery(
                        unsafeSQL: "EXPLAIN " + Outbox.lockQuery(keys).sql, binds: Outbox.lockQuery(keys).binds
                    ).planned(.everyRun))
                let plan = try explained.map { try $0.decode(String.self, at: 0) }.joined(separator: "\n")
                try await Outbox.delete(locked.values.map(\.row), on: connection)
                return (locked, plan)
            }
            #expect(locked.count == 200)
            #expect(locked[keys[0]]?.generation == 1)
            #expect(
                plan.contains("Index Cond: ((order_id = k.order_id) AND (activity_key = k.activity_key))"), "\(plan)")
            #expect(!plan.contains("Seq Scan on outbox"), "\(plan)")
            #expect(!plan.contains("Join Filter"), "\(plan)")
            let left = try await client.query("SELECT count(*)::bigint AS n FROM outbox")
            #expect(try left.first?.decode(Int.self, "n") == 19800)
        }
    }
}
