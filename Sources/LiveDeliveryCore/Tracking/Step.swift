package import Foundation

/// The result of one call into ``OrderTracker``: the new state, and what it does (``Effects``).
///
/// The worker calls the tracker in place (``OrderTracker/apply(_:updating:context:now:)`` and the like): the state is
/// changed where it lies and only the effects come back, so no step holds a second reference to the state's
/// activities and event ids, which would copy them at the first change. Tests, `render` and the sweeper take a
/// step by value.
package struct Step: Hashable, Sendable {
    /// Store this.
    package var state: OrderState
    /// What the call does besides changing the state.
    package var effects: Effects

    /// The pushes, withdrawals, retired tokens and decisions of one call.
    package struct Effects: Hashable, Sendable {
        /// Send these (at most one per activity). Each replaces any earlier pending push of its
        /// activity (``PlannedPush/activityKey``): only the newest matters.
        package var pushes: [PlannedPush] = []
        /// Activities whose pending push must no longer be sent, with nothing to replace it.
        package var withdrawn: [String] = []
        /// Push-to-start tokens APNs reported gone: the worker retires them for the user.
        package var retiredPushToStartTokens: [PushToStartRegistration] = []
        /// Every decision, in order: the worker logs them, `render` prints them.
        package var decisions: [Decision] = []

        package init() {}
    }

    package var pushes: [PlannedPush] {
        get { effects.pushes }
        _modify { yield &effects.pushes }
    }
    package var withdrawn: [String] {
        get { effects.withdrawn }
        _modify { yield &effects.withdrawn }
    }
    package var retiredPushToStartTokens: [PushToStartRegistration] {
        get { effects.retiredPushToStartTokens }
        _modify { yield &effects.retiredPushToStartTokens }
    }
    package var decisions: [Decision] {
        get { effects.decisions }
        _modify { yield &effects.decisions }
    }

    init(state: OrderState) {
        self.state = state
        self.effects = Effects()
    }

    /// Takes `state` for the step to change in place, leaving an empty state behind; ``give(back:)`` returns it.
    init(taking state: inout OrderState) {
        self.state = Self.vacated
        self.effects = Effects()
        // A step makes a handful of decisions: one allocation instead of growing 1, 2, 4, 8.
        self.effects.decisions.reserveCapacity(8)
        swap(&self.state, &state)
    }

    /// Puts the state back where ``init(taking:)`` took it from; returns the effects.
    mutating func give(back state: inout OrderState) -> Effects {
        swap(&self.state, &state)
        return effects
    }

    /// `push` is its activity's push in this step: it replaces one planned or withdrawn earlier in the step.
    mutating func plan(_ push: PlannedPush) {
        pushes.removeAll { $0.activityKey == push.activityKey }
        withdrawn.removeAll { $0 == push.activityKey }
        pushes.append(push)
    }

    /// A step over `state`, as `body` changes it.
    static func over(_ state: OrderState, _ body: (inout Step) -> Void) -> Step {
        var step = Step(state: state)
        body(&step)
        return step
    }

    /// `body` run on `state` in place (``init(taking:)``); the effects come back.
    @inline(__always)
    static func inPlace(_ state: inout OrderState, _ body: (inout Step) -> Void) -> Effects {
        var step = Step(taking: &state)
        body(&step)
        return step.give(back: &state)
    }

    /// What a state taken leaves behind (no storage of its own: its arrays are empty).
    private static let vacated = OrderState(orderID: "", now: Date(timeIntervalSinceReferenceDate: 0))
}

/// One decision: a machine code (for logs and metrics) and a sentence for people.
package struct Decision: Hashable, Sendable, Codable, CustomStringConvertible {
    /// Up to three of `items`, and an ellipsis for the rest.
    static func sample(_ items: [String]) -> String {
        items.prefix(3).joined(separator: ", ") + (items.count > 3 ? ", …" : "")
    }

    package struct Code: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible {
        package let rawValue: String
        package init(rawValue: String) { self.rawValue = rawValue }
        package var description: String { rawValue }

        // Events
        package static let duplicateEvent = Code(rawValue: "duplicate_event")
        package static let wrongOrder = Code(rawValue: "wrong_order")
        package static let orderCreated = Code(rawValue: "order_created")
        package static let statusChanged = Code(rawValue: "status_changed")
        package static let detailsChanged = Code(rawValue: "details_changed")
        package static let olderEvent = Code(rawValue: "older_event")
        package static let olderEventFilledDetails = Code(rawValue: "older_event_filled_details")
        package static let terminalAbsorbed = Code(rawValue: "terminal_absorbed")
        package static let orderUnchanged = Code(rawValue: "order_unchanged")
        // Push-to-start
        package static let pushToStartRegistered = Code(rawValue: "push_to_start_registered")
        package static let pushToStartOlder = Code(rawValue: "push_to_start_older")
        package static let pushToStartDeviceLimit = Code(rawValue: "push_to_start_device_limit")
        package static let startPlanned = Code(rawValue: "start_planned")
        package static let startNotOnStatus = Code(rawValue: "start_not_on_status")
        package static let startWrongAttributesType = Code(rawValue: "start_wrong_attributes_type")
        package static let startDeviceRefused = Code(rawValue: "start_device_refused")
        package static let startWithdrawn = Code(rawValue: "start_withdrawn")
        // The person's settings (`activity.settings`)
        package static let settingsReported = Code(rawValue: "settings_reported")
        package static let settingsOlder = Code(rawValue: "settings_older")
        package static let frequentUpdatesOn = Code(rawValue: "frequent_updates_on")
        package static let frequentUpdatesOff = Code(rawValue: "frequent_updates_off")
        package static let activitiesDisabled = Code(rawValue: "activities_disabled")
        package static let startActivitiesDisabled = Code(rawValue: "start_activities_disabled")
        // Followers and broadcast channels (`order.followers`)
        package static let followersChanged = Code(rawValue: "followers_changed")
        package static let followersOlder = Code(rawValue: "followers_older")
        package static let channelPlanned = Code(rawValue: "channel_planned")
        package static let channelLimitNear = Code(rawValue: "channel_limit_near")
        package static let channelOpened = Code(rawValue: "channel_opened")
        package static let channelRefused = Code(rawValue: "channel_refused")
        package static let waitingForChannel = Code(rawValue: "waiting_for_channel")
        package static let channelGone = Code(rawValue: "channel_gone")
        package static let channelClosePlanned = Code(rawValue: "channel_close_planned")
        package static let channelClosed = Code(rawValue: "channel_closed")
        package static let channelCloseFailed = Code(rawValue: "channel_close_failed")
        // Update tokens and the app's reports
        package static let activityAdopted = Code(rawValue: "activity_adopted")
        package static let activityDiscovered = Code(rawValue: "activity_discovered")
        package static let activityLimit = Code(rawValue: "activity_limit")
        /// The decisions that say a publisher reached a bound (counted in `livedelivery_limits_total{limit}`).
        package static let limits: Set<Code> = [.activityLimit, .pushToStartDeviceLimit]
        package static let tokenRotated = Code(rawValue: "token_rotated")
        package static let tokenOlder = Code(rawValue: "token_older")
        package static let tokenForFinalActivity = Code(rawValue: "token_for_final_activity")
        package static let waitingForOrder = Code(rawValue: "waiting_for_order")
        package static let waitingForToken = Code(rawValue: "waiting_for_token")
        package static let activityEndedOnDevice = Code(rawValue: "activity_ended_on_device")
        package static let activityAlreadyFinal = Code(rawValue: "activity_already_final")
        package static let activityScheduled = Code(rawValue: "activity_scheduled")
        // Planning
        package static let updatePlanned = Code(rawValue: "update_planned")
        package static let endPlanned = Code(rawValue: "end_planned")
        package static let contentUnchanged = Code(rawValue: "content_unchanged")
        package static let superseded = Code(rawValue: "superseded")
        package static let alert = Code(rawValue: "alert")
        package static let alertETASlip = Code(rawValue: "alert_eta_slip")
        package static let alertAlreadySent = Code(rawValue: "alert_already_sent_for_step")
        package static let alertCapReached = Code(rawValue: "alert_cap_reached")
        package static let alertNoText = Code(rawValue: "alert_no_text")
        package static let noAlert = Code(rawValue: "no_alert")
        package static let priority = Code(rawValue: "priority")
        package static let budgetDowngrade = Code(rawValue: "budget_downgrade")
        package static let timestampHeld = Code(rawValue: "timestamp_held")
        package static let payloadTrimmed = Code(rawValue: "payload_trimmed")
        package static let payloadRefused = Code(rawValue: "payload_refused")
        package static let withdrawn = Code(rawValue: "withdrawn")
        // Sweep
        package static let sweepLifetime = Code(rawValue: "sweep_lifetime")
        package static let sweepIdle = Code(rawValue: "sweep_idle")
        package static let sweepNeverAdopted = Code(rawValue: "sweep_never_adopted")
        /// The order is over but APNs never accepted the activity's end: the sweeper sends it once more.
        package static let sweepTerminalNotEnded = Code(rawValue: "sweep_terminal_not_ended")
        // Outcomes
        package static let pushAccepted = Code(rawValue: "push_accepted")
        package static let tokenGone = Code(rawValue: "token_gone")
        package static let tokenGoneIgnored = Code(rawValue: "token_gone_ignored")
        package static let pushRetry = Code(rawValue: "push_retry")
        package static let pushDropped = Code(rawValue: "push_dropped")
        package static let unknownActivity = Code(rawValue: "unknown_activity")
        // Cells (docs/scaling.md, Adding a cell)
        /// The order moved to another cell, which carries its activities on: here they close without a push.
        package static let handedOver = Code(rawValue: "handed_over")
        /// An order's state came from the cell it was in before this one was added.
        package static let takenOver = Code(rawValue: "taken_over")
        /// An event or a sweep of an order handed over to another cell: nothing happens here.
        package static let orderHandedOver = Code(rawValue: "order_handed_over")
    }

    package var code: Code
    /// The activity concerned, if any (``ActivityState/key``).
    package var activityKey: String?
    package var message: String

    package init(_ code: Code, activity: String? = nil, _ message: String) {
        self.code = code
        self.activityKey = activity
        self.message = message
    }

    package var description: String {
        "[\(code.rawValue)]" + (activityKey.map { " \($0):" } ?? "") + " \(message)"
    }
}

/// What APNs (or the transport) said about a push, classified by the worker.
package enum PushOutcome: Hashable, Sendable, Codable {
    /// 200 (201, 204 for a channel request).
    case accepted
    /// 201 to ``PlannedPush/Kind/openChannel``: the channel APNs created.
    case channelCreated(channelID: String)
    /// The token is no good: 410 `Unregistered`/`ExpiredToken` (with the 410 `timestamp`, if any),
    /// 400 `BadDeviceToken`, `DeviceTokenNotForTopic`; for a channel request, 400 `ChannelNotRegistered`.
    case tokenRejected(reason: String, unregisteredAt: Date?)
    /// 429, 5xx, connection trouble: keep the push pending; call
    /// ``OrderTracker/retry(_:now:)`` before sending again (it refreshes the timestamp).
    case retryLater(reason: String)
    /// Any other refusal: the push is given up; the activity stays.
    case dropped(reason: String)
}
