public import Foundation

/// The bounds the worker holds app events to (docs/events.md, docs/asyncapi.yaml). The report types check them
/// when they are made and when they are decoded, so an event this module encodes is one the worker accepts
/// (short of `unknown_app`: a `bundle_id` and `environment` the worker's apps file does not name).
///
/// A length counts characters as Swift does (grapheme clusters), with at most ``bytesPerCharacter`` UTF-8 bytes
/// per character of the limit; no text may contain U+0000.
public enum EventContract {
    /// The only `version` of the contract.
    public static let version = 1
    /// `event_id`: characters.
    public static let eventIDLength: ClosedRange<Int> = 1...128
    /// `order_id` and `user_id`: characters.
    public static let identifierLength: ClosedRange<Int> = 1...64
    /// `activity_id` and a required `device_id`: characters.
    public static let activityIDLength: ClosedRange<Int> = 1...128
    /// `device_id`: characters (optional in `activity.token`, required elsewhere).
    public static let deviceIDLength: ClosedRange<Int> = 1...128
    /// `bundle_id`: characters, of letters, digits, `.` and `-`, not starting or ending with `.`.
    public static let bundleIDLength: ClosedRange<Int> = 1...155
    /// `attributes_type`: characters, of letters, digits, `_` and `.`.
    public static let attributesTypeLength: ClosedRange<Int> = 1...128
    /// A token: bytes (twice as many hex digits).
    public static let tokenBytes: ClosedRange<Int> = 16...200
    /// UTF-8 bytes per character of a length's upper bound.
    public static let bytesPerCharacter = 4
    /// The latest `scheduled_start` after the event's `occurred_at`: 7 days.
    public static let maximumScheduleAhead: TimeInterval = 7 * 24 * 60 * 60
    /// The largest message body the worker parses.
    public static let maximumBodySize = 65_536

    static func checkText(
        _ text: String, field: String, length: ClosedRange<Int>
    ) throws(EventContractError) {
        guard length.contains(text.count), text.utf8.count <= length.upperBound * bytesPerCharacter else {
            throw EventContractError(
                field: field,
                "must be \(length.lowerBound)–\(length.upperBound) characters of at most "
                    + "\(length.upperBound * bytesPerCharacter) UTF-8 bytes")
        }
        guard !text.utf8.contains(0) else { throw EventContractError(field: field, "must not contain U+0000") }
    }

    static func checkBundleID(_ text: String) throws(EventContractError) {
        try checkText(text, field: "bundle_id", length: bundleIDLength)
        let allowed = text.utf8.allSatisfy { isLetterOrDigit($0) || $0 == UInt8(ascii: ".") || $0 == UInt8(ascii: "-") }
        guard allowed, !text.hasPrefix("."), !text.hasSuffix(".") else {
            throw EventContractError(field: "bundle_id", "must be a bundle identifier (letters, digits, '.', '-')")
        }
    }

    static func checkAttributesType(_ text: String) throws(EventContractError) {
        try checkText(text, field: "attributes_type", length: attributesTypeLength)
        guard text.utf8.allSatisfy({ isLetterOrDigit($0) || $0 == UInt8(ascii: "_") || $0 == UInt8(ascii: ".") })
        else {
            throw EventContractError(field: "attributes_type", "must be a Swift type name")
        }
    }

    private static func isLetterOrDigit(_ byte: UInt8) -> Bool {
        (byte >= 48 && byte <= 57) || (byte >= 65 && byte <= 90) || (byte >= 97 && byte <= 122)
    }

    /// A new `event_id`: a random UUID, lowercase.
    public static func newEventID() -> String { UUID().uuidString.lowercased() }
}

/// A value that breaks the event contract: the field, and what it must be.
public struct EventContractError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The field, as the worker names it (`device_id`, `token`, …).
    public var field: String
    /// What the field must be.
    public var message: String

    init(field: String, _ message: String) {
        self.field = field
        self.message = message
    }

    /// `field message`.
    public var description: String { "\(field) \(message)" }
}

/// `production` or `sandbox`: the APNs environment the app's tokens belong to (a debug build from Xcode gets
/// sandbox tokens, a TestFlight or App Store build production ones).
public enum PushEnvironment: String, Codable, Hashable, CaseIterable, Sendable {
    /// api.push.apple.com.
    case production
    /// api.sandbox.push.apple.com.
    case sandbox
}

/// An APNs token as the app receives it (`pushTokenUpdates`, `pushToStartTokenUpdates`): 16–200 bytes, sent
/// as lowercase hex.
public struct PushToken: Codable, Hashable, Sendable, CustomStringConvertible {
    /// Lowercase hex, two digits a byte.
    public let hex: String

    /// The token ActivityKit gave.
    public init(_ data: Data) throws(EventContractError) {
        guard EventContract.tokenBytes.contains(data.count) else {
            throw EventContractError(field: "token", "must be 16–200 bytes (has \(data.count))")
        }
        hex = data.map { byte in
            let digits = Array("0123456789abcdef".utf8)
            return String(decoding: [digits[Int(byte >> 4)], digits[Int(byte & 0x0F)]], as: UTF8.self)
        }.joined()
    }

    /// A token in hex (either case; kept lowercase).
    public init(hex: String) throws(EventContractError) {
        let utf8 = hex.utf8
        let range = EventContract.tokenBytes.lowerBound * 2...EventContract.tokenBytes.upperBound * 2
        guard utf8.count % 2 == 0, range.contains(utf8.count),
            utf8.allSatisfy({ ($0 >= 48 && $0 <= 57) || ($0 | 0x20 >= 97 && $0 | 0x20 <= 102) })
        else {
            throw EventContractError(field: "token", "must be even-length hex of 16–200 bytes")
        }
        self.hex = hex.lowercased()
    }

    /// Decodes the hex string, checked.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        self = try PushToken(hex: try container.decode(String.self))
    }

    /// Encodes the hex string.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(hex)
    }

    /// The first eight hex digits only: a token is a secret of sorts.
    public var description: String { String(hex.prefix(8)) + "…" }
}
