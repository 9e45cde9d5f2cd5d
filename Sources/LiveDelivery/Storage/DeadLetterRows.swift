import Crypto
import Postgres

/// The worker's writes of `dead_letters`: a message refused on arrival, or dead-lettered by the broker.
/// One row per distinct message (routing key and body); the admin side reads and replays them
/// (`LiveDeliveryAdmin/DeadLetters.swift`).
///
/// What a publisher sent is bounded here: the body is kept up to ``bodyPrefix`` bytes, with its whole
/// length and its SHA-256 (computed here, so the body goes to the database once, and only its prefix),
/// and the texts it chose (the routing key, the message id) lose any U+0000, which `text` cannot store.
package enum DeadLetterRows {
    /// 8 KiB: an event is well under 1 KiB; a body of up to this many bytes is kept whole (and can be
    /// replayed); a longer one keeps its first 8 KiB, to be looked at.
    package static let bodyPrefix = 8192

    /// Records a message; returns its row's `id` when it was new, nothing when the same message is on
    /// file already.
    static func insertQuery(
        eventID: String?, routingKey: String, reason: String, field: String?, message: String, body: [UInt8]
    ) -> PostgresQuery {
        let kept = Array(body.prefix(bodyPrefix))
        let hash = Array(SHA256.hash(data: body))
        return """
            INSERT INTO dead_letters (event_id, routing_key, reason, field, message, body, body_length, body_sha256)
            VALUES (\(eventID.map(storable)), \(storable(routingKey)), \(storable(reason)), \(field.map(storable)),
                    \(storable(message)), \(kept), \(body.count), \(hash))
            ON CONFLICT (routing_key, body_sha256) DO NOTHING
            RETURNING id
            """
    }

    /// `text` as PostgreSQL can store it: U+0000 replaced by U+FFFD.
    static func storable(_ text: String) -> String {
        guard text.utf8.contains(0) else { return text }
        return String(String.UnicodeScalarView(text.unicodeScalars.map { $0 == "\u{0000}" ? "\u{FFFD}" : $0 }))
    }
}
