public import Foundation

/// An order status from events.md. String-backed so the set can grow; the decoder accepts only
/// ``known`` values and rejects the rest with `unknown_status`.
public struct OrderStatus: RawRepresentable, Hashable, Comparable, Sendable, Codable, CustomStringConvertible {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }

    public static let placed = OrderStatus(rawValue: "placed")
    public static let confirmed = OrderStatus(rawValue: "confirmed")
    public static let preparing = OrderStatus(rawValue: "preparing")
    public static let readyForPickup = OrderStatus(rawValue: "ready_for_pickup")
    public static let pickedUp = OrderStatus(rawValue: "picked_up")
    public static let outForDelivery = OrderStatus(rawValue: "out_for_delivery")
    public static let arriving = OrderStatus(rawValue: "arriving")
    public static let delivered = OrderStatus(rawValue: "delivered")
    public static let cancelled = OrderStatus(rawValue: "cancelled")
    public static let deliveryFailed = OrderStatus(rawValue: "delivery_failed")

    /// Every status of the contract, in the order of a delivery.
    public static let known: [OrderStatus] = [
        .placed, .confirmed, .preparing, .readyForPickup, .pickedUp, .outForDelivery, .arriving,
        .delivered, .cancelled, .deliveryFailed,
    ]

    /// The statuses that end an order (and its activities) and absorb later events.
    public static let terminal: Set<OrderStatus> = [.delivered, .cancelled, .deliveryFailed]

    public var isKnown: Bool { Self.known.contains(self) }
    public var isTerminal: Bool { Self.terminal.contains(self) }
    public var description: String { rawValue }

    public static func < (lhs: OrderStatus, rhs: OrderStatus) -> Bool {
        (Self.known.firstIndex(of: lhs) ?? Int.max, lhs.rawValue) < (Self.known.firstIndex(of: rhs) ?? Int.max, rhs.rawValue)
    }

    public init(from decoder: any Decoder) throws {
        self.init(rawValue: try decoder.singleValueContainer().decode(String.self))
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }
}

/// The event `type` (equal to the AMQP routing key).
public struct EventType: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }

    public static let orderStatus = EventType(rawValue: "order.status")
    public static let activityToken = EventType(rawValue: "activity.token")
    public static let pushToStartToken = EventType(rawValue: "activity.push_to_start_token")
    public static let activityEnded = EventType(rawValue: "activity.ended")
    public static let known: [EventType] = [.orderStatus, .activityToken, .pushToStartToken, .activityEnded]

    public var description: String { rawValue }
}

/// `production` or `sandbox`: chooses the APNs host.
public struct APNsEnvironment: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }

    public static let production = APNsEnvironment(rawValue: "production")
    public static let sandbox = APNsEnvironment(rawValue: "sandbox")
    public static let known: [APNsEnvironment] = [.production, .sandbox]

    /// The APNs host for device-token pushes.
    public var host: String {
        self == .production ? "api.push.apple.com" : "api.sandbox.push.apple.com"
    }

    public var description: String { rawValue }
}

/// Why the app reports that an activity ended on the device (`activity.ended`).
public struct ActivityEndReason: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }

    public static let dismissedByUser = ActivityEndReason(rawValue: "dismissed_by_user")
    public static let endedOnDevice = ActivityEndReason(rawValue: "ended_on_device")
    public static let expired = ActivityEndReason(rawValue: "expired")
    public static let known: [ActivityEndReason] = [.dismissedByUser, .endedOnDevice, .expired]

    public var description: String { rawValue }
}

/// An APNs device token (push-to-start or per-activity update token): lowercase hex, 16–200 bytes.
///
/// Its `description` shows only a prefix, so a token never reaches a log line or an error whole;
/// ``hex`` (for the request path) and `Codable` (for storage) carry the full value.
public struct DeviceToken: Hashable, Sendable, Codable, CustomStringConvertible {
    public let hex: String

    /// Validates and normalises to lowercase; nil unless hex, even length, 16–200 bytes decoded.
    public init?(hex: String) {
        let bytes = Array(hex.utf8)
        guard bytes.count % 2 == 0, (32...400).contains(bytes.count),
            bytes.allSatisfy({ ($0 >= 48 && $0 <= 57) || ($0 | 0x20 >= 97 && $0 | 0x20 <= 102) })
        else { return nil }
        self.hex = hex.lowercased()
    }

    /// The first eight hex digits, for logs and the printed request path.
    public var prefix: String { String(hex.prefix(8)) + "…" }
    public var byteCount: Int { hex.utf8.count / 2 }
    public var description: String { "\(prefix)(\(byteCount) bytes)" }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        let text = try container.decode(String.self)
        guard let token = DeviceToken(hex: text) else {
            throw DecodingError.dataCorruptedError(in: container, debugDescription: "not a device token")
        }
        self = token
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(hex)
    }
}

/// An estimated delivery window, `earliest ≤ latest`.
public struct ETAWindow: Hashable, Sendable, Codable {
    public var earliest: Date
    public var latest: Date

    public init(earliest: Date, latest: Date) {
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
public struct EventKey: Hashable, Sendable, Codable, CustomStringConvertible {
    public var sequence: Int?
    public var occurredAt: Date
    public var eventID: String

    public init(sequence: Int?, occurredAt: Date, eventID: String) {
        self.sequence = sequence
        self.occurredAt = occurredAt
        self.eventID = eventID
    }

    /// True when `self` is strictly newer than `other`.
    public func isNewer(than other: EventKey) -> Bool {
        if let a = sequence, let b = other.sequence, a != b { return a > b }
        if occurredAt != other.occurredAt { return occurredAt > other.occurredAt }
        return eventID > other.eventID
    }

    public var description: String {
        (sequence.map { "seq \($0), " } ?? "") + RFC3339.format(occurredAt, fractional: true) + ", " + eventID
    }
}
