import LiveDeliveryCore
import Postgres

/// The `inbox` table: one row per event applied, so that a redelivered or duplicated event is
/// applied once (its primary key is the event's id and time).
enum Inbox {
    /// Inserts the events' rows; returns the ids of those that were new (`event_id`). Inserted in
    /// event-id order, so that two workers holding overlapping batches (redeliveries, duplicated streams)
    /// wait for each other on the unique index instead of deadlocking.
    static func insertQuery(_ events: [InboundEvent]) -> PostgresQuery {
        """
        INSERT INTO inbox (event_id, event_type, order_id, user_id, occurred_at)
        SELECT e, t, NULLIF(o, ''), NULLIF(u, ''), a
        FROM unnest(\(PostgresTextArray(events.map(\.eventID)))::text[], \(PostgresTextArray(events.map(\.type.rawValue)))::text[],
                    \(PostgresTextArray(events.map { $0.orderID ?? "" }))::text[], \(PostgresTextArray(events.map { $0.userID ?? "" }))::text[],
                    \(events.map(\.occurredAt))::timestamptz[]) AS i(e, t, o, u, a)
        ORDER BY e COLLATE "C"
        ON CONFLICT (event_id, occurred_at) DO NOTHING
        RETURNING event_id
        """
    }

    /// The ids of the new events, from ``insertQuery(_:)``'s rows.
    static func fresh(from rows: PostgresRows) throws -> Set<String> {
        var fresh = Set<String>()
        for row in rows { fresh.insert(try row.decode(String.self, "event_id")) }
        return fresh
    }
}
