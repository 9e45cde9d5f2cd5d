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

    /// Every message passes here, so its parts below are `@inline(__always)`: they name the checks without
    /// adding calls to the hot path (`livedelivery-bench events` counts the same instructions per update).
    static func decodeThrowing(
        _ bytes: [UInt8], routingKey: String?, messageID: String?
    ) throws(EventRejection) -> InboundEvent {
        guard bytes.count <= maximumBodySize else {
            throw EventRejection(
                .bodyTooLarge, "the body is \(bytes.count) bytes; the limit is \(maximumBodySize) (not parsed)")
        }
        let root = try FieldReader.body(bytes)
        let type = try eventType(root, routingKey: routingKey)
        try checkVersion(root)
        let eventID = try Self.eventID(root, messageID: messageID)
        let occurredAt = try root.requiredTimestamp("occurred_at")

        switch type {
        case .orderStatus: return try orderStatus(root, eventID: eventID, occurredAt: occurredAt)
        case .activityToken: return try activityToken(root, eventID: eventID, occurredAt: occurredAt)
        case .pushToStartToken: return try pushToStartToken(root, eventID: eventID, occurredAt: occurredAt)
        case .activitySettings: return try activitySettings(root, eventID: eventID, occurredAt: occurredAt)
        case .orderFollowers: return try orderFollowers(root, eventID: eventID, occurredAt: occurredAt)
        default: return try activityEnded(root, eventID: eventID, occurredAt: occurredAt)
        }
    }

    // MARK: - The envelope every type shares

    /// `type`: a known event type, the one the routing key names when there is one.
    @inline(__always)
    private static func eventType(_ root: FieldReader, routingKey: String?) throws(EventRejection) -> EventType {
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
        return type
    }

    /// `version`: required, and 1.
    @inline(__always)
    private static func checkVersion(_ root: FieldReader) throws(EventRejection) {
        guard let version = try root.optionalInt("version") else {
            throw EventRejection(.missingField, field: "version", "version is required")
        }
        guard version == 1 else {
            throw EventRejection(.unknownVersion, field: "version", "version \(version) is not supported (only 1)")
        }
    }

    /// `event_id`, which the AMQP `message_id` must match when there is one.
    @inline(__always)
    private static func eventID(_ root: FieldReader, messageID: String?) throws(EventRejection) -> String {
        let eventID = try root.requiredString("event_id", length: 1...128)
        if let messageID, !messageID.isEmpty, messageID != eventID {
            throw EventRejection(.messageIDMismatch, field: "event_id", "the AMQP message_id differs from event_id")
        }
        return eventID
    }

    // MARK: - Each type's own fields, in the order they are checked

    @inline(__always)
    private static func orderStatus(
        _ root: FieldReader, eventID: String, occurredAt: Date
    ) throws(EventRejection) -> InboundEvent {
        let status = try Self.status(root)
        let sequence = try Self.sequence(root)
        let eta = try Self.eta(root)
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
    }

    @inline(__always)
    private static func activityToken(
        _ root: FieldReader, eventID: String, occurredAt: Date
    ) throws(EventRejection) -> InboundEvent {
        .activityToken(
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
    }

    @inline(__always)
    private static func pushToStartToken(
        _ root: FieldReader, eventID: String, occurredAt: Date
    ) throws(EventRejection) -> InboundEvent {
        let attributesType = try Self.attributesType(root)
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
    }

    @inline(__always)
    private static func activitySettings(
        _ root: FieldReader, eventID: String, occurredAt: Date
    ) throws(EventRejection) -> InboundEvent {
        .activitySettings(
            ActivitySettingsEvent(
                eventID: eventID, occurredAt: occurredAt,
                userID: try root.requiredString("user_id", length: 1...64),
                deviceID: try root.requiredString("device_id", length: 1...128),
                activitiesEnabled: try root.requiredBool("activities_enabled"),
                frequentPushesEnabled: try root.requiredBool("frequent_pushes_enabled")
            ))
    }

    @inline(__always)
    private static func orderFollowers(
        _ root: FieldReader, eventID: String, occurredAt: Date
    ) throws(EventRejection) -> InboundEvent {
        let sequence = try Self.sequence(root)
        return .orderFollowers(
            OrderFollowersEvent(
                eventID: eventID, occurredAt: occurredAt,
                orderID: try root.requiredString("order_id", length: 1...64), sequence: sequence,
                followers: try root.requiredStrings(
                    "followers", length: 1...64, maxCount: OrderState.maxFollowers)
            ))
    }

    @inline(__always)
    private static func activityEnded(
        _ root: FieldReader, eventID: String, occurredAt: Date
    ) throws(EventRejection) -> InboundEvent {
        let reason = try Self.reason(root)
        return .activityEnded(
            ActivityEndedEvent(
                eventID: eventID, occurredAt: occurredAt,
                orderID: try root.requiredString("order_id", length: 1...64),
                activityID: try root.requiredString("activity_id", length: 1...128),
                reason: reason
            ))
    }

    // MARK: - Fields with checks of their own

    /// `status`: a known order status.
    @inline(__always)
    private static func status(_ root: FieldReader) throws(EventRejection) -> OrderStatus {
        let statusText = try root.requiredString("status", length: 1...64)
        let status = OrderStatus(rawValue: statusText)
        guard status.isKnown else {
            throw EventRejection(
                .unknownStatus, field: "status",
                "unknown status '\(quoted(statusText))' (known: \(OrderStatus.known.map(\.rawValue).joined(separator: ", ")))"
            )
        }
        return status
    }

    /// `sequence`: optional, never negative.
    @inline(__always)
    private static func sequence(_ root: FieldReader) throws(EventRejection) -> Int? {
        let sequence = try root.optionalInt("sequence")
        if let sequence, sequence < 0 {
            throw EventRejection(.invalidField, field: "sequence", "sequence must not be negative")
        }
        return sequence
    }

    /// `eta`: optional; when given, both bounds, `earliest` not after `latest`.
    @inline(__always)
    private static func eta(_ root: FieldReader) throws(EventRejection) -> ETAWindow? {
        guard let etaReader = try root.optionalObject("eta") else { return nil }
        let earliest = try etaReader.requiredTimestamp("earliest")
        let latest = try etaReader.requiredTimestamp("latest")
        guard earliest <= latest else {
            throw EventRejection(.invalidETARange, field: "eta", "eta.earliest is after eta.latest")
        }
        return ETAWindow(earliest: earliest, latest: latest)
    }

    /// `attributes_type`: a Swift type name (identifier characters and dots).
    @inline(__always)
    private static func attributesType(_ root: FieldReader) throws(EventRejection) -> String {
        let attributesType = try root.requiredString("attributes_type", length: 1...128)
        guard attributesType.utf8.allSatisfy({ isIdentifierByte($0) || $0 == UInt8(ascii: ".") }) else {
            throw EventRejection(
                .invalidField, field: "attributes_type", "attributes_type must be a Swift type name")
        }
        return attributesType
    }

    /// `reason`: one of the known reasons an activity ended.
    @inline(__always)
    private static func reason(_ root: FieldReader) throws(EventRejection) -> ActivityEndReason {
        let reasonText = try root.requiredString("reason", length: 1...64)
        let reason = ActivityEndReason(rawValue: reasonText)
        guard ActivityEndReason.known.contains(reason) else {
            throw EventRejection(
                .invalidField, field: "reason",
                "reason must be one of \(ActivityEndReason.known.map(\.rawValue).joined(separator: ", "))")
        }
        return reason
    }

    /// `scheduled_start`, refused past ``maximumScheduleAheadSeconds`` after `occurred_at`.
    static func scheduledStart(_ root: FieldReader, occurredAt: Date) throws(EventRejection) -> Date? {
        guard let start = try root.optionalTimestamp("scheduled_start") else { return nil }
        let ahead = start.timeIntervalSince(occurredAt)
        guard ahead <= maximumScheduleAheadSeconds else {
            let days = Int(maximumScheduleAheadSeconds / 86_400)
            throw EventRejection(
                .invalidField, field: "scheduled_start",
                "scheduled_start is \(Int(ahead)) s after occurred_at, more than the \(days) days (\(Int(maximumScheduleAheadSeconds)) s) allowed"
            )
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
