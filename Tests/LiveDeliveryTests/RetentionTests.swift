import Foundation
import LiveDelivery
import Postgres
import TestSupport
import Testing

@Suite("Retention", .timeLimit(.minutes(3)))
struct RetentionTests {
    @Test("history older than the retention is deleted in batches; newer history and orders stay")
    func deletesOnlyOldHistory() async throws {
        try await withWorker(adjust: {
            $0.retention.days = 7
            $0.retention.batchSize = 2
        }) { harness, worker in
            let (order, _) = try await trackedOrder(worker)
            try await eventually("the push is recorded") {
                try await worker.dispatcher.dispatchOnce()
                return try await harness.database.count("SELECT count(*) FROM push_attempts") > 0
            }
            let recent = (
                inbox: try await harness.database.count("SELECT count(*) FROM inbox"),
                attempts: try await harness.database.count("SELECT count(*) FROM push_attempts"),
                timeline: try await harness.database.count("SELECT count(*) FROM timeline")
            )
            // Five rows of each kind from 8 days ago (more than two batches).
            let client = harness.database.client
            for index in 0..<5 {
                try await client.query(
                    """
                    INSERT INTO inbox (event_id, event_type, order_id, occurred_at, processed_at)
                    VALUES (\("old-\(index)"), 'order.status', \(order), now() - interval '8 days', now() - interval '8 days')
                    """)
                try await client.query(
                    """
                    INSERT INTO push_attempts (order_id, activity_key, kind, bundle_id, priority, generation, apns_id,
                                               status, outcome, latency_ms, worker_id, attempted_at)
                    VALUES (\(order), 'activity:old', 'update', 'com.example.pizza', 5, 1, gen_random_uuid(), 200,
                            'delivered', 1.0, 'test', now() - interval '8 days')
                    """)
                // Timeline ids grow with time (every row takes now()), so old rows hold the lowest ids.
                try await client.query(
                    """
                    INSERT INTO timeline (id, order_id, kind, code, message, at)
                    VALUES (\(index - 10), \(order), 'event', 'old', 'old', now() - interval '8 days')
                    """)
            }
            let deleted = try await worker.retention.runOnce()
            #expect(deleted == ["inbox": 5, "push_attempts": 5, "timeline": 5])
            #expect(try await harness.database.count("SELECT count(*) FROM inbox") == recent.inbox)
            #expect(try await harness.database.count("SELECT count(*) FROM push_attempts") == recent.attempts)
            #expect(try await harness.database.count("SELECT count(*) FROM timeline") == recent.timeline)
            #expect(try await harness.database.count("SELECT count(*) FROM orders WHERE order_id = \(order)") == 1)
            #expect(try await worker.retention.runOnce() == ["inbox": 0, "push_attempts": 0, "timeline": 0])
        }
    }
}
