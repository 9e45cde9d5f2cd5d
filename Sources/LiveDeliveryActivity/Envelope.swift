import Foundation

/// The fields every event shares (`type`, `version`, `event_id`, `occurred_at`), written and read for each
/// report type.
struct Envelope: Hashable, Sendable {
    var eventID: String
    var occurredAt: Date

    /// Checks the identifier and the instant, and keeps the instant as the worker will read it back.
    init(eventID: String, occurredAt: Date) throws(EventContractError) {
        try EventContract.checkText(eventID, field: "event_id", length: EventContract.eventIDLength)
        guard Timestamp.parse(Timestamp.format(occurredAt)) != nil else {
            throw EventContractError(field: "occurred_at", "must be between the years 0 and 9999")
        }
        self.eventID = eventID
        self.occurredAt = Timestamp.normalized(occurredAt)
    }

    func encode(type: String, into container: inout KeyedEncodingContainer<EventCodingKey>) throws {
        try container.encode(type, forKey: EventCodingKey("type"))
        try container.encode(EventContract.version, forKey: EventCodingKey("version"))
        try container.encode(eventID, forKey: EventCodingKey("event_id"))
        try container.encode(Timestamp.format(occurredAt), forKey: EventCodingKey("occurred_at"))
    }

    /// Reads the envelope of a report of `type`, refusing another type or version.
    init(type: String, from container: KeyedDecodingContainer<EventCodingKey>) throws {
        let found = try container.decode(String.self, forKey: EventCodingKey("type"))
        guard found == type else { throw container.contractError("type", "must be '\(type)', not '\(found)'") }
        let version = try container.decode(Int.self, forKey: EventCodingKey("version"))
        guard version == EventContract.version else { throw container.contractError("version", "must be 1") }
        let eventID = try container.decode(String.self, forKey: EventCodingKey("event_id"))
        let occurredAt = try container.timestamp("occurred_at")
        do {
            try self.init(eventID: eventID, occurredAt: occurredAt)
        } catch {
            throw container.contractError(error.field, error.message)
        }
    }
}

/// A key of an event's JSON object: the contract's own field names.
struct EventCodingKey: CodingKey, Hashable {
    var stringValue: String
    var intValue: Int? { nil }

    init(_ name: String) { stringValue = name }
    init?(stringValue: String) { self.stringValue = stringValue }
    init?(intValue: Int) { nil }
}

extension KeyedDecodingContainer where Key == EventCodingKey {
    func contractError(_ field: String, _ message: String) -> DecodingError {
        DecodingError.dataCorrupted(
            DecodingError.Context(
                codingPath: codingPath + [EventCodingKey(field)], debugDescription: "\(field) \(message)",
                underlyingError: EventContractError(field: field, message)))
    }

    func timestamp(_ field: String) throws -> Date {
        let text = try decode(String.self, forKey: EventCodingKey(field))
        guard let date = Timestamp.parse(text) else {
            throw contractError(field, "is not an RFC 3339 timestamp with an offset")
        }
        return date
    }

    /// An optional text, nil when absent, `null`, empty or whitespace only (as the worker reads it).
    func optionalText(_ field: String) throws -> String? {
        guard let text = try decodeIfPresent(String.self, forKey: EventCodingKey(field)) else { return nil }
        return text.allSatisfy(\.isWhitespace) ? nil : text
    }

    /// Runs a throwing initializer, turning its contract error into a decoding error at the field.
    func checked<T>(_ make: () throws(EventContractError) -> T) throws -> T {
        do {
            return try make()
        } catch {
            throw contractError(error.field, error.message)
        }
    }
}
