import Foundation
import Postgres
import Testing

@testable import LiveDelivery

@Suite("Claim plans", .timeLimit(.minutes(2)))
struct ClaimPlanTests {
    /// The claim is a prepared statement, so after a few runs PostgreSQL may keep a generic plan, one
    /// made without knowing `LIMIT $n`. Whatever it chooses, the outbox must be read through its
    /// indexes and by TID: a claim that scans the whole outbox stalls every push once the outbox is
    /// large (945k pending rows kept one claim running for minutes).
    @Test("the generic plan of each claim reads the outbox through an index and by TID, never whole")
    func genericClaimPlansNeverScanTheOutbox() async throws {
        let database = try await TestDatabase.create()
        try await database.using {
            try await database.client.query(
                """
                INSERT INTO outbox (order_id, activity_key, kind, bundle_id, environment, priority, apns_id, push, reason,
                                    not_before, lease_owner, lease_until)
                SELECT 'O-' || i, 'a', 'update', 'com.example.delivery', 'production', 5, gen_random_uuid(),
                       '{}'::json, 'test', now() - make_interval(secs => i),
                       CASE WHEN i % 10 = 0 THEN 'w' END, CASE WHEN i % 10 = 0 THEN now() - interval '1 hour' END
                FROM generate_series(1, 100000) AS i
                """)
            try await database.client.query("ANALYZE outbox")
            for lease in [PushDispatcher.Lease.free, .expired] {
                let query = PushDispatcher.leaseQuery(lease, workerID: "w", seconds: 60, limit: 250)
                let plan = try await database.client.withConnection { connection in
                    try await connection.execute(unsafeSQL: "SET plan_cache_mode = force_generic_plan")
                    try await connection.execute(unsafeSQL: "PREPARE claim AS \(query.sql)")
                    let rows = try await connection.query(
                        PostgresQuery(unsafeSQL: "EXPLAIN EXECUTE claim('w', 60, 250)"))
                    try await connection.execute(unsafeSQL: "DEALLOCATE claim; RESET plan_cache_mode")
                    return try rows.map { try $0.decode(String.self, at: 0) }.joined(separator: "\n")
                }
                #expect(!plan.contains("Seq Scan on outbox"), "\(lease): \(plan)")
                #expect(plan.contains("Tid Scan on outbox"), "\(lease): \(plan)")
            }
        }
    }
}
