/// Why an inbound message was refused: a machine-readable ``reason`` (dead-letter header, metric
/// dimension), the offending ``field`` (dotted path, e.g. `eta.latest`), and a message for people.
///
/// The message never contains a token, and quotes other values only when they are short
/// identifiers of the contract (an unknown `type` or `status`, truncated to 40 characters).
public struct EventRejection: Error, Hashable, Sendable, Codable, CustomStringConvertible {
    public struct Reason: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }

        /// The body is over 64 KiB; it was not parsed.
        public static let bodyTooLarge = Reason(rawValue: "body_too_large")
        /// Not UTF-8 JSON, or not a JSON object at the top level.
        public static let malformedJSON = Reason(rawValue: "malformed_json")
        /// A required field is absent or `null`.
        public static let missingField = Reason(rawValue: "missing_field")
        /// A field has the wrong JSON type, length or form.
        public static let invalidField = Reason(rawValue: "invalid_field")
        /// `type` is not one of the four event types.
        public static let unknownType = Reason(rawValue: "unknown_type")
        /// `version` is not 1.
        public static let unknownVersion = Reason(rawValue: "unknown_version")
        /// `status` is not one of the contract's statuses.
        public static let unknownStatus = Reason(rawValue: "unknown_status")
        /// A timestamp is not RFC 3339 with an offset.
        public static let invalidTimestamp = Reason(rawValue: "invalid_timestamp")
        /// A token is not even-length hex of 16–200 bytes.
        public static let invalidToken = Reason(rawValue: "invalid_token")
        /// `eta.earliest` is after `eta.latest`.
        public static let invalidETARange = Reason(rawValue: "invalid_eta_range")
        /// The AMQP routing key differs from `type`.
        public static let routingKeyMismatch = Reason(rawValue: "routing_key_mismatch")
        /// The AMQP `message_id` is set and differs from `event_id`.
        public static let messageIDMismatch = Reason(rawValue: "message_id_mismatch")

        public static let all: [Reason] = [
            .bodyTooLarge, .malformedJSON, .missingField, .invalidField, .unknownType, .unknownVersion,
            .unknownStatus, .invalidTimestamp, .invalidToken, .invalidETARange, .routingKeyMismatch,
            .messageIDMismatch,
        ]

        public var description: String { rawValue }
    }

    public var reason: Reason
    /// The offending field as a dotted path, or nil when the message as a whole is at fault.
    public var field: String?
    public var message: String

    public init(_ reason: Reason, field: String? = nil, _ message: String) {
        self.reason = reason
        self.field = field
        self.message = message
    }

    public var description: String {
        "\(reason.rawValue)" + (field.map { " (\($0))" } ?? "") + ": \(message)"
    }
}
