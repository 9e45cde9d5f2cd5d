package import Foundation
import LiveDeliveryTime

/// An order status from events.md. String-backed so the set can grow; the decoder accepts only
/// ``known`` values and rejects the rest with `unknown_status`.
package struct OrderStatus: RawRepresentable, Hashable, Comparable, Sendable, Codable, CustomStringConvertible {
    package let rawValue: String
    package init(rawValue: String) { self.rawValue = rawValue }

    package static let placed = OrderStatus(rawValue: "placed")
    package static let confirmed = OrderStatus(rawValue: "confirmed")
    package static let preparing = OrderStatus(rawValue: "preparing")
    package static let readyForPickup = OrderStatus(rawValue: "ready_for_pickup")
    package static let pickedUp = OrderStatus(rawValue: "picked_up")
    package static let outForDelivery = OrderStatus(rawValue: "out_for_delivery")
    package static let arriving = OrderStatus(rawValue: "arriving")
    package static let delivered = OrderStatus(rawValue: "delivered")
    package static let cancelled = OrderStatus(rawValue: "cancelled")
    package static let deliveryFailed = OrderStatus(rawValue: "delivery_failed")

    /// Every status of the contract, in the order of a delivery.
    package static let known: [OrderStatus] = [
        .placed, .confirmed, .preparing, .readyForPickup, .pickedUp, .outForDelivery, .arriving,
        .delivered, .cancelled, .deliveryFailed,
    ]

    /// The statuses that end an order (and its activities) and absorb later events.
    package static let terminal: Set<OrderStatus> = [.delivered, .cancelled, .deliveryFailed]

    package var isKnown: Bool { Self.known.contains(self) }
    package var isTerminal: Bool { Self.terminal.contains(self) }
    package var description: String { rawValue }

    package static func < (lhs: OrderStatus, rhs: OrderStatus) -> Bool {
        (Self.known.firstIndex(of: lhs) ?? Int.max, lhs.rawValue) < (
            Self.known.firstIndex(of: rhs) ?? Int.max, rhs.rawValue
        )
    }

    package init(from decoder: any Decoder) throws {
        self.init(rawValue: try decoder.singleValueContainer().decode(String.self))
    }

    package func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }
}

/// The event `type` (equal to the AMQP routing key).
package struct EventType: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible {
    package let rawValue: String
    package init(rawValue: String) { self.rawValue = rawValue }

    package static let orderStatus = EventType(rawValue: "order.status")
    package static let activityToken = EventType(rawValue: "activity.token")
    package static let pushToStartToken = EventType(rawValue: "activity.push_to_start_token")
    package static let activityEnded = EventType(rawValue: "activity.ended")
    package static let activitySettings = EventType(rawValue: "activity.settings")
    package static let orderFollowers = EventType(rawValue: "order.followers")
    package static let known: [EventType] = [
        .orderStatus, .activityToken, .pushToStartToken, .activityEnded, .activitySettings, .orderFollowers,
    ]

    package var description: String { rawValue }
}

/// `production` or `sandbox`: chooses the APNs host.
package struct APNsEnvironment: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible {
    package let rawValue: String
    package init(rawValue: String) { self.rawValue = rawValue }

    package static let production = APNsEnvironment(rawValue: "production")
    package static let sandbox = APNsEnvironment(rawValue: "sandbox")
    package static let known: [APNsEnvironment] = [.production, .sandbox]

    /// The APNs host for device-token pushes.
    package var host: String {
        self == .production ? "api.push.apple.com" : "api.sandbox.push.apple.com"
    }

    package var description: String { rawValue }
}

/// Why the app reports that an activity ended on the device (`activity.ended`).
package struct ActivityEndReason: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible {
    package let rawValue: String
    package init(rawValue: String) { self.rawValue = rawValue }

    package static let dismissedByUser = ActivityEndReason(rawValue: "dismissed_by_user")
    package static let endedOnDevice = ActivityEndReason(rawValue: "ended_on_device")
    package static let expired = ActivityEndReason(rawValue: "expired")
    package static let known: [ActivityEndReason] = [.dismissedByUser, .endedOnDevice, .expired]

    package var description: String { rawValue }
}

/// An APNs device token (push-to-start or per-activity update token): lowercase hex, 16–200 bytes.
///
/// Its `description` shows only a prefix, so a token never reaches a log line or an error whole;
/// ``hex`` (for the request path) and `Codable` (for storage) carry the full value.
package struct DeviceToken: Hashable, Sendable, Codable, CustomStringConvertible {
    package let hex: String

    /// Validates and normalises to lowercase; nil unless hex, even length, 16–200 bytes decoded.
    package init?(hex: String) {
        var hex = hex
        // One pass over the bytes where they lie: every stored state and every push reads a token back.
        let (valid, upper) = hex.withUTF8 { bytes in
            var valid = bytes.count % 2 == 0 && (32...400).contains(bytes.count)
            var upper = false
            for byte in bytes where valid {
                let lower = byte | 0x20
                valid = (byte >= 48 && byte <= 57) || (lower >= 97 && lower <= 102)
                upper = upper || (byte >= 65 && byte <= 70)
            }
            return (valid, upper)
        }
        guard valid else { return nil }
        // Stored tokens are lowercase already: read back from every stored state, they are kept as they are.
        self.hex = upper ? hex.lowercased() : hex
    }

    /// The first eight hex digits, for logs and the printed request path.
    package var prefix: String { String(hex.prefix(8)) + "…" }
    package var byteCount: Int { hex.utf8.count / 2 }
    package var description: String { "\(prefix)(\(byteCount) bytes)" }

    package init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        let text = try container.decode(String.self)
        guard let token = DeviceToken(hex: text) else {
            throw DecodingError.dataCorruptedError(in: container, debugDescription: "not a device token")
        }
        self = token
    }

    package func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(hex)
    }
}

/// An estimated delivery window, `earliest ≤ latest`.
package struct ETAWindow: Hashable, Sendable, Codable {
    package var earliest: Date
    package var latest: Date

    package init(earliest: Date, latest: Date) {
        self.earliest = earliest
        self.latest = latest
    }
}

/// What decides which of two events of one order (or one activity) is newer.
///
/// When both carry a `sequence`, the sequence decides; otherwise `occurred_at` does; ties fall back
/// to `event_id` so that every replica picks the same winner whatever the arrival order. (A stream
/// that mixes events with and without a sequence for one order can be ordered inconsistently; the
/// contract's publishers use one or the other.)
package struct EventKey: Hashable, Sendable, Codable, CustomStringConvertible {
    package var sequence: Int?
    package var occurredAt: Date
    package var eventID: String

    package init(sequence: Int?, occurredAt: Date, eventID: String) {
        self.sequence = sequence
        self.occurredAt = occurredAt
        self.eventID = eventID
    }

    /// True when `self` is strictly newer than `other`.
    package func isNewer(than other: EventKey) -> Bool {
        if let a = sequence, let b = other.sequence, a != b { return a > b }
        if occurredAt != other.occurredAt { return occurredAt > other.occurredAt }
        return eventID > other.eventID
    }

    package var description: String {
        (sequence.map { "seq \($0), " } ?? "") + RFC3339.format(occurredAt, fractional: true) + ", " + eventID
    }
}
