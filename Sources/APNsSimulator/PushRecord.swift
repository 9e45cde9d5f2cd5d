package import Foundation
package import LiveDeliveryJSON

/// What the simulated phone made of a push. APNs answers 200 for most of these; only the device knows.
package struct DeviceVerdict: Sendable, Hashable, Codable {
    package enum Kind: String, Sendable, Hashable, Codable {
        /// An update was applied: the phone shows this content-state.
        case displayed
        /// A push-to-start created an activity (see ``PushRecord/activityID`` and ``PushRecord/issuedUpdateToken``).
        case started
        /// An end push ended the activity.
        case ended
        /// The update's `timestamp` is older than the one already shown: dropped.
        case staleTimestamp
        /// The activity had already ended: ignored.
        case afterEnd
        /// The `timestamp` is more than 8 hours ahead: dropped.
        case futureTimestamp
        /// The priority-10 budget of the hour is used up: dropped, silently (200).
        case throttled
        /// The content-state or attributes would not decode into the app's types.
        case wouldNotDecode
        /// The `aps` dictionary lacks what a Live Activity push needs (event, timestamp, content-state, alert on start).
        case invalidPayload
        /// Accepted by APNs but not a Live Activity push (another push type).
        case notLiveActivity
        /// APNs refused the request (status and reason in the record); the device never saw it.
        case rejected
        /// An injected fault answered, delayed, stalled or dropped the request.
        case fault
        /// A `start` named a channel (`input-push-channel`) that is not live for the app: not started.
        case unknownChannel
        /// APNs accepted a broadcast; what each subscribed activity made of it is in ``PushRecord/deliveries``.
        case broadcast
        /// APNs carried out a channel-management request (create, read, delete, list).
        case channel
    }

    package var kind: Kind
    /// Why, in words (which field, which timestamps).
    package var detail: String?

    package init(_ kind: Kind, _ detail: String? = nil) {
        self.kind = kind
        self.detail = detail
    }
}

/// One request as the simulator saw it, with APNs' answer and the device's verdict.
package struct PushRecord: Sendable, Codable, Hashable {
    package var sequence: Int
    package var receivedAt: Date
    package var connectionID: Int
    package var streamID: Int
    package var method: String
    package var path: String
    package var deviceToken: String
    package var topic: String?
    package var pushType: String?
    package var priority: Int?
    package var expiration: Int?
    package var apnsID: String
    package var collapseID: String?
    /// Key id and `iat` of the provider token, and a short fingerprint telling tokens apart (never the token).
    package var keyID: String?
    package var issuedAt: Int?
    package var providerTokenFingerprint: String?
    package var payload: String
    /// APNs' answer: `0` when none was sent (dropped connection, stall, GOAWAY).
    package var status: Int
    package var reason: String?
    /// For 410 `Unregistered`: when the token became invalid (the body's millisecond `timestamp`).
    package var unregisteredAt: Date?
    package var verdict: DeviceVerdict
    package var activityID: String?
    /// For a push-to-start: the update token the new activity was issued (the app would upload it).
    package var issuedUpdateToken: String?
    /// A device push, a broadcast or a channel-management request (by path).
    package var kind: APNsRequestKind
    /// The `apns-channel-id` header; for a created channel its new id; for a `start` the channel its
    /// `input-push-channel` named.
    package var channelID: String?
    /// For a broadcast: what each activity subscribed to the channel made of it. For a `start` that
    /// subscribed to a channel: the channel's stored broadcast, when it was applied at once.
    package var deliveries: [BroadcastDelivery]?
}

/// Which APNs service a request is for, by its path.
package enum APNsRequestKind: String, Sendable, Hashable, Codable {
    /// `/3/device/<token>` (and any path that is none of the others).
    case device
    /// `/4/broadcasts/apps/<bundleID>`.
    case broadcast
    /// `/1/apps/<bundleID>/channels` and `/1/apps/<bundleID>/all-channels`.
    case channels

    init(path: String) {
        if path.hasPrefix("/4/broadcasts/") {
            self = .broadcast
        } else if path.hasPrefix("/1/apps/") {
            self = .channels
        } else {
            self = .device
        }
    }

    /// The response header that carries the request's id: `apns-id`, or `apns-request-id` for channels.
    var idHeader: String { self == .device ? "apns-id" : "apns-request-id" }
}

/// What one activity subscribed to a channel made of a broadcast.
package struct BroadcastDelivery: Sendable, Codable, Hashable {
    package var activityID: String
    package var verdict: DeviceVerdict
}

/// What a phone shows for one Live Activity.
package struct ActivityView: Sendable, Codable, Hashable {
    package var activityID: String
    /// The activity's update token; none for an activity subscribed to a channel.
    package var updateToken: String?
    /// The broadcast channel the activity is subscribed to (its pushes come through the channel).
    package var channelID: String?
    /// The push-to-start token that created it, if a push started it.
    package var startedByToken: String?
    package var attributesType: String?
    package var attributes: JSONValue?
    package var contentState: JSONValue?
    /// `aps.timestamp` of the state shown (Unix seconds).
    package var timestamp: Double?
    package var staleDate: Double?
    package var dismissalDate: Double?
    package var relevanceScore: Double?
    package var ended: Bool
    package var endedAt: Date?
    package var appliedCount: Int
    package var droppedCount: Int
    package var alertCount: Int
}

/// What the simulator knows about one device token.
package struct DeviceView: Sendable, Codable, Hashable {
    package enum Kind: String, Sendable, Codable, Hashable {
        /// Not yet used, or used for non-Live-Activity pushes only.
        case unknown
        /// A push-to-start token (a `start` push was sent to it).
        case pushToStart
        /// A per-activity update token.
        case activity
    }

    package var token: String
    package var bundleID: String?
    package var environment: SimulatorConfiguration.Environment
    package var kind: Kind
    /// Set when marked unregistered: 410 `Unregistered` with this time (milliseconds in the body).
    package var unregisteredAt: Date?
    /// Set when marked expired: 410 `ExpiredToken`.
    package var expired: Bool
    package var pushCount: Int
    /// The activity this update token drives, or the activities this push-to-start token started.
    package var activities: [ActivityView]
}

/// A broadcast channel, as APNs keeps it.
package struct ChannelView: Sendable, Codable, Hashable {
    /// The channel id: base64 of 16 random bytes.
    package var channelID: String
    package var bundleID: String
    package var environment: SimulatorConfiguration.Environment
    /// `0` No Message Stored, `1` Most Recent Message Stored.
    package var messageStoragePolicy: Int
    package var createdAt: Date
    /// Set once the channel is deleted (by the provider, the control API or the capability turned off).
    package var deletedAt: Date?
    /// Activities subscribed to the channel, oldest first.
    package var activityIDs: [String]
    /// Broadcasts APNs accepted for the channel.
    package var broadcastCount: Int
}

/// Connection and request counters.
package struct SimulatorStatistics: Sendable, Codable, Hashable {
    package var connectionsAccepted: Int
    package var connectionsOpen: Int
    package var requests: Int
    package var goawaysSent: Int
}
