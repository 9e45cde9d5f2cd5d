import Foundation
import LiveDeliveryJSON

/// Decodes and validates one inbound message exactly as events.md says.
///
/// Checks, in order: size (over 64 KiB is never parsed), JSON, `type`, `version`, `event_id`,
/// `occurred_at`, then the type's own fields. The first problem found is the rejection. Unknown
/// extra fields are ignored; an optional field that is absent, `null` or an empty string is nil.
package enum EventDecoder {
    /// 64 KiB: a larger body is rejected with `body_too_large` without being parsed.
    package static let maximumBodySize = 65_536

    /// 7 days: the latest `scheduled_start` an `activity.token` may name, after its `occurred_at`. ActivityKit
    /// documents no limit of its own; an activity pending until its start is never swept before it, so a far
    /// date would keep its rows for good. A week covers deliveries booked days ahead. Counted from
    /// `occurred_at`, not the clock, so that a redelivered event decodes the same.
    package static let maximumScheduleAheadSeconds: Double = 7 * 24 * 60 * 60

    /// Decodes one message body. Pass the AMQP routing key and `message_id` when there are any, so
    /// that a mismatch with `type` or `event_id` is refused too.
    package static func decode(
        _ bytes: [UInt8], routingKey: String? = nil, messageID: String? = nil
    ) -> Result<InboundEvent, EventRejection> {
        do throws(EventRejection) {
            return .success(try decodeThrowing(bytes, routingKey: routingKey, messageID: messageID))
        } catch {
            return .failure(error)
        }
    }

    static func decodeThrowing(
        _ bytes: [UInt8], routingKey: String?, messageID: String?
    ) throws(EventRejection) -> InboundEvent {
        guard bytes.count <= maximumBodySize else {
            throw EventRejection(
                .bodyTooLarge, "the body is \(bytes.count) bytes; the limit is \(maximumBodySize) (not parsed)")
        }
        guard let value = JSONValue.parse(bytes) else {
            throw EventRejection(.malformedJSON, "the body is not valid UTF-8 JSON")
        }
        guard case .object(let object) = value else {
            throw EventRejection(.malformedJSON, "the body is a JSON \(value.typeName), not an object")
        }
        let root = FieldReader(object: object, prefix: "")

        let typeText = try root.requiredString("type", length: 1...64)
        let type = EventType(rawValue: typeText)
        guard EventType.known.contains(type) else {
            throw EventRejection(
                .unknownType, field: "type",
                "unknown event type '\(quoted(typeText))' (known: \(EventType.known.map(\.rawValue).joined(separator: ", ")))"
            )
        }
        if let routingKey, routingKey != typeText {
            throw EventRejection(
                .routingKeyMismatch, field: "type",
                "type '\(typeText)' arrived with routing key '\(quoted(routingKey))'")
        }
        guard let version = try root.optionalInt("version") else {
            throw EventRejection(.missingField, field: "version", "version is required")
        }
        guard version == 1 else {
            throw EventRejection(.unknownVersion, field: "version", "version \(version) is not supported (only 1)")
        }
        let eventID = try root.requiredString("event_id", length: 1...128)
        if let messageID, !messageID.isEmpty, messageID != eventID {
            throw EventRejection(.messageIDMismatch, field: "event_id", "the AMQP message_id differs from event_id")
        }
        let occurredAt = try root.requiredTimestamp("occurred_at")

        switch type {
        case .orderStatus:
            let statusText = try root.requiredString("status", length: 1...64)
            let status = OrderStatus(rawValue: statusText)
            guard status.isKnown else {
                throw EventRejection(
                    .unknownStatus, field: "status",
                    "unknown status '\(quoted(statusText))' (known: \(OrderStatus.known.map(\.rawValue).joined(separator: ", ")))"
                )
            }
            let sequence = try root.optionalInt("sequence")
            if let sequence, sequence < 0 {
                throw EventRejection(.invalidField, field: "sequence", "sequence must not be negative")
            }
            var eta: ETAWindow?
            if let etaReader = try root.optionalObject("eta") {
                let earliest = try etaReader.requiredTimestamp("earliest")
                let latest = try etaReader.requiredTimestamp("latest")
                guard earliest <= latest else {
                    throw EventRejection(.invalidETARange, field: "eta", "eta.earliest is after eta.latest")
                }
                eta = ETAWindow(earliest: earliest, latest: latest)
            }
            return .orderStatus(
                OrderStatusEvent(
                    eventID: eventID, occurredAt: occurredAt,
                    orderID: try root.requiredString("order_id", length: 1...64),
                    userID: try root.requiredString("user_id", length: 1...64),
                    sequence: sequence, status: status,
                    orderNumber: try root.optionalInt("order_number"),
                    merchantName: try root.optionalObject("merchant")?.optionalString("name", maxLength: 100),
                    courierName: try root.optionalObject("courier")?.optionalString("name", maxLength: 100),
                    eta: eta
                ))
        case .activityToken:
            return .activityToken(
                ActivityTokenEvent(
                    eventID: eventID, occurredAt: occurredAt,
                    orderID: try root.requiredString("order_id", length: 1...64),
                    activityID: try root.requiredString("activity_id", length: 1...128),
                    deviceID: try root.optionalString("device_id", maxLength: 128, identifier: true),
                    token: try root.requiredToken("token"),
                    bundleID: try root.requiredBundleID("bundle_id"),
                    environment: try root.requiredEnvironment("environment"),
                    scheduledStart: try scheduledStart(root, occurredAt: occurredAt)
                ))
        case .pushToStartToken:
            let attributesType = try root.requiredString("attributes_type", length: 1...128)
            guard attributesType.utf8.allSatisfy({ isIdentifierByte($0) || $0 == UInt8(ascii: ".") }) else {
                throw EventRejection(
                    .invalidField, field: "attributes_type", "attributes_type must be a Swift type name")
            }
            return .pushToStartToken(
                PushToStartTokenEvent(
                    eventID: eventID, occurredAt: occurredAt,
                    userID: try root.requiredString("user_id", length: 1...64),
                    deviceID: try root.requiredString("device_id", length: 1...128),
                    token: try root.requiredToken("token"),
                    bundleID: try root.requiredBundleID("bundle_id"),
                    environment: try root.requiredEnvironment("environment"),
                    attributesType: attributesType
                ))
        case .activitySettings:
            return .activitySettings(
                ActivitySettingsEvent(
                    eventID: eventID, occurredAt: occurredAt,
                    userID: try root.requiredString("user_id", length: 1...64),
                    deviceID: try root.requiredString("device_id", length: 1...128),
                    activitiesEnabled: try root.requiredBool("activities_enabled"),
                    frequentPushesEnabled: try root.requiredBool("frequent_pushes_enabled")
                ))
        case .orderFollowers:
            let sequence = try root.optionalInt("sequence")
            if let sequence, sequence < 0 {
                throw EventRejection(.invalidField, field: "sequence", "sequence must not be negative")
            }
            return .orderFollowers(
                OrderFollowersEvent(
                    eventID: eventID, occurredAt: occurredAt,
                    orderID: try root.requiredString("order_id", length: 1...64), sequence: sequence,
                    followers: try root.requiredStrings(
                        "followers", length: 1...64, maxCount: OrderState.maxFollowers)
                ))
        default:
            let reasonText = try root.requiredString("reason", length: 1...64)
            let reason = ActivityEndReason(rawValue: reasonText)
            guard ActivityEndReason.known.contains(reason) else {
                throw EventRejection(
                    .invalidField, field: "reason",
                    "reason must be one of \(ActivityEndReason.known.map(\.rawValue).joined(separator: ", "))")
            }
            return .activityEnded(
                ActivityEndedEvent(
                    eventID: eventID, occurredAt: occurredAt,
                    orderID: try root.requiredString("order_id", length: 1...64),
                    activityID: try root.requiredString("activity_id", length: 1...128),
                    reason: reason
                ))
        }
    }

    /// `scheduled_start`, refused past ``maximumScheduleAheadSeconds`` after `occurred_at`.
    static func scheduledStart(_ root: FieldReader, occurredAt: Date) throws(EventRejection) -> Date? {
        guard let start = try root.optionalTimestamp("scheduled_start") else { return nil }
        let ahead = start.timeIntervalSince(occurredAt)
        guard ahead <= maximumScheduleAheadSeconds else {
            let days = Int(maximumScheduleAheadSeconds / 86_400)
            throw EventRejection(
                .invalidField, field: "scheduled_start",
                "scheduled_start is \(Int(ahead / 3_600)) hours after occurred_at; the limit is \(days) days")
        }
        return start
    }

    /// A short, printable excerpt of a contract identifier for a rejection message.
    package static func quoted(_ text: String) -> String {
        let cleaned = String(text.unicodeScalars.filter { $0.value >= 0x20 && $0.value != 0x7F }.map(Character.init))
        return cleaned.count > 40 ? String(cleaned.prefix(40)) + "…" : cleaned
    }

    static func isIdentifierByte(_ b: UInt8) -> Bool {
        (b >= 48 && b <= 57) || (b >= 65 && b <= 90) || (b >= 97 && b <= 122) || b == UInt8(ascii: "_")
    }
}

/// Reads typed fields of one JSON object, naming each field by its dotted path in rejections.
struct FieldReader {
    let object: JSONObject
    let prefix: String

    func path(_ key: String) -> String { prefix.isEmpty ? key : "\(prefix).\(key)" }

    /// The value, or nil when absent or `null`.
    private func value(_ key: String) -> JSONValue? {
        switch object[key] {
        case .none, .null?: nil
        case .some(let value): value
        }
    }

    func requiredString(_ key: String, length: ClosedRange<Int>) throws(EventRejection) -> String {
        guard let value = value(key) else {
            throw EventRejection(.missingField, field: path(key), "\(path(key)) is required")
        }
        guard case .string(let text) = value else {
            throw EventRejection(
                .invalidField, field: path(key), "\(path(key)) must be a string, not \(value.typeName)")
        }
        guard length.contains(text.count), text.utf8.count <= length.upperBound * Self.bytesPerCharacter else {
            throw EventRejection(
                .invalidField, field: path(key),
                "\(path(key)) must be \(length.lowerBound)–\(length.upperBound) characters of at most "
                    + "\(length.upperBound * Self.bytesPerCharacter) bytes (has \(text.count), \(text.utf8.count) bytes)"
            )
        }
        try storable(text, key)
        return text
    }

    /// At most this many UTF-8 bytes per character of an identifier (every required text is one): a
    /// character may join any number of combining marks, and an identifier must fit in an index row
    /// (PostgreSQL's B-tree rows hold about 2.7 kB).
    static let bytesPerCharacter = 4

    /// Refuses what PostgreSQL's `text` cannot store: U+0000.
    private func storable(_ text: String, _ key: String) throws(EventRejection) {
        guard !text.utf8.contains(0) else {
            throw EventRejection(
                .invalidField, field: path(key), "\(path(key)) must not contain U+0000 (NUL), which cannot be stored")
        }
    }

    /// nil when absent, `null`, empty or whitespace only. An `identifier` (a key of an index) is held to
    /// ``bytesPerCharacter`` bytes per character too; a name is not (the body's size bounds it).
    func optionalString(_ key: String, maxLength: Int, identifier: Bool = false) throws(EventRejection) -> String? {
        guard let value = value(key) else { return nil }
        guard case .string(let text) = value else {
            throw EventRejection(
                .invalidField, field: path(key), "\(path(key)) must be a string, not \(value.typeName)")
        }
        if text.allSatisfy(\.isWhitespace) { return nil }
        guard text.count <= maxLength else {
            throw EventRejection(
                .invalidField, field: path(key),
                "\(path(key)) must be at most \(maxLength) characters (has \(text.count))")
        }
        if identifier, text.utf8.count > maxLength * Self.bytesPerCharacter {
            throw EventRejection(
                .invalidField, field: path(key),
                "\(path(key)) must be at most \(maxLength * Self.bytesPerCharacter) bytes (has \(text.utf8.count))")
        }
        try storable(text, key)
        return text
    }

    /// An array (possibly empty) of at most `maxCount` strings, each as ``requiredString(_:length:)`` says.
    func requiredStrings(_ key: String, length: ClosedRange<Int>, maxCount: Int) throws(EventRejection) -> [String] {
        guard let value = value(key) else {
            throw EventRejection(.missingField, field: path(key), "\(path(key)) is required")
        }
        guard case .array(let values) = value else {
            throw EventRejection(
                .invalidField, field: path(key), "\(path(key)) must be an array of strings, not \(value.typeName)")
        }
        guard values.count <= maxCount else {
            throw EventRejection(
                .invalidField, field: path(key), "\(path(key)) may name at most \(maxCount) (has \(values.count))")
        }
        var strings: [String] = []
        for (index, element) in values.enumerated() {
            let reader = FieldReader(object: JSONObject([("\(index)", element)]), prefix: path(key))
            strings.append(try reader.requiredString("\(index)", length: length))
        }
        return strings
    }

    func requiredBool(_ key: String) throws(EventRejection) -> Bool {
        guard let value = value(key) else {
            throw EventRejection(.missingField, field: path(key), "\(path(key)) is required")
        }
        guard case .bool(let flag) = value else {
            throw EventRejection(
                .invalidField, field: path(key), "\(path(key)) must be true or false, not \(value.typeName)")
        }
        return flag
    }

    func optionalInt(_ key: String) throws(EventRejection) -> Int? {
        guard let value = value(key) else { return nil }
        switch value {
        case .int(let int): return int
        case .double(let double) where double == double.rounded() && abs(double) < 9e15: return Int(double)
        default:
            throw EventRejection(
                .invalidField, field: path(key), "\(path(key)) must be an integer, not \(value.typeName)")
        }
    }

    func optionalObject(_ key: String) throws(EventRejection) -> FieldReader? {
        guard let value = value(key) else { return nil }
        guard case .object(let object) = value else {
            throw EventRejection(
                .invalidField, field: path(key), "\(path(key)) must be an object, not \(value.typeName)")
        }
        return FieldReader(object: object, prefix: path(key))
    }

    func requiredTimestamp(_ key: String) throws(EventRejection) -> Date {
        let text: String
        do {
            text = try requiredString(key, length: 1...64)
        } catch let error where error.reason == .invalidField {
            throw EventRejection(.invalidTimestamp, field: path(key), "\(path(key)) must be an RFC 3339 string")
        }
        guard let date = RFC3339.parse(text) else {
            throw EventRejection(
                .invalidTimestamp, field: path(key),
                "\(path(key)) is not an RFC 3339 timestamp with an offset (like 2026-11-21T10:04:05Z)")
        }
        return date
    }

    /// nil when absent or `null`; else as ``requiredTimestamp(_:)``.
    func optionalTimestamp(_ key: String) throws(EventRejection) -> Date? {
        guard value(key) != nil else { return nil }
        return try requiredTimestamp(key)
    }

    func requiredToken(_ key: String) throws(EventRejection) -> DeviceToken {
        guard let value = value(key) else {
            throw EventRejection(.missingField, field: path(key), "\(path(key)) is required")
        }
        guard case .string(let text) = value else {
            throw EventRejection(
                .invalidToken, field: path(key), "\(path(key)) must be a hex string, not \(value.typeName)")
        }
        guard let token = DeviceToken(hex: text) else {
            // Never echo the token itself: its length is enough to diagnose.
            throw EventRejection(
                .invalidToken, field: path(key),
                "\(path(key)) must be even-length hex of 16–200 bytes (got \(text.utf8.count) characters)")
        }
        return token
    }

    func requiredBundleID(_ key: String) throws(EventRejection) -> String {
        let text = try requiredString(key, length: 1...155)
        guard
            text.utf8.allSatisfy({
                EventDecoder.isIdentifierByte($0) && $0 != UInt8(ascii: "_") || $0 == UInt8(ascii: ".")
                    || $0 == UInt8(ascii: "-")
            }), !text.hasPrefix("."), !text.hasSuffix(".")
        else {
            throw EventRejection(
                .invalidField, field: path(key), "\(path(key)) must be a bundle identifier (letters, digits, '.', '-')")
        }
        return text
    }

    func requiredEnvironment(_ key: String) throws(EventRejection) -> APNsEnvironment {
        let text = try requiredString(key, length: 1...32)
        let environment = APNsEnvironment(rawValue: text)
        guard APNsEnvironment.known.contains(environment) else {
            throw EventRejection(.invalidField, field: path(key), "\(path(key)) must be 'production' or 'sandbox'")
        }
        return environment
    }
}
