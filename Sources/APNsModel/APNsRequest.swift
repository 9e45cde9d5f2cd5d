package import Foundation

/// One request to APNs, without its transport: which endpoint, its `apns-*` headers and its body. The planner
/// builds it (the headers come from ``liveActivityHeaders(channelID:topic:priority:expiration:apnsID:)`` or
/// ``deviceHeaders(topic:pushType:priority:expiration:apnsID:collapseID:)``, and nowhere else); the client adds
/// the host, the path's token or bundle id, the method, the provider token and `content-type`, and sends it.
/// (APNSwift keeps its request model apart from its transport the same way.)
package struct APNsRequest: Sendable, Hashable, CustomStringConvertible {
    package enum Kind: Sendable, Hashable {
        /// `POST /3/device/<token>`: a push to a device, push-to-start or activity token (hex).
        case device(token: String)
        /// `POST /4/broadcasts/apps/<bundle id>` with `apns-channel-id`: one push to every activity in the channel.
        case broadcast
        /// `POST /1/apps/<bundle id>/channels` on the channel management host; the body holds the
        /// `message-storage-policy` and `push-type`.
        case createChannel
        /// `DELETE /1/apps/<bundle id>/channels` with `apns-channel-id`.
        case deleteChannel
    }

    /// A header as planned (and stored with a pending push).
    package struct Header: Hashable, Sendable, Codable {
        package var name: String
        package var value: String

        package init(name: String, value: String) {
            self.name = name
            self.value = value
        }
    }

    package var kind: Kind
    package var headers: [Header]
    package var body: [UInt8]
    /// `apns-id` (to a device) or `apns-request-id` (a channel's request): APNs echoes it; the outcome names it.
    package var requestID: UUID

    package init(kind: Kind, headers: [Header], body: [UInt8], requestID: UUID) {
        self.kind = kind
        self.headers = headers
        self.body = body
        self.requestID = requestID
    }

    /// The headers of a Live Activity push: to a device token (by topic), or as a broadcast on a channel.
    package static func liveActivityHeaders(
        channelID: String?, topic bundleID: String, priority: Int, expiration: Int, apnsID: String
    ) -> [Header] {
        if let channelID {
            return [
                Header(name: "apns-push-type", value: "liveactivity"),
                Header(name: "apns-channel-id", value: channelID),
                Header(name: "apns-priority", value: String(priority)),
                Header(name: "apns-expiration", value: String(expiration)),
                Header(name: "apns-request-id", value: apnsID),
            ]
        }
        return deviceHeaders(
            topic: "\(bundleID).push-type.liveactivity", pushType: "liveactivity", priority: priority,
            expiration: expiration, apnsID: apnsID)
    }

    /// The headers of a push to a device: `apns-push-type`, `apns-topic`, `apns-priority`, `apns-expiration`
    /// (none: APNs' own storage policy), `apns-id`, and `apns-collapse-id` when given.
    package static func deviceHeaders(
        topic: String, pushType: String, priority: Int, expiration: Int?, apnsID: String, collapseID: String? = nil
    ) -> [Header] {
        var headers = [
            Header(name: "apns-push-type", value: pushType),
            Header(name: "apns-topic", value: topic),
            Header(name: "apns-priority", value: String(priority)),
        ]
        if let expiration { headers.append(Header(name: "apns-expiration", value: String(expiration))) }
        headers.append(Header(name: "apns-id", value: apnsID))
        if let collapseID { headers.append(Header(name: "apns-collapse-id", value: collapseID)) }
        return headers
    }

    /// The headers of a channel's creation (its settings are in the body).
    package static func channelCreationHeaders(requestID: String) -> [Header] {
        [Header(name: "apns-request-id", value: requestID)]
    }

    /// The headers of a channel's deletion.
    package static func channelDeletionHeaders(channelID: String, requestID: String) -> [Header] {
        [Header(name: "apns-channel-id", value: channelID), Header(name: "apns-request-id", value: requestID)]
    }

    /// Never a whole token, never the body.
    package var description: String {
        let target =
            switch kind {
            case .device(let token): "device \(token.prefix(8))…(\(token.count))"
            case .broadcast: "broadcast"
            case .createChannel: "createChannel"
            case .deleteChannel: "deleteChannel"
            }
        return "APNsRequest(\(target), requestID: \(requestID.uuidString.lowercased()), body: \(body.count) bytes)"
    }
}
