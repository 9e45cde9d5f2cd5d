public import Foundation

/// What the simulated phone made of a push. APNs answers 200 for most of these; only the device knows.
public struct DeviceVerdict: Sendable, Hashable, Codable {
    public enum Kind: String, Sendable, Hashable, Codable {
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
    }

    public var kind: Kind
    /// Why, in words (which field, which timestamps).
    public var detail: String?

    public init(_ kind: Kind, _ detail: String? = nil) {
        self.kind = kind
        self.detail = detail
    }
}

/// One request as the simulator saw it, with APNs' answer and the device's verdict.
public struct PushRecord: Sendable, Codable, Hashable {
    public var sequence: Int
    public var receivedAt: Date
    public var connectionID: Int
    public var streamID: Int
    public var method: String
    public var path: String
    public var deviceToken: String
    public var topic: String?
    public var pushType: String?
    public var priority: Int?
    public var expiration: Int?
    public var apnsID: String
    public var collapseID: String?
    /// Key id and `iat` of the provider token, and a short fingerprint telling tokens apart (never the token).
    public var keyID: String?
    public var issuedAt: Int?
    public var providerTokenFingerprint: String?
    public var payload: String
    /// APNs' answer: `0` when none was sent (dropped connection, stall, GOAWAY).
    public var status: Int
    public var reason: String?
    /// For 410 `Unregistered`: when the token became invalid (the body's millisecond `timestamp`).
    public var unregisteredAt: Date?
    public var verdict: DeviceVerdict
    public var activityID: String?
    /// For a push-to-start: the update token the new activity was issued (the app would upload it).
    public var issuedUpdateToken: String?
}

/// What a phone shows for one Live Activity.
public struct ActivityView: Sendable, Codable, Hashable {
    public var activityID: String
    /// The activity's update token.
    public var updateToken: String
    /// The push-to-start token that created it, if a push started it.
    public var startedByToken: String?
    public var attributesType: String?
    public var attributes: JSONValue?
    public var contentState: JSONValue?
    /// `aps.timestamp` of the state shown (Unix seconds).
    public var timestamp: Double?
    public var staleDate: Double?
    public var dismissalDate: Double?
    public var relevanceScore: Double?
    public var ended: Bool
    public var endedAt: Date?
    public var appliedCount: Int
    public var droppedCount: Int
    public var alertCount: Int
}

/// What the simulator knows about one device token.
public struct DeviceView: Sendable, Codable, Hashable {
    public enum Kind: String, Sendable, Codable, Hashable {
        /// Not yet used, or used for non-Live-Activity pushes only.
        case unknown
        /// A push-to-start token (a `start` push was sent to it).
        case pushToStart
        /// A per-activity update token.
        case activity
    }

    public var token: String
    public var bundleID: String?
    public var environment: SimulatorConfiguration.Environment
    public var kind: Kind
    /// Set when marked unregistered: 410 `Unregistered` with this time (milliseconds in the body).
    public var unregisteredAt: Date?
    /// Set when marked expired: 410 `ExpiredToken`.
    public var expired: Bool
    public var pushCount: Int
    /// The activity this update token drives, or the activities this push-to-start token started.
    public var activities: [ActivityView]
}

/// Connection and request counters.
public struct SimulatorStatistics: Sendable, Codable, Hashable {
    public var connectionsAccepted: Int
    public var connectionsOpen: Int
    public var requests: Int
    public var goawaysSent: Int
}
