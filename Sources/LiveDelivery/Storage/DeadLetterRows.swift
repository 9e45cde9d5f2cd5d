import Crypto
import Postgres

/// The worker's writes of `dead_letters`: a message refused on arrival, or dead-lettered by the broker.
/// One row per distinct message (routing key and body); the admin side reads and replays them
/// (`LiveDeliveryAdmin/DeadLetters.swift`).
///
/// What a publisher sent is bounded here: the body is kept up to ``bodyPrefix`` bytes, with its whole
/// length and its SHA-256 (computed here, so the body goes to the database once, and only its prefix),
/// and the texts it chose (the routing key, the message id) are kept up to ``textPrefix`` bytes and
/// lose any U+0000, which `text` cannot store.
package enum DeadLetterRows {
    /// 8 KiB: an event is well under 1 KiB; a body of up to this many bytes is kept whole (and can be
    /// replayed); a longer one keeps its first 8 KiB, to be looked at.
    package static let bodyPrefix = 8192

    /// 255 bytes, as much as AMQP carries in a routing key or a message id: a longer text (a routing key
    /// from an `x-death` header, which a publisher may write at any length) keeps its first bytes, cut on a
    /// UTF-8 boundary and ended with ``cutMarker``, within 255 bytes. The routing key is part of a unique
    /// index, whose rows PostgreSQL caps at about 2.7 kB.
    package static let textPrefix = 255

    /// Ends a text cut to ``textPrefix`` bytes.
    package static let cutMarker = "…"

    /// Records a message; returns its row's `id` when it was new, nothing when the same message is on
    /// file already.
    static func insertQuery(
        eventID: String?, routingKey: String, reason: String, field: String?, message: String, body: [UInt8]
    ) -> PostgresQuery {
        let kept = Array(body.prefix(bodyPrefix))
        let hash = Array(SHA256.hash(data: body))
        return """
            INSERT INTO dead_letters (event_id, routing_key, reason, field, message, body, body_length, body_sha256)
            VALUES (\(eventID.map(bounded)), \(bounded(routingKey)), \(storable(reason)), \(field.map(storable)),
                    \(storable(message)), \(kept), \(body.count), \(hash))
            ON CONFLICT (routing_key, body_sha256) DO NOTHING
            RETURNING id
            """
    }

    /// A text a publisher chose, as stored: ``storable(_:)``, and cut to ``textPrefix`` bytes if longer.
    static func bounded(_ text: String) -> String {
        let text = storable(text)
        guard text.utf8.count > textPrefix else { return text }
        let room = textPrefix - cutMarker.utf8.count
        var kept = Substring.UnicodeScalarView()
        var bytes = 0
        for scalar in text.unicodeScalars {
            bytes += UTF8.width(scalar)
            guard bytes <= room else { break }
            kept.append(scalar)
        }
        return String(kept) + cutMarker
    }

    /// `text` as PostgreSQL can store it: U+0000 replaced by U+FFFD.
    static func storable(_ text: String) -> String {
        guard text.utf8.contains(0) else { return text }
        return String(String.UnicodeScalarView(text.unicodeScalars.map { $0 == "\u{0000}" ? "\u{FFFD}" : $0 }))
    }
}
