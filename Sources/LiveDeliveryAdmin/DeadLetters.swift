package import Foundation
package import LiveDelivery
package import Logging
package import Postgres
package import RabbitMQ

/// One row of `dead_letters`: a message the worker refused, or the broker gave up on.
package struct DeadLetter: Sendable, Hashable {
    package var id: Int64
    package var eventID: String?
    package var routingKey: String
    package var reason: String
    package var field: String?
    package var message: String
    /// The body as kept: whole, or its first 8 KiB (``isWhole``).
    package var body: [UInt8]
    /// The whole body's size, bytes.
    package var bodyLength: Int
    package var receivedAt: Date
    package var replayedAt: Date?

    package init(
        id: Int64, eventID: String?, routingKey: String, reason: String, field: String?, message: String,
        body: [UInt8], bodyLength: Int? = nil, receivedAt: Date, replayedAt: Date?
    ) {
        self.bodyLength = bodyLength ?? body.count
        self.id = id
        self.eventID = eventID
        self.routingKey = routingKey
        self.reason = reason
        self.field = field
        self.message = message
        self.body = body
        self.receivedAt = receivedAt
        self.replayedAt = replayedAt
    }

    /// Whether ``body`` is the whole body (else its first 8 KiB: it cannot be replayed).
    package var isWhole: Bool { body.count >= bodyLength }

    /// The body for people: UTF-8 text with every run of 32 or more hex digits (device tokens)
    /// cut to its first 8 digits and control characters shown as U+FFFD (``TerminalText``); a body
    /// that is not UTF-8 as a hex preview. A body kept in part says so first.
    package var displayBody: String {
        let part = isWhole ? "" : "(the first \(body.count) of \(bodyLength) bytes) "
        // A prefix may end inside a character: decode what is whole of it.
        guard let text = String(validating: body, as: UTF8.self) ?? (isWhole ? nil : Self.wholeCharacters(body))
        else {
            let preview = body.prefix(256).map { String(format: "%02x", $0) }.joined()
            return part + "(\(bodyLength) bytes, not UTF-8) \(preview)" + (body.count > 256 ? "…" : "")
        }
        return part + TerminalText.printable(Self.redactingHexRuns(text), keepingLines: true)
    }

    /// The longest prefix of `bytes` that is UTF-8, cut at most three bytes short; nil if there is none.
    static func wholeCharacters(_ bytes: [UInt8]) -> String? {
        for cut in 0...min(3, bytes.count) {
            if let text = String(validating: bytes.dropLast(cut), as: UTF8.self) { return text }
        }
        return nil
    }

    /// The row as `dead-letters show --format json` prints it: what the text form shows, with the
    /// body as ``displayBody`` (device tokens cut), never the raw bytes.
    package var json: AdminJSON {
        func time(_ date: Date?) -> AdminJSON { date.map { .string(ReportTable.rfc3339($0)) } ?? .null }
        return .object([
            .init("id", .integer(id)),
            .init("received_at", time(receivedAt)),
            .init("reason", .string(reason)),
            .init("field", field.map(AdminJSON.string) ?? .null),
            .init("message", .string(message)),
            .init("routing_key", .string(routingKey)),
            .init("event_id", eventID.map(AdminJSON.string) ?? .null),
            .init("replayed_at", time(replayedAt)),
            .init("body_bytes", .integer(Int64(bodyLength))),
            .init("body_whole", .bool(isWhole)),
            .init("body", .string(displayBody)),
        ])
    }

    static func redactingHexRuns(_ text: String) -> String {
        var result = ""
        var run = ""
        func flush() {
            if run.count >= 32 {
                result += run.prefix(8) + "…(\(run.count) hex digits)"
            } else {
                result += run
            }
            run = ""
        }
        for character in text {
            if character.isHexDigit {
                run.append(character)
            } else {
                flush()
                result.append(character)
            }
        }
        flush()
        return result
    }
}

/// Lists, shows, purges and marks `dead_letters` rows (the operator's side of the dead-letter path).
///
/// Retention: ``purge(olderThan:replayedOnly:)`` deletes old rows; run it from cron
/// (`livedelivery dead-letters purge --older-than 30d`). The worker has no retention setting.
package struct DeadLetterStore: Sendable {
    package let client: PostgresClient

    package init(client: PostgresClient) { self.client = client }

    /// Rows of `report_dead_letters`, newest first; replayed rows only with `includeReplayed`.
    package func list(
        reason: String? = nil, limit: Int? = 100, includeReplayed: Bool = false
    ) async throws
        -> ReportTable
    {
        let rows = try await client.query(
            """
            SELECT * FROM report_dead_letters
            WHERE (\(reason)::text IS NULL OR reason = \(reason)) AND (\(includeReplayed) OR replayed_at IS NULL)
            ORDER BY id DESC
            LIMIT \(limit)
            """)
        return ReportTable(rows)
    }

    /// One row with its body; nil when there is no such row.
    package func get(_ id: Int64) async throws -> DeadLetter? {
        let rows = try await client.query(
            """
            SELECT id, event_id, routing_key, reason, field, message, body,
                   coalesce(body_length, octet_length(body)) AS body_length, received_at, replayed_at
            FROM dead_letters WHERE id = \(id)
            """)
        guard let row = rows.first else { return nil }
        return DeadLetter(
            id: try row.decode(Int64.self, "id"),
            eventID: try row.decode(String?.self, "event_id"),
            routingKey: try row.decode(String.self, "routing_key"),
            reason: try row.decode(String.self, "reason"),
            field: try row.decode(String?.self, "field"),
            message: try row.decode(String.self, "message"),
            body: try row.decode([UInt8].self, "body"),
            bodyLength: try row.decode(Int.self, "body_length"),
            receivedAt: try row.decode(Date.self, "received_at"),
            replayedAt: try row.decode(Date?.self, "replayed_at"))
    }

    /// Ids of the rows not replayed yet, oldest first (optionally of one reason).
    package func pendingIDs(reason: String? = nil) async throws -> [Int64] {
        let rows = try await client.query(
            """
            SELECT id FROM dead_letters
            WHERE replayed_at IS NULL AND (\(reason)::text IS NULL OR reason = \(reason))
            ORDER BY id
            """)
        return try rows.map { try $0.decode(Int64.self, "id") }
    }

    /// Sets `replayed_at` to now.
    package func markReplayed(_ id: Int64) async throws {
        try await client.query("UPDATE dead_letters SET replayed_at = now() WHERE id = \(id)")
    }

    /// Deletes rows received more than `age` seconds ago (only replayed ones with `replayedOnly`);
    /// returns how many.
    @discardableResult
    package func purge(olderThan age: TimeInterval, replayedOnly: Bool = false) async throws -> Int {
        let rows = try await client.query(
            """
            DELETE FROM dead_letters
            WHERE received_at < now() - make_interval(secs => \(age))
              AND (NOT \(replayedOnly) OR replayed_at IS NOT NULL)
            """)
        return rows.affectedRows
    }
}

/// Republishes dead letters to the events exchange with publisher confirms: the original body,
/// routing key and `message_id` (the event id), persistent, `application/json`. A row is marked
/// `replayed_at` only after the broker confirmed it. Replaying twice is harmless: the worker's
/// inbox applies each event once.
package final class DeadLetterReplayer: Sendable {
    package enum Result: Sendable, Hashable {
        case replayed(id: Int64, routingKey: String)
        case notFound(id: Int64)
        /// Only a prefix of its body was kept: there is nothing whole to replay.
        case notWhole(id: Int64, bytes: Int)
    }

    let store: DeadLetterStore
    let publisher: RabbitMQPublisher
    let exchange: String
    let logger: Logger

    private init(store: DeadLetterStore, publisher: RabbitMQPublisher, exchange: String, logger: Logger) {
        self.store = store
        self.publisher = publisher
        self.exchange = exchange
        self.logger = logger
    }

    /// Connects a confirming publisher to the first of the broker's nodes that accepts.
    package static func connect(
        store: DeadLetterStore, endpoints: AMQPEndpoints, exchange: String, logger: Logger
    ) async throws(LiveDeliveryError) -> DeadLetterReplayer {
        do {
            let (publisher, _) = try await RabbitMQPublisher.connect(to: endpoints, logger: logger)
            return DeadLetterReplayer(store: store, publisher: publisher, exchange: exchange, logger: logger)
        } catch {
            throw LiveDeliveryError(.broker, "cannot connect to RabbitMQ: \(error.code)", isRetriable: true)
        }
    }

    /// Replays the rows, in the order given; stops at the first broker or database failure.
    /// `progress` is called with the number of ids done after each one.
    package func replay(_ ids: [Int64], progress: (Int) -> Void = { _ in }) async throws -> [Result] {
        var results: [Result] = []
        for id in ids {
            defer { progress(results.count) }
            guard let letter = try await store.get(id) else {
                results.append(.notFound(id: id))
                continue
            }
            guard letter.isWhole else {
                results.append(.notWhole(id: id, bytes: letter.bodyLength))
                continue
            }
            let properties = RabbitMQMessageProperties(
                contentType: "application/json",
                headers: ["x-livedelivery-replay-of": .int64(letter.id)],
                deliveryMode: .persistent,
                messageID: letter.eventID)
            do {
                try await publisher.publish(
                    exchange: exchange, routingKey: letter.routingKey, body: letter.body, properties: properties,
                    mandatory: true)
            } catch {
                throw LiveDeliveryError(
                    .broker, "dead letter \(id) was not replayed: \(error.code)", isRetriable: error.isRetriable)
            }
            try await store.markReplayed(id)
            logger.info(
                "dead letter replayed",
                metadata: [
                    LiveDeliveryLoggingKeys.eventID: "\(letter.eventID ?? "")",
                    LiveDeliveryLoggingKeys.reason: "\(letter.reason)",
                ])
            results.append(.replayed(id: id, routingKey: letter.routingKey))
        }
        return results
    }

    package func close() async {
        await publisher.close()
    }
}
