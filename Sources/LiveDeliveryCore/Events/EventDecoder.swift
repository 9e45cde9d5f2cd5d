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
        let root = try FieldReader.body(bytes)

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
