package import Foundation

/// One request of an app's broadcast channels (iOS 18): its kind, its `apns-*` headers and its body. The client
/// adds the host, path, method and provider token.
package struct APNsChannelRequest: Sendable, Hashable, CustomStringConvertible {
    package enum Kind: Sendable, Hashable {
        /// `POST /4/broadcasts/apps/<bundle id>` with `apns-channel-id`: one push to every activity in the channel.
        case broadcast
        /// `POST /1/apps/<bundle id>/channels` on the channel management host; the body holds the
        /// `message-storage-policy` and `push-type`.
        case createChannel
        /// `DELETE /1/apps/<bundle id>/channels` with `apns-channel-id`.
        case deleteChannel
    }

    package var kind: Kind
    /// `apns-channel-id`, `apns-push-type`, `apns-priority`, `apns-expiration`, `apns-request-id`, as the kind
    /// needs them.
    package var headers: [(name: String, value: String)]
    package var body: [UInt8]
    /// `apns-request-id`: the outcome names it.
    package var requestID: UUID

    package init(kind: Kind, headers: [(name: String, value: String)], body: [UInt8], requestID: UUID) {
        self.kind = kind
        self.headers = headers
        self.body = body
        self.requestID = requestID
    }

    package static func == (lhs: Self, rhs: Self) -> Bool {
        lhs.kind == rhs.kind && lhs.body == rhs.body && lhs.requestID == rhs.requestID
            && lhs.headers.map(\.name) == rhs.headers.map(\.name)
            && lhs.headers.map(\.value) == rhs.headers.map(\.value)
    }

    package func hash(into hasher: inout Hasher) {
        hasher.combine(requestID)
        hasher.combine(body)
    }

    /// Channel ids are not secret; the body is left out.
    package var description: String {
        "APNsChannelRequest(\(kind), requestID: \(UUIDText.lowercased(requestID)), body: \(body.count) bytes)"
    }
}
