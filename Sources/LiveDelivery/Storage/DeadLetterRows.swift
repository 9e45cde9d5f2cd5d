import Postgres

/// The worker's writes of `dead_letters`: a message refused on arrival, or dead-lettered by the broker.
/// One row per distinct message (routing key and body); the admin side reads and replays them
/// (`LiveDeliveryAdmin/DeadLetters.swift`).
enum DeadLetterRows {
    /// Records a message; returns its row's `id` when it was new, nothing when the same message is on
    /// file already.
    static func insertQuery(
        eventID: String?, routingKey: String, reason: String, field: String?, message: String, body: [UInt8]
    ) -> PostgresQuery {
        """
        INSERT INTO dead_letters (event_id, routing_key, reason, field, message, body, body_sha256)
        VALUES (\(eventID), \(routingKey), \(reason), \(field), \(message), \(body), sha256(\(body)))
        ON CONFLICT (routing_key, body_sha256) DO NOTHING
        RETURNING id
        """
    }
}
