public import Foundation

/// The result of one call into ``OrderTracker``: the new state, the pushes to send, and why.
public struct Step: Hashable, Sendable, Codable {
    /// Store this.
    public var state: OrderState
    /// Send these (at most one per activity). Each replaces any earlier pending push of its
    /// activity (``PlannedPush/activityKey``): only the newest matters.
    public var pushes: [PlannedPush]
    /// Activities whose pending push must no longer be sent, with nothing to replace it.
    public var withdrawn: [String]
    /// Push-to-start tokens APNs reported gone: the worker retires them for the user.
    public var retiredPushToStartTokens: [PushToStartRegistration]
    /// Every decision, in order: the worker logs them, `render` prints them.
    public var decisions: [Decision]

    /// Whether ``state`` differs from the state passed in (the worker may skip the write if not).
    public var changed: Bool

    init(state: OrderState) {
        self.state = state
        self.pushes = []
        self.withdrawn = []
        self.retiredPushToStartTokens = []
        self.decisions = []
        self.changed = false
    }
}

/// One decision: a machine code (for logs and metrics) and a sentence for people.
public struct Decision: Hashable, Sendable, Codable, CustomStringConvertible {
    public struct Code: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        // Events
        public static let duplicateEvent = Code(rawValue: "duplicate_event")
        public static let wrongOrder = Code(rawValue: "wrong_order")
        public static let orderCreated = Code(rawValue: "order_created")
        public static let statusChanged = Code(rawValue: "status_changed")
        public static let detailsChanged = Code(rawValue: "details_changed")
        public static let olderEvent = Code(rawValue: "older_event")
        public static let olderEventFilledDetails = Code(rawValue: "older_event_filled_details")
        public static let terminalAbsorbed = Code(rawValue: "terminal_absorbed")
        public static let orderUnchanged = Code(rawValue: "order_unchanged")
        // Push-to-start
        public static let pushToStartRegistered = Code(rawValue: "push_to_start_registered")
        public static let pushToStartOlder = Code(rawValue: "push_to_start_older")
        public static let startPlanned = Code(rawValue: "start_planned")
        public static let startNotOnStatus = Code(rawValue: "start_not_on_status")
        public static let startWrongAttributesType = Code(rawValue: "start_wrong_attributes_type")
        public static let startDeviceRefused = Code(rawValue: "start_device_refused")
        public static let startWithdrawn = Code(rawValue: "start_withdrawn")
        // Update tokens and the app's reports
        public static let activityAdopted = Code(rawValue: "activity_adopted")
        public static let activityDiscovered = Code(rawValue: "activity_discovered")
        public static let tokenRotated = Code(rawValue: "token_rotated")
        public static let tokenOlder = Code(rawValue: "token_older")
        public static let tokenForFinalActivity = Code(rawValue: "token_for_final_activity")
        public static let waitingForOrder = Code(rawValue: "waiting_for_order")
        public static let waitingForToken = Code(rawValue: "waiting_for_token")
        public static let activityEndedOnDevice = Code(rawValue: "activity_ended_on_device")
        public static let activityAlreadyFinal = Code(rawValue: "activity_already_final")
        // Planning
        public static let updatePlanned = Code(rawValue: "update_planned")
        public static let endPlanned = Code(rawValue: "end_planned")
        public static let contentUnchanged = Code(rawValue: "content_unchanged")
        public static let superseded = Code(rawValue: "superseded")
        public static let alert = Code(rawValue: "alert")
        public static let alertETASlip = Code(rawValue: "alert_eta_slip")
        public static let alertAlreadySent = Code(rawValue: "alert_already_sent_for_step")
        public static let alertCapReached = Code(rawValue: "alert_cap_reached")
        public static let alertNoText = Code(rawValue: "alert_no_text")
        public static let noAlert = Code(rawValue: "no_alert")
        public static let priority = Code(rawValue: "priority")
        public static let budgetDowngrade = Code(rawValue: "budget_downgrade")
        public static let timestampHeld = Code(rawValue: "timestamp_held")
        public static let payloadTrimmed = Code(rawValue: "payload_trimmed")
        public static let payloadRefused = Code(rawValue: "payload_refused")
        public static let withdrawn = Code(rawValue: "withdrawn")
        // Sweep
        public static let sweepLifetime = Code(rawValue: "sweep_lifetime")
        public static let sweepIdle = Code(rawValue: "sweep_idle")
        public static let sweepNeverAdopted = Code(rawValue: "sweep_never_adopted")
        /// The order is over but APNs never accepted the activity's end: the sweeper sends it once more.
        public static let sweepTerminalNotEnded = Code(rawValue: "sweep_terminal_not_ended")
        // Outcomes
        public static let pushAccepted = Code(rawValue: "push_accepted")
        public static let tokenGone = Code(rawValue: "token_gone")
        public static let tokenGoneIgnored = Code(rawValue: "token_gone_ignored")
        public static let pushRetry = Code(rawValue: "push_retry")
        public static let pushDropped = Code(rawValue: "push_dropped")
        public static let unknownActivity = Code(rawValue: "unknown_activity")
    }

    public var code: Code
    /// The activity concerned, if any (``ActivityState/key``).
    public var activityKey: String?
    public var message: String

    public init(_ code: Code, activity: String? = nil, _ message: String) {
        self.code = code
        self.activityKey = activity
        self.message = message
    }

    public var description: String {
        "[\(code.rawValue)]" + (activityKey.map { " \($0):" } ?? "") + " \(message)"
    }
}

/// What APNs (or the transport) said about a push, classified by the worker.
public enum PushOutcome: Hashable, Sendable, Codable {
    /// 200.
    case accepted
    /// The token is no good: 410 `Unregistered`/`ExpiredToken` (with the 410 `timestamp`, if any),
    /// 400 `BadDeviceToken`, `DeviceTokenNotForTopic`.
    case tokenRejected(reason: String, unregisteredAt: Date?)
    /// 429, 5xx, connection trouble: keep the push pending; call
    /// ``OrderTracker/retry(_:now:)`` before sending again (it refreshes the timestamp).
    case retryLater(reason: String)
    /// Any other refusal: the push is given up; the activity stays.
    case dropped(reason: String)
}
