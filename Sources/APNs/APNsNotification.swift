public import Foundation

/// One push, ready to send: everything APNs needs besides the app's credentials.
///
/// The worker builds it from the core's planned push (headers and payload bytes); this module does not
/// look inside `payload`.
public struct APNsNotification: Sendable, Hashable, CustomStringConvertible {
    /// Device, push-to-start or activity update token, hex.
    public var deviceToken: String
    /// `apns-topic`, e.g. `com.example.app.push-type.liveactivity`.
    public var topic: String
    /// `apns-push-type`.
    public var pushType: APNsPushType
    /// `apns-priority`.
    public var priority: APNsPriority
    /// `apns-expiration`.
    public var expiration: APNsExpiration
    /// `apns-id`, echoed by APNs; log it.
    public var apnsID: UUID
    /// `apns-collapse-id` (at most 64 bytes).
    public var collapseID: String?
    /// The JSON body (at most 4096 bytes).
    public var payload: [UInt8]

    public init(
        deviceToken: String,
        topic: String,
        pushType: APNsPushType = .liveActivity,
        priority: APNsPriority = .immediate,
        expiration: APNsExpiration = .none,
        apnsID: UUID = UUID(),
        collapseID: String? = nil,
        payload: [UInt8]
    ) {
        self.deviceToken = deviceToken
        self.topic = topic
        self.pushType = pushType
        self.priority = priority
        self.expiration = expiration
        self.apnsID = apnsID
        self.collapseID = collapseID
        self.payload = payload
    }

    /// Never the whole token, never the payload.
    public var description: String {
        "APNsNotification(token: \(APNsRedaction.tokenPrefix(deviceToken)), topic: \(topic), "
            + "pushType: \(pushType), priority: \(priority.rawValue), apnsID: \(UUIDText.lowercased(apnsID)), "
            + "payload: \(payload.count) bytes)"
    }
}

/// `apns-push-type` values.
public struct APNsPushType: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public var rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }

    public static let liveActivity = APNsPushType(rawValue: "liveactivity")
    public static let alert = APNsPushType(rawValue: "alert")
    public static let background = APNsPushType(rawValue: "background")

    public var description: String { rawValue }
}

/// `apns-priority` values.
public struct APNsPriority: RawRepresentable, Hashable, Sendable {
    public var rawValue: Int
    public init(rawValue: Int) { self.rawValue = rawValue }

    /// 10: deliver now (counts against the Live Activity budget).
    public static let immediate = APNsPriority(rawValue: 10)
    /// 5: considering the device's power (does not count against the budget).
    public static let consideringDevicePower = APNsPriority(rawValue: 5)
    /// 1: prioritise power.
    public static let low = APNsPriority(rawValue: 1)
}

/// `apns-expiration`.
public enum APNsExpiration: Hashable, Sendable {
    /// No header: APNs' own storage policy.
    case none
    /// `0`: try once, do not store.
    case immediately
    /// Store and retry until this Unix time (seconds).
    case at(unixSeconds: Int)

    var headerValue: String? {
        switch self {
        case .none: nil
        case .immediately: "0"
        case .at(let seconds): String(seconds)
        }
    }
}

/// Keeps tokens out of logs and errors.
enum APNsRedaction {
    /// The first 8 characters of a token and its length, never more.
    static func tokenPrefix(_ token: String) -> String {
        "\(token.prefix(8))…(\(token.count))"
    }
}
