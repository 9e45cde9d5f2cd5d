package import Foundation
import LiveDeliveryJSON

/// One Live Activity of an order, on one device.
package struct ActivityState: Hashable, Sendable {
    /// Where the activity is in its life.
    ///
    /// `pending_start` (a start push is planned, not yet accepted by APNs) → `starting` (accepted;
    /// waiting for the app to report the update token) → `active` (update token on file) →
    /// `ending` (end push planned) → `ended`. Also `expired` (the system or the 8-hour limit ended
    /// it) and `failed` (token gone, start refused, never adopted). The last three are final.
    package enum Phase: String, Hashable, Sendable, CaseIterable, CustomStringConvertible {
        case pendingStart = "pending_start"
        case starting
        case active
        case ending
        case ended
        case expired
        case failed

        /// Final phases: nothing is ever pushed again.
        package var isFinal: Bool { self == .ended || self == .expired || self == .failed }
        package var description: String { rawValue }
    }

    /// A per-activity update token on file.
    package struct UpdateToken: Hashable, Sendable {
        package var token: DeviceToken
        package var bundleID: String
        package var environment: APNsEnvironment
        /// The reporting event (a newer one rotates the token).
        package var key: EventKey
        /// When the worker received it (`now` of that step): a 410 whose timestamp is older than
        /// this does not retire the token.
        package var receivedAt: Date

        package init(
            token: DeviceToken, bundleID: String, environment: APNsEnvironment, key: EventKey, receivedAt: Date
        ) {
            self.token = token
            self.bundleID = bundleID
            self.environment = environment
            self.key = key
            self.receivedAt = receivedAt
        }
    }

    /// What a planned push carried, for "did the content change", ETA slips and never-older checks.
    package struct ContentMark: Hashable, Sendable {
        /// The compact JSON of `content-state`.
        package var contentState: String
        package var step: String
        /// `relevance-score`: part of the content (it orders the activities on screen).
        package var relevance: Double
        package var status: OrderStatus
        package var statusKey: EventKey
        package var eta: ETAWindow?

        package init(
            contentState: String, step: String, relevance: Double, status: OrderStatus, statusKey: EventKey,
            eta: ETAWindow?
        ) {
            self.contentState = contentState
            self.step = step
            self.relevance = relevance
            self.status = status
            self.statusKey = statusKey
            self.eta = eta
        }

        /// Whether a push would show something new compared with `other`.
        func differs(from other: ContentMark?) -> Bool {
            guard let other else { return true }
            return contentState != other.contentState || relevance != other.relevance
        }
    }

    /// The push planned and not yet settled by ``OrderTracker/record(_:for:in:now:)``.
    package struct PendingPush: Hashable, Sendable {
        package var apnsID: String
        package var kind: PlannedPush.Kind
        package var timestamp: Int
        package var priority: Int
        /// The step whose alert the push carries; kept when a newer state of the same step replaces it.
        package var alertStep: String?
        /// Which texts the alert used.
        package var alertKind: AlertKind?
        package var mark: ContentMark

        package init(
            apnsID: String, kind: PlannedPush.Kind, timestamp: Int, priority: Int, alertStep: String?,
            alertKind: AlertKind?, mark: ActivityState.ContentMark
        ) {
            self.apnsID = apnsID
            self.kind = kind
            self.timestamp = timestamp
            self.priority = priority
            self.alertStep = alertStep
            self.alertKind = alertKind
            self.mark = mark
        }
    }

    /// Which texts an alert used: the status's (`status`), or the ETA slip's (`eta_slip`, stored so).
    package enum AlertKind: String, Hashable, Sendable {
        case status
        case etaSlip = "eta_slip"
    }

    /// The app and storage policy of an order's broadcast channel (``OrderState/channel`` only).
    package struct Broadcast: Hashable, Sendable {
        package var bundleID: String
        package var environment: APNsEnvironment
        /// Message storage policy 1 (the most recent message kept for an offline device) or 0 (none:
        /// broadcasts then go with `apns-expiration: 0`). Fixed when the channel is created.
        package var storesMostRecent: Bool

        package init(bundleID: String, environment: APNsEnvironment, storesMostRecent: Bool) {
            self.bundleID = bundleID
            self.environment = environment
            self.storesMostRecent = storesMostRecent
        }

        /// `"<bundle id> <environment>"`: what channel counts are kept by.
        package var app: String { "\(bundleID) \(environment.rawValue)" }
    }

    /// Stable within the order: `device:<device_id>` for activities the worker starts, or
    /// `activity:<activity_id>` for activities the app started. The worker keys its outbox by it.
    package var key: String
    package var activityID: String?
    package var deviceID: String?
    package var phase: Phase
    /// Why the activity ended, expired or failed, or what its end waits for.
    package var closeReason: CloseReason?
    package var updateToken: UpdateToken?
    /// The push-to-start token that started it.
    package var startToken: PushToStartRegistration?
    package var createdAt: Date
    /// When the start was accepted or the app's activity was first seen (the 8-hour clock).
    package var startedAt: Date?
    package var endedAt: Date?
    package var pending: PendingPush?
    /// The newest content planned (pending or sent).
    package var planned: ContentMark?
    /// The newest content APNs accepted.
    package var sent: ContentMark?
    /// The newest `aps.timestamp` used; the next is strictly greater.
    package var lastTimestamp: Int
    /// Steps that have alerted (or have an alert planned): never twice.
    package var alertedSteps: [String]
    package var alertCount: Int
    /// Unix seconds of accepted priority-10 pushes in the last hour (the budget model).
    package var highPriorityLog: [Int]
    /// The device's frequent-updates setting as the app last reported it (`activity.settings`); nil when
    /// never reported. On: the larger priority-10 budget applies.
    package var frequentPushes: Bool?
    /// When the app scheduled the activity to start on the device (`activity.token`'s `scheduled_start`):
    /// until then it is pending there, and the sweeper's clocks count from it.
    package var scheduledStart: Date?
    /// A follower's activity started into the order's broadcast channel: its id (the channel's pushes
    /// update and end it; it has no update token). For ``OrderState/channel``: the channel's id once APNs
    /// created it.
    package var channelID: String? {
        get { channelInfo?.value.channelID }
        set { updateChannelInfo { $0.channelID = newValue } }
    }
    /// For ``OrderState/channel`` only: the channel's app and storage policy.
    package var broadcast: Broadcast? {
        get { channelInfo?.value.broadcast }
        set { updateChannelInfo { $0.broadcast = newValue } }
    }

    struct ChannelInfo: Hashable, Sendable {
        var channelID: String?
        var broadcast: Broadcast?
    }

    /// ``channelID`` and ``broadcast``, out of line and nil for an activity of no channel (most): inline, they
    /// made every copy of every activity larger and retained more.
    var channelInfo: OutOfLine<ChannelInfo>?

    private mutating func updateChannelInfo(_ change: (inout ChannelInfo) -> Void) {
        var value = channelInfo?.value ?? ChannelInfo()
        change(&value)
        channelInfo = value.channelID == nil && value.broadcast == nil ? nil : OutOfLine(value)
    }

    package init(key: String, activityID: String?, deviceID: String?, phase: Phase, now: Date) {
        self.key = key
        self.activityID = activityID
        self.deviceID = deviceID
        self.phase = phase
        self.createdAt = now
        self.lastTimestamp = 0
        self.alertedSteps = []
        self.alertCount = 0
        self.highPriorityLog = []
    }

    /// Closes the activity (or the channel): its final phase (or `ending`'s successor), why, and when.
    mutating func close(_ phase: Phase, _ reason: CloseReason, at now: Date) {
        self.phase = phase
        closeReason = reason
        endedAt = now
    }

    /// Where the sweeper's lifetime clock starts: when the activity started, or its scheduled start if later.
    var clockStart: Date {
        let started = startedAt ?? createdAt
        guard let scheduledStart, scheduledStart > started else { return started }
        return scheduledStart
    }

    /// The token pushes go to now: the update token, or for a start the push-to-start token.
    var pushTarget: (token: DeviceToken, bundleID: String, environment: APNsEnvironment)? {
        if phase == .pendingStart, let start = startToken {
            return (start.token, start.bundleID, start.environment)
        }
        if let update = updateToken { return (update.token, update.bundleID, update.environment) }
        return nil
    }
}

extension ActivityState {
    /// What APNs' acceptance of a push carrying `mark` changes (``OrderTracker/record(_:for:in:now:)``):
    /// the content counts as sent unless something newer was sent already, and an accepted
    /// priority-10 push joins the budget log (entries at or before `cutoff` are dropped; planning
    /// counts the last hour itself).
    mutating func countSent(_ mark: ContentMark, priority: Int, timestamp: Int, cutoff: Int) {
        if sent.map({ !$0.statusKey.isNewer(than: mark.statusKey) }) ?? true {
            sent = mark
        }
        if priority == 10 {
            highPriorityLog = highPriorityLog.filter { $0 > cutoff } + [timestamp]
        }
    }
}

extension OrderState {
    /// Settles the pending updates APNs accepted whose acceptance was not written into this state
    /// (the worker records a delivered current update by its `apns-id` alone, beside the stored
    /// state, and settles it here when it next reads the order). An activity whose pending
    /// push is an update with one of these ids counts its content as sent and has nothing pending,
    /// as ``OrderTracker/record(_:for:in:now:)`` would have left it; the budget log drops entries
    /// older than an hour before the push's own timestamp, so the result depends on nothing but
    /// the state and the ids. Returns whether anything changed.
    @discardableResult
    package mutating func settleDelivered(_ apnsIDs: Set<String>) -> Bool {
        guard !apnsIDs.isEmpty else { return false }
        var changed = false
        for index in activities.indices {
            guard let pending = activities[index].pending, pending.kind == .update,
                apnsIDs.contains(pending.apnsID)
            else { continue }
            activities[index].countSent(
                pending.mark, priority: pending.priority, timestamp: pending.timestamp,
                cutoff: pending.timestamp - 3600)
            activities[index].pending = nil
            changed = true
        }
        return changed
    }
}

extension ActivityState.ContentMark {
    /// What changed since `previous`, for people: "ETA moved +5 min", "en route → arriving".
    func change(since previous: ActivityState.ContentMark) -> String {
        let mark = self
        if previous.eta != mark.eta, let eta = mark.eta {
            if let old = previous.eta {
                let slip = Int(eta.latest.timeIntervalSince(old.latest) / 60)
                return "ETA moved \(slip >= 0 ? "+" : "")\(slip) min"
            }
            return "ETA known"
        }
        if previous.contentState == mark.contentState && previous.relevance != mark.relevance {
            return
                "\(previous.status) → \(mark.status): relevance \(JSONWriter.format(previous.relevance)) → \(JSONWriter.format(mark.relevance))"
        }
        return previous.status != mark.status ? "\(previous.status) → \(mark.status)" : "details changed"
    }
}
