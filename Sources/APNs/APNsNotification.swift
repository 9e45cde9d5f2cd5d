package import APNsModel
package import Foundation

/// One push, ready to send: everything APNs needs besides the app's credentials.
///
/// The worker builds it from the core's planned push (headers and payload bytes); this module does not
/// look inside `payload`.
package struct APNsNotification: Sendable, Hashable, CustomStringConvertible {
    /// Device, push-to-start or activity update token, hex.
    package var deviceToken: String
    /// `apns-topic`, e.g. `com.example.app.push-type.liveactivity`.
    package var topic: String
    /// `apns-push-type`.
    package var pushType: APNsPushType
    /// `apns-priority`.
    package var priority: APNsPriority
    /// `apns-expiration`.
    package var expiration: APNsExpiration
    /// `apns-id`, echoed by APNs; log it.
    package var apnsID: UUID
    /// `apns-collapse-id` (at most 64 bytes).
    package var collapseID: String?
    /// The JSON body (at most 4096 bytes).
    package var payload: [UInt8]

    package init(
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

    /// The request it is, its headers built by the request model as a planned push's are.
    package var request: APNsRequest {
        APNsRequest(
            kind: .device(token: deviceToken),
            headers: APNsRequest.deviceHeaders(
                topic: topic, pushType: pushType.rawValue, priority: priority.rawValue,
                expiration: expiration.unixSeconds, apnsID: UUIDText.lowercased(apnsID), collapseID: collapseID),
            body: payload, requestID: apnsID)
    }

    /// Never the whole token, never the payload.
    package var description: String {
        "APNsNotification(token: \(APNsRedaction.tokenPrefix(deviceToken)), topic: \(topic), "
            + "pushType: \(pushType), priority: \(priority.rawValue), apnsID: \(UUIDText.lowercased(apnsID)), "
            + "payload: \(payload.count) bytes)"
    }
}

/// `apns-push-type` values.
package struct APNsPushType: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    package var rawValue: String
    package init(rawValue: String) { self.rawValue = rawValue }

    package static let liveActivity = APNsPushType(rawValue: "liveactivity")
    package static let alert = APNsPushType(rawValue: "alert")
    package static let background = APNsPushType(rawValue: "background")

    package var description: String { rawValue }
}

/// `apns-priority` values.
package struct APNsPriority: RawRepresentable, Hashable, Sendable {
    package var rawValue: Int
    package init(rawValue: Int) { self.rawValue = rawValue }

    /// 10: deliver now (counts against the Live Activity budget).
    package static let immediate = APNsPriority(rawValue: 10)
    /// 5: considering the device's power (does not count against the budget).
    package static let consideringDevicePower = APNsPriority(rawValue: 5)
    /// 1: prioritise power.
    package static let low = APNsPriority(rawValue: 1)
}

/// `apns-expiration`.
package enum APNsExpiration: Hashable, Sendable {
    /// No header: APNs' own storage policy.
    case none
    /// `0`: try once, do not store.
    case immediately
    /// Store and retry until this Unix time (seconds).
    case at(unixSeconds: Int)

    /// The header's value in seconds; nil for no header.
    var unixSeconds: Int? {
        switch self {
        case .none: nil
        case .immediately: 0
        case .at(let seconds): seconds
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
