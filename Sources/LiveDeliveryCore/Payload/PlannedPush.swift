public import Foundation

/// Exactly what to POST to `/3/device/<token>` on the APNs host of ``environment``.
///
/// `description` and ``redactedPath`` show only a token prefix; ``path`` and `Codable` carry
/// the full token (the worker needs it to send and to store the push in its outbox).
public struct PlannedPush: Hashable, Sendable, Codable, CustomStringConvertible {
    public enum Kind: String, Hashable, Sendable, Codable {
        case start, update, end
    }

    public struct Header: Hashable, Sendable, Codable {
        public var name: String
        public var value: String
    }

    public var orderID: String
    /// The activity's stable key in ``OrderState`` (the outbox key: one pending push per activity).
    public var activityKey: String
    /// ActivityKit's id, once the app has reported it (nil for a start).
    public var activityID: String?
    public var kind: Kind
    public var deviceToken: DeviceToken
    public var environment: APNsEnvironment
    public var bundleID: String
    /// The `apns-id` header: deterministic, so replaying a step produces the same id.
    public var apnsID: String
    /// 10 or 5.
    public var priority: Int
    /// `aps.timestamp` (Unix seconds).
    public var timestamp: Int
    /// Do not send before this moment (it is ``timestamp``): `aps.timestamp` is never in the future.
    public var notBefore: Date
    /// The `apns-expiration` header value (Unix seconds).
    public var expiration: Int
    /// `apns-push-type`, `apns-topic`, `apns-priority`, `apns-expiration`, `apns-id`, in that order.
    public var headers: [Header]
    /// The request body, compact UTF-8 JSON, at most ``Policy/maxPayloadBytes``.
    public var payload: [UInt8]
    public var alert: AlertContent?
    /// The policy step the content shows.
    public var step: String
    /// The status shown and the key of the event that set it (never older than a previous push).
    public var status: OrderStatus
    public var statusKey: EventKey
    /// One line: why this push exists.
    public var reason: String
    /// What the push shows (``OrderTracker/record(_:for:in:now:)`` stores it as sent).
    public var mark: ActivityState.ContentMark

    public var method: String { "POST" }
    public var path: String { "/3/device/\(deviceToken.hex)" }
    public var redactedPath: String { "/3/device/\(deviceToken.prefix)" }
    public var topic: String { "\(bundleID).push-type.liveactivity" }

    public var description: String {
        "\(kind.rawValue) \(orderID)/\(activityKey) → \(redactedPath) priority \(priority) timestamp \(timestamp)"
    }
}

/// Deterministic `apns-id` values: a UUID (version 8, RFC 9562 custom) from two 64-bit FNV-1a
/// hashes of the push's identity. No randomness in the core.
enum PushID {
    static func make(_ parts: [String]) -> String {
        var a: UInt64 = 0xcbf2_9ce4_8422_2325
        var b: UInt64 = 0x8422_2325_cbf2_9ce4
        for part in parts {
            for byte in part.utf8 + [0] {
                a = (a ^ UInt64(byte)) &* 0x0000_0100_0000_01b3
                b = (b ^ UInt64(byte ^ 0x5c)) &* 0x0000_0100_0000_01b3
            }
        }
        var bytes = (0..<8).map { UInt8(truncatingIfNeeded: a >> (56 - 8 * $0)) }
        bytes += (0..<8).map { UInt8(truncatingIfNeeded: b >> (56 - 8 * $0)) }
        bytes[6] = (bytes[6] & 0x0F) | 0x80
        bytes[8] = (bytes[8] & 0x3F) | 0x80
        let hex = bytes.map { byte -> String in
            let digits = Array("0123456789abcdef")
            return String([digits[Int(byte >> 4)], digits[Int(byte & 0xF)]])
        }.joined()
        let h = Array(hex)
        return [h[0..<8], h[8..<12], h[12..<16], h[16..<20], h[20..<32]].map { String($0) }.joined(separator: "-")
    }
}
