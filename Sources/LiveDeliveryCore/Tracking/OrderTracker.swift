package import Foundation
import LiveDeliveryTime

/// The tracking state machine: pure, deterministic, clock injected.
///
/// Each call takes the stored ``OrderState`` and returns a ``Step``: the new state, the pushes to
/// send (at most one per activity, each replacing that activity's pending push), the pending
/// pushes to withdraw, and every ``Decision`` with its reason.
///
/// The worker's loop, per order (under the order's row lock):
/// 1. `apply(event, to: stored ?? OrderState(orderID:now:), context:now:)` for each event; for a
///    push-to-start token, once per open order of the user (after storing the registration);
/// 2. send each planned push, one in flight per activity, not before ``PlannedPush/notBefore``;
/// 3. `record(outcome, for: push, in: state, now:)` with what APNs said; on `retryLater`, call
///    `retry(state, now:)` before sending again (fresh timestamp, newest content);
/// 4. `sweep(state, context:now:)` when ``OrderState/nextSweepAt`` has passed.
package struct OrderTracker: Sendable {
    package let configuration: TrackingConfiguration
    var policy: Policy { configuration.policy }
    var mapping: ContentMapping { configuration.mapping }

    package init(configuration: TrackingConfiguration) {
        self.configuration = configuration
    }

    // MARK: - Events

    /// Applies one event to an order. Older and duplicate events change nothing that matters.
    package func apply(
        _ event: InboundEvent, to state: OrderState, context: TrackingContext = TrackingContext(), now: Date
    ) -> Step {
        Step.over(state) { apply(event, &$0, context: context, now: now) }
    }

    /// ``apply(_:to:context:now:)`` in place: `state` is changed where it lies; the effects come back.
    package func apply(
        _ event: InboundEvent, updating state: inout OrderState, context: TrackingContext = TrackingContext(),
        now: Date
    ) -> Step.Effects {
        Step.inPlace(&state) { apply(event, &$0, context: context, now: now) }
    }

    private func apply(_ event: InboundEvent, _ step: inout Step, context: TrackingContext, now: Date) {
        if let handedOver = step.state.handedOver { return handedOverStep(&step, to: handedOver.value.cell) }
        if let orderID = event.orderID, orderID != step.state.orderID {
            step.decisions.append(
                Decision(.wrongOrder, "event for order \(orderID) applied to order \(step.state.orderID); ignored"))
            return
        }
        if step.state.seenEventIDs.contains(event.eventID) {
            step.decisions.append(
                Decision(
                    .duplicateEvent, "event \(event.eventID) was already applied; nothing changes, nothing is sent"))
            return
        }
        step.state.remember(event.eventID)
        let unheld = step.state.file(context.pushToStartTokens)

        var announce = false
        var rebuild = Set<String>()
        switch event {
        case .orderStatus(let e):
            announce = applyOrderStatus(e, &step, now: now)
        case .activityToken(let e):
            if let key = applyToken(e, &step, now: now) { rebuild.insert(key) }
            announce = true
        case .pushToStartToken(let e):
            applyPushToStart(e, &step)
            announce = true
        case .activityEnded(let e):
            applyEnded(e, &step, now: now)
        case .activitySettings(let e):
            applySettings(e, &step, context: context)
        case .orderFollowers(let e):
            announce = applyFollowers(e, &step)
        }
        if announce && !unheld.isEmpty {
            step.decisions.append(
                Decision(
                    .activityLimit,
                    "the order holds push-to-start tokens for \(OrderState.maxActivities) devices, as many as it may track activities; \(unheld.count) more of its people's devices are not offered (\(Decision.sample(unheld)))"
                ))
        }
        adoptSettings(context, &step, now: now)
        reconcile(&step, context: context, now: now, announce: announce, rebuild: rebuild)
        finish(&step, now: now)
    }

    /// Returns whether the record changed (so that unchanged content is worth a decision line).
    private func applyOrderStatus(_ e: OrderStatusEvent, _ step: inout Step, now: Date) -> Bool {
        let label = "\(e.status)" + (e.sequence.map { " (seq \($0))" } ?? " (\(RFC3339.format(e.occurredAt)))")
        guard var record = step.state.record else {
            step.state.record = OrderRecord(e)
            step.state.lastChangeAt = now
            step.decisions.append(Decision(.orderCreated, "order \(e.orderID) is now tracked: \(label)"))
            return true
        }
        let old = record
        let before = record.status
        let change = record.merge(e)
        step.state.record = record
        if change.statusChanged || change.detailsChanged { step.state.lastChangeAt = now }
        if change.statusChanged {
            let note = change.isNewest ? "" : " (an older event, but a terminal status always ends the order)"
            step.decisions.append(Decision(.statusChanged, "\(before) → \(record.status): \(label)\(note)"))
        } else if change.isNewest && record.isTerminal && !e.status.isTerminal {
            step.decisions.append(
                Decision(.terminalAbsorbed, "the order is already \(record.status); \(label) is absorbed"))
        } else if change.isNewest && change.detailsChanged {
            step.decisions.append(Decision(.detailsChanged, "\(label): \(record.detailsChanged(since: old))"))
        } else if change.isNewest {
            step.decisions.append(Decision(.orderUnchanged, "\(label) repeats what is known"))
        } else if change.detailsChanged {
            step.decisions.append(
                Decision(
                    .olderEventFilledDetails,
                    "\(label) is older than \(record.newest) but carries details newer events left out: \(record.detailsChanged(since: old))"
                ))
        } else {
            step.decisions.append(
                Decision(.olderEvent, "\(label) is older than \(record.newest); nothing changes, nothing is sent"))
            return false
        }
        return true
    }

    /// Returns the key of an activity whose pending push must be rebuilt (its token rotated).
    private func applyToken(_ e: ActivityTokenEvent, _ step: inout Step, now: Date) -> String? {
        let token = ActivityState.UpdateToken(
            token: e.token, bundleID: e.bundleID, environment: e.environment, key: e.key, receivedAt: now)
        // Moved out while one of them changes in place: no copy of the order's activities.
        var activities = step.state.activities
        step.state.activities = []
        defer { step.state.activities = activities }

        if let index = activities.firstIndex(where: { $0.activityID == e.activityID }) {
            return refresh(&activities[index], with: token, e, &step, now: now)
        }

        // A start of ours that the app now reports: same device, or the only one waiting.
        let waiting = activities.indices.filter {
            activities[$0].activityID == nil
                && (activities[$0].phase == .pendingStart || activities[$0].phase == .starting
                    || activities[$0].closeReason == .decided(.startWithdrawn))
        }
        let match =
            e.deviceID.map { device in waiting.first { activities[$0].deviceID == device } }
            ?? (waiting.count == 1 ? waiting.first : nil)
        if let index = match {
            activities[index].activityID = e.activityID
            activities[index].updateToken = token
            adopt(&activities[index], e, &step, now: now)
            return nil
        }

        guard activities.count < OrderState.maxActivities else {
            step.decisions.append(
                Decision(
                    .activityLimit,
                    "the order tracks \(activities.count) activities, the most it may; activity \(e.activityID) is not tracked"
                ))
            return nil
        }
        var activity = ActivityState(
            key: "activity:\(e.activityID)", activityID: e.activityID, deviceID: e.deviceID, phase: .active, now: now)
        activity.updateToken = token
        activity.startedAt = now
        schedule(&activity, e, &step, now: now)
        step.decisions.append(
            Decision(
                .activityDiscovered, activity: activity.key,
                "the app reports activity \(e.activityID)" + (e.deviceID.map { " on device \($0)" } ?? "")
                    + " with token \(e.token)"))
        if step.state.record == nil {
            step.decisions.append(
                Decision(.waitingForOrder, activity: activity.key, "no order.status yet; nothing to send"))
        }
        activities.append(activity)
        return nil
    }

    /// A token report for an activity the order knows: a newer token rotates its pushes to it, or adopts it.
    private func refresh(
        _ activity: inout ActivityState, with token: ActivityState.UpdateToken, _ e: ActivityTokenEvent,
        _ step: inout Step, now: Date
    ) -> String? {
        if let current = activity.updateToken, !e.key.isNewer(than: current.key) {
            step.decisions.append(
                Decision(.tokenOlder, activity: activity.key, "an older token report for \(e.activityID); ignored"))
            return nil
        }
        let rotated = activity.updateToken != nil
        activity.updateToken = token
        schedule(&activity, e, &step, now: now)
        if activity.phase.isFinal {
            step.decisions.append(
                Decision(
                    .tokenForFinalActivity, activity: activity.key,
                    "the activity is \(activity.phase): token \(e.token) recorded, never pushed to"))
            return nil
        }
        if rotated {
            step.decisions.append(Decision(.tokenRotated, activity: activity.key, "update token rotated to \(e.token)"))
            return activity.pending == nil ? nil : activity.key
        }
        adopt(&activity, e, &step, now: now)
        return nil
    }

    /// Records the start the app scheduled for the activity, as its newest token report says.
    private func schedule(_ activity: inout ActivityState, _ e: ActivityTokenEvent, _ step: inout Step, now: Date) {
        guard activity.scheduledStart != e.scheduledStart else { return }
        activity.scheduledStart = e.scheduledStart
        guard let start = e.scheduledStart, start > now else { return }
        step.decisions.append(
            Decision(
                .activityScheduled, activity: activity.key,
                "the app scheduled the activity to start at \(RFC3339.format(start)); until then it is pending on the device, and the sweeper counts from then"
            ))
    }

    private func adopt(_ activity: inout ActivityState, _ e: ActivityTokenEvent, _ step: inout Step, now: Date) {
        step.take(activity.adopt(activityID: e.activityID, token: e.token, now: now), for: activity.key)
    }

    private func applyPushToStart(_ e: PushToStartTokenEvent, _ step: inout Step) {
        let known = step.state.pushToStartTokens.contains { $0.deviceID == e.deviceID }
        let devices = step.state.pushToStartTokens.lazy.filter { $0.userID == e.userID }.count
        if !known, devices >= OrderState.maxPushToStartDevices {
            step.decisions.append(
                Decision(
                    .pushToStartDeviceLimit,
                    "the user has push-to-start tokens for \(devices) devices, the most they may; device \(e.deviceID)'s is refused"
                ))
            return
        }
        if !known, step.state.pushToStartTokens.count >= OrderState.maxActivities {
            step.decisions.append(
                Decision(
                    .activityLimit,
                    "the order holds push-to-start tokens for \(OrderState.maxActivities) devices, as many as it may track activities; device \(e.deviceID) is not offered"
                ))
            return
        }
        if step.state.file(e.registration) {
            step.decisions.append(
                Decision(
                    .pushToStartRegistered,
                    "push-to-start token \(e.token) for device \(e.deviceID) (\(e.attributesType), \(e.environment))"))
        } else {
            step.decisions.append(
                Decision(.pushToStartOlder, "an older push-to-start token report for device \(e.deviceID); ignored"))
        }
    }

    private func applyEnded(_ e: ActivityEndedEvent, _ step: inout Step, now: Date) {
        let phase: ActivityState.Phase = e.reason == .expired ? .expired : .ended
        guard let index = step.state.activities.firstIndex(where: { $0.activityID == e.activityID }) else {
            guard step.state.activities.count < OrderState.maxActivities else {
                step.decisions.append(
                    Decision(
                        .activityLimit,
                        "the order tracks \(step.state.activities.count) activities, the most it may; the end of activity \(e.activityID) is not recorded"
                    ))
                return
            }
            var activity = ActivityState(
                key: "activity:\(e.activityID)", activityID: e.activityID, deviceID: nil, phase: phase, now: now)
            activity.close(phase, .reportedByApp(e.reason), at: now)
            step.state.activities.append(activity)
            step.decisions.append(
                Decision(
                    .activityEndedOnDevice, activity: activity.key,
                    "activity \(e.activityID) ended on the device (\(e.reason)) before it was known; recorded"))
            return
        }
        let actions = step.state.activities[index].endedOnDevice(e.reason, now: now)
        step.take(actions, for: step.state.activities[index].key)
    }

    // MARK: - The person's settings

    /// Notes a settings report on an order that has something on its device. What it changes follows from
    /// the settings on file (``adoptSettings(_:_:now:)``), which a newer report may already have replaced.
    private func applySettings(_ e: ActivitySettingsEvent, _ step: inout Step, context: TrackingContext) {
        let concerned =
            step.state.activities.contains { $0.deviceID == e.deviceID }
            || step.state.pushToStartTokens.contains { $0.deviceID == e.deviceID }
        guard concerned else { return }
        if let filed = context.deviceSettings[e.deviceID], filed.key.isNewer(than: e.key) {
            step.decisions.append(
                Decision(.settingsOlder, "an older settings report for device \(e.deviceID); the newer one stands"))
            return
        }
        step.decisions.append(
            Decision(
                .settingsReported,
                "device \(e.deviceID): Live Activities \(e.activitiesEnabled ? "on" : "off"), frequent updates "
                    + (e.frequentPushesEnabled ? "on" : "off")))
    }

    /// Brings each activity in line with its device's settings on file: the budget its frequent-updates
    /// setting chooses, and an end (as if the person ended it) where Live Activities are off. An activity
    /// whose app reported its token after the settings is left running: the app could start it, so they
    /// were on by then.
    func adoptSettings(_ context: TrackingContext, _ step: inout Step, now: Date) {
        guard !context.deviceSettings.isEmpty else { return }
        for index in step.state.activities.indices {
            let activity = step.state.activities[index]
            guard let device = activity.deviceID, let settings = context.deviceSettings[device],
                !activity.phase.isFinal
            else { continue }
            if !settings.activitiesEnabled {
                if let token = activity.updateToken, token.key.isNewer(than: settings.key) { continue }
                let actions = step.state.activities[index].disable(device: device, now: now)
                step.take(actions, for: activity.key)
                continue
            }
            guard activity.frequentPushes != settings.frequentPushesEnabled else { continue }
            step.state.activities[index].frequentPushes = settings.frequentPushesEnabled
            step.decisions.append(
                policy.frequentUpdates(settings.frequentPushesEnabled, activity: activity.key, device: device))
        }
    }

    // MARK: - Bookkeeping

    func finish(_ step: inout Step, now: Date) {
        step.state.nextSweepAt = nextSweep(step.state, now: now)
    }

    /// The earliest moment the sweeper has something to do for this order.
    func nextSweep(_ state: OrderState, now: Date) -> Date? {
        guard state.handedOver == nil else { return nil }
        var earliest: Date?
        let sweep = policy.sweep
        func consider(_ date: Date) { earliest = min(earliest ?? date, date) }
        /// An activity's next moment; the order's channel counts as one, the activities in it do not (it ends them).
        func consider(_ activity: ActivityState) {
            guard !activity.phase.isFinal, activity.channelID == nil || activity.broadcast != nil else { return }
            let started = activity.clockStart
            switch activity.phase {
            case .active:
                consider(started.addingTimeInterval(sweep.lifetime - sweep.lifetimeMargin))
                if let record = state.record, !record.isTerminal {
                    consider(max(state.lastChangeAt, started).addingTimeInterval(sweep.idleTimeout))
                }
            case .starting:
                consider(started.addingTimeInterval(sweep.adoptionTimeout))
            case .pendingStart where activity.pending == nil:
                consider(now.addingTimeInterval(300))
            case .ending where activity.pending == nil:
                consider(now)
            default:
                break
            }
        }
        for activity in state.activities { consider(activity) }
        if let channel = state.channel { consider(channel) }
        if let waiting = configuration.followersWaitingSince(state) { consider(waiting) }
        return earliest
    }
}
