package import Foundation

extension OrderTracker {
    // MARK: - Sweep

    /// Time-based decisions: end activities nearing the 8-hour limit or idle too long, give up
    /// starts the app never adopted, end activities of finished orders that are still up, and try
    /// waiting starts again. Call it when ``OrderState/nextSweepAt`` has passed.
    package func sweep(_ state: OrderState, context: TrackingContext = TrackingContext(), now: Date) -> Step {
        var step = Step(state: state)
        if let handedOver = state.handedOver {
            handedOverStep(&step, to: handedOver.value.cell)
            return step
        }
        _ = step.state.file(context.pushToStartTokens)
        adoptSettings(context, &step, now: now)
        let sweep = policy.sweep
        var sweepEnds: [String: Decision.Code] = [:]
        let idle =
            step.state.record.map { !$0.isTerminal } ?? false
            && now >= step.state.lastChangeAt.addingTimeInterval(sweep.idleTimeout)

        for index in step.state.activities.indices {
            let (end, actions) = step.state.activities[index].sweep(sweep, idle: idle, now: now)
            let key = step.state.activities[index].key
            step.take(actions, for: key)
            if let end { sweepEnds[key] = end }
        }
        if let end = sweepChannel(&step, idle: idle, now: now) { sweepEnds[Self.channelKey] = end }
        if step.state.record != nil {
            reconcile(&step, context: context, now: now, announce: false, rebuild: [], sweepEnds: sweepEnds)
        }
        finish(&step, now: now)
        return step
    }

    // MARK: - Outcomes

    /// Records what APNs said about a push.
    ///
    /// - accepted: the content counts as sent; a start makes the activity `starting`; an end makes
    ///   it `ended`. A push already superseded still counts as sent (the newer one stays pending),
    ///   except that an accepted start withdraws a newer pending start (never start twice).
    /// - tokenRejected: the activity fails (a push-to-start token is retired) unless the token was
    ///   received after the 410's timestamp, or has been replaced since.
    /// - retryLater: the push stays pending; call ``retry(_:now:)`` before sending again.
    /// - dropped: the push is given up; a start fails, an end counts as ended.
    package func record(_ outcome: PushOutcome, for push: PlannedPush, in state: OrderState, now: Date) -> Step {
        Step.over(state) { record(outcome, for: push, &$0, now: now) }
    }

    /// ``record(_:for:in:now:)`` in place: `state` is changed where it lies; the effects come back.
    package func record(
        _ outcome: PushOutcome, for push: PlannedPush, updating state: inout OrderState, now: Date
    ) -> Step.Effects {
        Step.inPlace(&state) { record(outcome, for: push, &$0, now: now) }
    }

    private func record(_ outcome: PushOutcome, for push: PlannedPush, _ step: inout Step, now: Date) {
        defer { finish(&step, now: now) }
        if push.activityKey == Self.channelKey {
            recordChannel(outcome, for: push, &step, now: now)
            return
        }
        guard let index = step.state.activities.firstIndex(where: { $0.key == push.activityKey }) else {
            step.decisions.append(
                Decision(
                    .unknownActivity, activity: push.activityKey, "no such activity in order \(step.state.orderID)"))
            return
        }
        let actions = step.state.activities[index].receive(outcome, for: push, now: now)
        step.take(actions, for: push.activityKey)
    }

    /// The state recording APNs' acceptance of `push` (``record(_:for:in:now:)`` with `.accepted`) would leave, when
    /// it is exactly what settling the push's `apns-id` gives (``OrderState/settleDelivered(_:)``) and nothing is to be
    /// pushed, withdrawn or retired: an update that is still its activity's pending push, whose budget log and next
    /// sweep come out the same either way. Nil otherwise. The worker then writes the acceptance as the update's id
    /// alone, without recording it (docs/data-path.md, A delivered update); `OutboxPropertyTests` checks that the two
    /// states agree wherever this gives one.
    package func settledAcceptance(of push: PlannedPush, in state: OrderState, now: Date) -> OrderState? {
        guard push.kind == .update, push.activityKey != Self.channelKey, state.handedOver == nil,
            let index = state.activities.firstIndex(where: { $0.key == push.activityKey })
        else { return nil }
        let phase = state.activities[index].phase
        guard let pending = state.activities[index].pending, !phase.isFinal, phase != .pendingStart,
            phase != .ending, pending.apnsID == push.apnsID, pending.kind == .update,
            pending.timestamp == push.timestamp, pending.priority == push.priority, pending.mark == push.mark
        else { return nil }
        // Recording drops the budget log's entries an hour before the clock; settling, an hour before the push.
        if pending.priority == 10 {
            let clock = Int(now.timeIntervalSince1970.rounded(.down)) - 3600
            let own = pending.timestamp - 3600
            let (low, high) = (min(clock, own), max(clock, own))
            if state.activities[index].highPriorityLog.contains(where: { $0 > low && $0 <= high }) { return nil }
        }
        // Recording computes the next sweep anew; settling keeps the stored one.
        var settled = state
        settled.settleDelivered([push.apnsID])
        return nextSweep(settled, now: now) == state.nextSweepAt ? settled : nil
    }

    /// Rebuilds every pending push for sending now: a fresh strictly increasing timestamp, the
    /// newest content, the same alert if the step is the same. Call it before resending a push
    /// that got `retryLater`.
    package func retry(_ state: OrderState, now: Date) -> Step {
        Step.over(state) { retry(&$0, now: now) }
    }

    /// ``retry(_:now:)`` in place: `state` is changed where it lies; the effects come back.
    package func retry(updating state: inout OrderState, now: Date) -> Step.Effects {
        Step.inPlace(&state) { retry(&$0, now: now) }
    }

    /// Rebuilds one activity's pending push for sending now, as ``retry(updating:now:)`` does: the push was
    /// handed to a worker that stopped before its answer was recorded.
    package func resend(_ activityKey: String, updating state: inout OrderState, now: Date) -> Step.Effects {
        Step.inPlace(&state) { step in
            if let handedOver = step.state.handedOver { return handedOverStep(&step, to: handedOver.value.cell) }
            guard step.state.activity(activityKey)?.pending != nil else { return }
            reconcile(&step, context: .unread, now: now, announce: false, rebuild: [activityKey])
            finish(&step, now: now)
        }
    }

    private func retry(_ step: inout Step, now: Date) {
        if let handedOver = step.state.handedOver { return handedOverStep(&step, to: handedOver.value.cell) }
        var keys = Set(step.state.activities.filter { $0.pending != nil }.map(\.key))
        if step.state.channel?.pending != nil { keys.insert(Self.channelKey) }
        reconcile(&step, context: .unread, now: now, announce: false, rebuild: keys)
        finish(&step, now: now)
    }
}
