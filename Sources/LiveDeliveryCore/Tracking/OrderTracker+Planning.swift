import APNsModel
import Foundation
import LiveDeliveryJSON

extension OrderTracker {
    /// Brings every activity in line with the order's record: starts, updates, ends.
    ///
    /// - Parameters:
    ///   - announce: also explain why nothing is sent (after an event that changed something).
    ///   - rebuild: activities whose pending push must be rebuilt even if the content is the same
    ///     (token rotated, retry).
    ///   - endReason: for ends the sweeper decides (idle, lifetime): the activities to end and why.
    func reconcile(
        _ step: inout Step, context: TrackingContext, now: Date, announce: Bool, rebuild: Set<String>,
        sweepEnds: [String: Decision.Code] = [:]
    ) {
        guard let record = step.state.record else { return }
        let (content, mark) = configuration.contentMark(for: record)

        openChannelIfWanted(&step, record: record, context: context, mark: mark, now: now)
        if context.knowsPeople {
            startNewActivities(&step, record: record, context: context, now: now, announce: announce)
        }

        // Moved out while each activity is brought in line in place: no copy of an activity per step.
        var activities = step.state.activities
        step.state.activities = []
        for index in activities.indices {
            let key = activities[index].key
            reconcile(
                &activities[index], &step, record: record, content: content, mark: mark, context: context, now: now,
                announce: announce, forced: !rebuild.isEmpty && rebuild.contains(key),
                sweepEnd: sweepEnds.isEmpty ? nil : sweepEnds[key])
        }
        step.state.activities = activities
        reconcileChannel(
            &step, record: record, content: content, mark: mark, now: now,
            forced: rebuild.contains(Self.channelKey), sweepEnd: sweepEnds[Self.channelKey])
    }

    /// Brings one activity in line with the order's record.
    private func reconcile(
        _ activity: inout ActivityState, _ step: inout Step, record: OrderRecord, content: JSONObject,
        mark: ActivityState.ContentMark, context: TrackingContext, now: Date, announce: Bool, forced: Bool,
        sweepEnd: Decision.Code?
    ) {
        switch activity.phase {
        case .pendingStart:
            if record.isTerminal {
                step.take(activity.withdrawStart(status: record.status, now: now), for: activity.key)
            } else if activity.pending == nil {
                if let device = activity.deviceID, context.startRefusedDevices.contains(device) {
                    if announce {
                        step.decisions.append(
                            Decision(
                                .startDeviceRefused, activity: activity.key,
                                "device \(device) is at its start limit; the start waits"))
                    }
                } else {
                    planStart(&activity, &step, record: record, content: content, mark: mark, now: now)
                }
            } else if forced || mark.differs(from: activity.pending?.mark) {
                planStart(&activity, &step, record: record, content: content, mark: mark, now: now)
            }
        case .starting:
            if announce && mark.differs(from: activity.planned) {
                step.decisions.append(
                    Decision(
                        .waitingForToken, activity: activity.key,
                        "started; the app has not reported its update token yet. The newest state is sent then"))
            }
        case .active where activity.channelID != nil:
            break  // The order's broadcast channel updates and ends it.
        case .active:
            if let sweepEnd {
                planEnd(&activity, &step, record: record, content: content, mark: mark, now: now, sweep: sweepEnd)
            } else if record.isTerminal {
                planEnd(&activity, &step, record: record, content: content, mark: mark, now: now, sweep: nil)
            } else if forced || mark.differs(from: activity.planned) {
                planUpdate(&activity, &step, record: record, content: content, mark: mark, now: now)
            } else if announce {
                step.decisions.append(
                    Decision(
                        .contentUnchanged, activity: activity.key,
                        "the content-state and relevance are what the activity already has; nothing is sent"))
            }
        case .ending:
            if forced || activity.pending == nil {
                planEnd(
                    &activity, &step, record: record, content: content, mark: mark, now: now,
                    sweep: activity.closeReason?.sweepEnd)
            }
        case .ended, .expired, .failed:
            break
        }
    }

    private func startNewActivities(
        _ step: inout Step, record: OrderRecord, context: TrackingContext, now: Date, announce: Bool
    ) {
        guard !record.isTerminal else { return }
        // The order's own user's devices first, then the followers': the activity limit keeps the user's.
        let candidates = step.state.pushToStartTokens.filter { registration in
            !step.state.activities.contains(where: { $0.deviceID == registration.deviceID })
                && (registration.userID == record.userID || step.state.followers.contains(registration.userID))
        }
        let own = candidates.filter { $0.userID == record.userID }
        var refused: [String] = []
        for registration in own + candidates.filter({ $0.userID != record.userID }) {
            let joins: String?
            switch configuration.startability(registration, of: step.state, record: record, context: context) {
            case .start(let channelID):
                joins = channelID
            case .notNow(let code):
                if announce { step.decisions.append(configuration.notStarted(code, registration, record: record)) }
                continue
            }
            guard step.state.activities.count < OrderState.maxActivities else {
                refused.append(registration.deviceID)
                continue
            }
            let activity = newActivity(registration, joining: joins, context: context, &step, now: now)
            step.state.activities.append(activity)
        }
        if !refused.isEmpty && announce {
            step.decisions.append(
                Decision(
                    .activityLimit,
                    "the order tracks \(step.state.activities.count) activities, the most it may; \(refused.count) "
                        + (refused.count == 1
                            ? "device that could be started remotely is" : "devices that could be started remotely are")
                        + " not started (\(Decision.sample(refused)))"))
        }
    }

    /// A device's activity, to be started by push-to-start.
    private func newActivity(
        _ registration: PushToStartRegistration, joining channelID: String?, context: TrackingContext,
        _ step: inout Step, now: Date
    ) -> ActivityState {
        let device = registration.deviceID
        var activity = ActivityState(
            key: "device:\(device)", activityID: nil, deviceID: device, phase: .pendingStart, now: now)
        activity.channelID = channelID
        activity.frequentPushes = context.deviceSettings[device]?.frequentPushesEnabled
        if activity.frequentPushes == true {
            step.decisions.append(policy.frequentUpdates(true, activity: activity.key, device: device))
        }
        activity.startToken = registration
        if context.startRefusedDevices.contains(device) {
            step.decisions.append(
                Decision(
                    .startDeviceRefused, activity: activity.key,
                    "device \(device) is at its start limit; the start waits"
                ))
        }
        return activity
    }

    // MARK: - Start, update, end

    func planStart(
        _ activity: inout ActivityState, _ step: inout Step, record: OrderRecord, content: JSONObject,
        mark: ActivityState.ContentMark, now: Date
    ) {
        let rule = policy.rule(for: record.status)
        let values = AlertTemplate.values(for: record, now: now)
        let fallback = policy.startFallback.render([:], sound: policy.alertSound)
        let alert = rule.texts.lazy.compactMap { $0.render(values, sound: self.policy.alertSound) }.first ?? fallback
        let key = activity.key
        let notes = [
            Decision(.alert, activity: key, "a remote start must carry an alert"),
            Decision(.priority, activity: key, "priority 10: a start is sent at once (it draws on the start budget)"),
        ]
        let draft = PushDraft(
            kind: .start, alert: alert, alertStep: mark.step, alertKind: .status, priority: 10,
            attributes: mapping.attributes(for: record), fallbackAlert: fallback, notes: notes,
            reason: "remote start at \(record.status) via push-to-start token \(activity.startToken!.token)"
                + (activity.channelID.map { " into broadcast channel \($0)" } ?? ""))
        configuration.compose(draft, &activity, &step, record: record, content: content, mark: mark, now: now)
    }

    func planUpdate(
        _ activity: inout ActivityState, _ step: inout Step, record: OrderRecord, content: JSONObject,
        mark: ActivityState.ContentMark, now: Date
    ) {
        var notes: [Decision] = []
        notes.reserveCapacity(4)  // what planning notes on the way: one allocation
        let what =
            activity.planned.map { $0.step != mark.step ? "step \($0.step) → \(mark.step)" : mark.change(since: $0) }
            ?? "first content for this activity"
        var alert = policy.chooseAlert(activity, record: record, mark: mark, now: now, notes: &notes)
        let priority = policy.updatePriority(activity, record: record, alert: &alert, now: now, notes: &notes)
        let draft = PushDraft(
            kind: .update, alert: alert.content, alertStep: alert.step, alertKind: alert.kind, priority: priority,
            notes: notes,
            reason: what)
        configuration.compose(draft, &activity, &step, record: record, content: content, mark: mark, now: now)
    }

    func planEnd(
        _ activity: inout ActivityState, _ step: inout Step, record: OrderRecord, content: JSONObject,
        mark: ActivityState.ContentMark, now: Date, sweep: Decision.Code?
    ) {
        let key = activity.key
        var notes: [Decision] = []
        notes.reserveCapacity(4)  // what planning notes on the way: one allocation
        var alert = Policy.ChosenAlert.none
        let dismissAfter: TimeInterval
        let why: String
        if let sweep {
            dismissAfter = policy.sweep.dismissAfter
            why =
                sweep == .sweepIdle
                ? "no order event for \(Int(policy.sweep.idleTimeout / 60)) min: ending it rather than leaving it up"
                : "near the system's 8-hour limit: ending it with its last content"
            notes.append(Decision(sweep, activity: key, why))
            notes.append(Decision(.noAlert, activity: key, "no alert: the sweeper ends quietly"))
        } else {
            dismissAfter = policy.rule(for: record.status).dismissAfter ?? 1800
            why = "the order is \(record.status)"
            alert = policy.chooseAlert(activity, record: record, mark: mark, now: now, notes: &notes)
        }
        notes.append(Decision(.priority, activity: key, "priority 10: an end is sent at once"))
        let draft = PushDraft(
            kind: .end, alert: alert.content, alertStep: alert.step, alertKind: alert.kind, priority: 10,
            dismissAfter: dismissAfter, notes: notes,
            reason: (sweep.map { "\($0.rawValue): " } ?? "") + why
                + "; final content, dismissed \(policy.dismissLabel(dismissAfter)) after the end")
        configuration.compose(draft, &activity, &step, record: record, content: content, mark: mark, now: now)
        activity.endPlanned(sweep: sweep)
    }
}
