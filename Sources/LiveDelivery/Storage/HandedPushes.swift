import Foundation
import LiveDeliveryCore
import Postgres

/// Pushes the consumer handed to its own dispatcher in memory, without an outbox row (`sql/126`), and the
/// search for those whose worker stopped before their answers were recorded.
///
/// Nothing is written to find them: the consumer's timeline row lists each such push's `apns-id`
/// (`timeline.handed`), and every answer writes a `push_attempts` row with it. A sweeper that wins the one row
/// of `handed_push_checks` reads the timeline rows written since its `checked_until` and older than the
/// dispatcher's lease, and keeps the ids with no attempt and no outbox row. Their orders are then locked: a push
/// still its activity's pending one is built again and written to the outbox (``Sweeper``).
enum HandedPushes {
    /// A push handed over whose answer was not recorded within the lease.
    struct Unanswered: Hashable, Sendable {
        var orderID: String
        var apnsID: String
    }

    /// A round's slice of the timeline: where it ends, and the pushes in it with no answer.
    struct Slice: Sendable {
        var until: Date
        var unanswered: [Unanswered]
    }

    /// Takes this round's turn (nil when another worker's round holds it, or when no time has passed since the
    /// last round's bound) and reads the slice: the timeline
    /// rows that handed pushes over, from `checked_until` to a lease ago, but never from the start of a
    /// transaction of this database that is still writing (its rows are not visible yet; this needs the
    /// workers to share a login, as they do, since `pg_stat_activity` hides other logins' transactions), and
    /// at most `limit` rows (the slice then ends at the last one read, which the next round reads again).
    static func slice(
        leaseSeconds: Double, limit: Int, on connection: PostgresConnection
    ) async throws -> Slice? {
        let bound: PostgresQuery = """
            SELECT checked_until,
                   least(now() - make_interval(secs => \(leaseSeconds)),
                         (SELECT min(xact_start) FROM pg_stat_activity
                          WHERE datname = current_database() AND backend_xid IS NOT NULL
                            AND pid <> pg_backend_pid())) AS until
            FROM handed_push_checks FOR UPDATE SKIP LOCKED
            """
        guard let row = try await connection.query(bound).first else { return nil }
        let from = try row.decode(Date.self, "checked_until")
        let until = try row.decode(Date.self, "until")
        guard until > from else { return nil }
        // Planned every run: a round reads a second of rows, or hours of them after the workers were stopped.
        let query: PostgresQuery = """
            WITH slice AS (
                SELECT t.order_id, t.handed, t.at FROM timeline AS t
                WHERE t.handed IS NOT NULL AND t.at >= \(from) AND t.at < \(until)
                ORDER BY t.at LIMIT \(limit)
            )
            SELECT NULL AS order_id, NULL AS apns_id, count(*) AS n, max(at) AS last FROM slice
            UNION ALL
            SELECT s.order_id, h.id::text, NULL, NULL
            FROM slice AS s CROSS JOIN LATERAL unnest(s.handed) AS h(id)
            WHERE NOT EXISTS (SELECT 1 FROM push_attempts AS a
                              WHERE a.order_id = s.order_id AND a.apns_id = h.id AND a.attempted_at >= s.at)
              AND NOT EXISTS (SELECT 1 FROM outbox AS o WHERE o.order_id = s.order_id AND o.apns_id = h.id)
            """
        var slice = Slice(until: until, unanswered: [])
        for row in try await connection.query(query.planned(.everyRun)) {
            guard let orderID = try row.decode(String?.self, "order_id") else {
                if try row.decode(Int.self, "n") >= limit, let last = try row.decode(Date?.self, "last") {
                    slice.until = last
                }
                continue
            }
            slice.unanswered.append(Unanswered(orderID: orderID, apnsID: try row.decode(String.self, "apns_id")))
        }
        return slice
    }

    /// Moves `checked_until` to the end of the slice read.
    static func checked(until: Date, on connection: PostgresConnection) async throws {
        try await connection.query("UPDATE handed_push_checks SET checked_until = \(until)")
    }
}
