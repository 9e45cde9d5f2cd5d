import Postgres

/// Row locks and deletes on the outbox by key, shaped so that their plans cannot turn quadratic.
///
/// The outbox is a queue: it empties, fills with a backlog, and empties again. A vacuum that finds
/// it empty records no live rows but keeps its pages, so the planner estimates one row until the
/// next `ANALYZE`, however many there are. A join of the keys with the outbox then put the outbox
/// on the outer side, and with 80,000 pending rows each dispatcher batch walked all of them once
/// per key: 350–600 ms per statement, and a backlog drained at a third of its speed for a minute.
///
/// Here the keys drive: each is one probe of the primary key (a `LATERAL` subquery behind
/// `OFFSET 0`, which the planner may not turn around), and every run is planned afresh, so a plan
/// made while the table was nearly empty (a sequential scan per probe) is never reused once it is
/// full. Rows are then changed by their `ctid`, which stays put while this transaction holds them.
enum Outbox {
    struct Key: Hashable, Sendable {
        var orderID: String
        var activityKey: String
    }

    /// A row this transaction has locked.
    struct LockedRow: Hashable, Sendable {
        var generation: Int64
        /// The row version's `ctid`, in its text form.
        var row: String
    }

    /// Locks the rows of these keys (those that exist), in the order given: callers pass them sorted.
    static func lock(_ keys: [Key], on connection: PostgresConnection) async throws -> [Key: LockedRow] {
        guard !keys.isEmpty else { return [:] }
        return try locked(from: try await connection.query(lockQuery(keys)))
    }

    /// The rows of ``lockQuery(_:)``'s result.
    static func locked(from rows: PostgresRows) throws -> [Key: LockedRow] {
        var locked: [Key: LockedRow] = [:]
        for row in rows {
            let key = Key(
                orderID: try row.decode(String.self, "order_id"),
                activityKey: try row.decode(String.self, "activity_key"))
            locked[key] = LockedRow(
                generation: try row.decode(Int64.self, "generation"), row: try row.decode(String.self, "row"))
        }
        return locked
    }

    static func lockQuery(_ keys: [Key]) -> PostgresQuery {
        let query: PostgresQuery = """
            SELECT o.order_id, o.activity_key, o.generation, o.ctid::text AS row
            FROM unnest(\(keys.map(\.orderID))::text[], \(keys.map(\.activityKey))::text[]) AS k(order_id, activity_key)
            CROSS JOIN LATERAL (
                SELECT d.order_id, d.activity_key, d.generation, d.ctid FROM outbox AS d
                WHERE d.order_id = k.order_id AND d.activity_key = k.activity_key
                OFFSET 0 FOR UPDATE) AS o
            """
        return query.planned(.everyRun)
    }

    /// Deletes rows this transaction locked with ``lock(_:on:)``.
    static func delete(_ rows: [String], on connection: PostgresConnection) async throws {
        guard !rows.isEmpty else { return }
        try await connection.query(deleteQuery(rows))
    }

    static func deleteQuery(_ rows: [String]) -> PostgresQuery {
        let query: PostgresQuery = "DELETE FROM outbox WHERE ctid = ANY (\(rows)::text[]::tid[])"
        return query.planned(.everyRun)
    }
}
