/// Why an inbound message was refused: a machine-readable ``reason`` (dead-letter header, metric
/// dimension), the offending ``field`` (dotted path, e.g. `eta.latest`), and a message for people.
///
/// The message never contains a token, and quotes other values only when they are short
/// identifiers of the contract (an unknown `type` or `status`, truncated to 40 characters).
package struct EventRejection: Error, Hashable, Sendable, Codable, CustomStringConvertible {
    package struct Reason: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible {
        package let rawValue: String
        package init(rawValue: String) { self.rawValue = rawValue }

        /// The body is over 64 KiB; it was not parsed.
        package static let bodyTooLarge = Reason(rawValue: "body_too_large")
        /// Not UTF-8 JSON, or not a JSON object at the top level.
        package static let malformedJSON = Reason(rawValue: "malformed_json")
        /// A required field is absent or `null`.
        package static let missingField = Reason(rawValue: "missing_field")
        /// A field has the wrong JSON type, length or form.
        package static let invalidField = Reason(rawValue: "invalid_field")
        /// `type` is not one of the contract's event types.
        package static let unknownType = Reason(rawValue: "unknown_type")
        /// `version` is not 1.
        package static let unknownVersion = Reason(rawValue: "unknown_version")
        /// `status` is not one of the contract's statuses.
        package static let unknownStatus = Reason(rawValue: "unknown_status")
        /// A timestamp is not RFC 3339 with an offset.
        package static let invalidTimestamp = Reason(rawValue: "invalid_timestamp")
        /// A token is not even-length hex of 16–200 bytes.
        package static let invalidToken = Reason(rawValue: "invalid_token")
        /// `eta.earliest` is after `eta.latest`.
        package static let invalidETARange = Reason(rawValue: "invalid_eta_range")
        /// The AMQP routing key differs from `type`.
        package static let routingKeyMismatch = Reason(rawValue: "routing_key_mismatch")
        /// The AMQP `message_id` is set and differs from `event_id`.
        package static let messageIDMismatch = Reason(rawValue: "message_id_mismatch")
        /// `bundle_id` and `environment` name no app of the worker's apps file.
        package static let unknownApp = Reason(rawValue: "unknown_app")
        /// In a cell: an order's event without the AMQP header `order_id` the hash exchange routes by, or with
        /// another order's (it may be in the wrong cell).
        package static let cellRoutingHeader = Reason(rawValue: "cell_routing_header")

        package static let all: [Reason] = [
            .bodyTooLarge, .malformedJSON, .missingField, .invalidField, .unknownType, .unknownVersion,
            .unknownStatus, .invalidTimestamp, .invalidToken, .invalidETARange, .routingKeyMismatch,
            .messageIDMismatch, .unknownApp, .cellRoutingHeader,
        ]

        package var description: String { rawValue }
    }

    package var reason: Reason
    /// The offending field as a dotted path, or nil when the message as a whole is at fault.
    package var field: String?
    package var message: String

    package init(_ reason: Reason, field: String? = nil, _ message: String) {
        self.reason = reason
        self.field = field
        self.message = message
    }

    package var description: String {
        "\(reason.rawValue)" + (field.map { " (\($0))" } ?? "") + ": \(message)"
    }
}
