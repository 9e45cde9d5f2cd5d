package import Foundation

extension OrderTracker {
    // MARK: - Sweep

    /// Time-based decisions: end activities nearing the 8-hour limit or idle too long, give up
    /// starts the app never adopted, end activities of finished orders that are still up, and try
    /// waiting starts again. Call it when ``OrderState/nextSweepAt`` has passed.
    package func sweep(_ state: OrderState, context: TrackingContext = TrackingContext(), now: Date) -> Step {
        var step = Step(state: state)
        _ = mergeRegistrations(context, into: &step.state)
        adoptSettings(context, &step, now: now)
        let sweep = policy.sweep
        var sweepEnds: [String: Decision.Code] = [:]
        let idle =
            step.state.record.map { !$0.isTerminal } ?? false
            && now >= step.state.lastChangeAt.addingTimeInterval(sweep.idleTimeout)

        for index in step.state.activities.indices {
            var activity = step.state.activities[index]
            defer { step.state.activities[index] = activity }
            let started = activity.clockStart
            let limit = started.addingTimeInterval(sweep.lifetime - sweep.lifetimeMargin)
            switch activity.phase {
            case .active where activity.channelID != nil:
                break  // The order's channel ends it.
            case .active:
                if now >= limit {
                    sweepEnds[activity.key] = .sweepLifetime
                } else if idle, now >= started.addingTimeInterval(sweep.idleTimeout) {
                    sweepEnds[activity.key] = .sweepIdle
                }
            case .ending where activity.pending == nil:
                switch activity.closeReason {
                case nil, .endNotAccepted?:
                    step.decisions.append(
                        Decision(
                            .sweepTerminalNotEnded, activity: activity.key,
                            "the end was not accepted (\(activity.closeReason?.stored ?? "no end pending")); sending it once more"
                        ))
                    activity.closeReason = .decided(.sweepTerminalNotEnded)
                default:
                    break
                }
            case .starting:
                if now >= started.addingTimeInterval(sweep.adoptionTimeout) {
                    activity.close(.failed, .decided(.sweepNeverAdopted), at: now)
                    step.decisions.append(
                        Decision(
                            .sweepNeverAdopted, activity: activity.key,
                            "started \(minutes(now.timeIntervalSince(started))) ago and the app never reported its update token; given up (the system ends it by itself)"
                        ))
                }
            default:
                break
            }
        }
        if let end = sweepChannel(&step, idle: idle, now: now) { sweepEnds[Self.channelKey] = end }
        if step.state.record == nil {
            return finish(step, now: now)
        }
        reconcile(&step, context: context, now: now, announce: false, rebuild: [], sweepEnds: sweepEnds)
        return finish(step, now: now)
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
        var step = Step(state: state)
        if push.activityKey == Self.channelKey {
            recordChannel(outcome, for: push, &step, now: now)
            return finish(step, now: now)
        }
        guard let index = step.state.activities.firstIndex(where: { $0.key == push.activityKey }) else {
            step.decisions.append(
                Decision(.unknownActivity, activity: push.activityKey, "no such activity in order \(state.orderID)"))
            return finish(step, now: now)
        }
        var activity = step.state.activities[index]
        let isCurrent = activity.pending?.apnsID == push.apnsID
        let key = activity.key

        switch outcome {
        case .accepted:
            activity.countSent(
                push.mark, priority: push.priority, timestamp: push.timestamp,
                cutoff: Int(now.timeIntervalSince1970.rounded(.down)) - 3600)
            if isCurrent { activity.pending = nil }
            switch push.kind {
            case .start:
                if activity.phase == .pendingStart
                    || (activity.phase == .ended && activity.closeReason == .decided(.startWithdrawn))
                {
                    // Started into the order's channel: no update token comes; the channel updates it.
                    activity.phase = activity.channelID != nil ? .active : .starting
                    activity.closeReason = nil
                    activity.endedAt = nil
                    activity.startedAt = now
                }
                if !isCurrent, activity.pending?.kind == .start {
                    activity.pending = nil
                    activity.planned = push.mark
                    step.withdrawn.append(key)
                    step.decisions.append(
                        Decision(
                            .withdrawn, activity: key,
                            "an earlier start was accepted: the newer pending start is withdrawn (never start twice); the newest state follows as an update"
                        ))
                }
            case .end:
                if isCurrent || activity.phase == .ending {
                    activity.close(.ended, activity.closeReason ?? .endedByServer, at: now)
                }
            case .update, .openChannel, .closeChannel:
                break
            }
            step.decisions.append(
                Decision(
                    .pushAccepted, activity: key,
                    "\(push.kind.rawValue) accepted (apns-id \(push.apnsID))"
                        + (isCurrent ? "" : "; a newer push is still pending")
                        + "; the activity is \(activity.phase)"))

        case .channelCreated:
            step.decisions.append(
                Decision(.unknownActivity, activity: key, "a channel id answered a \(push.kind.rawValue); ignored"))

        case .tokenRejected(let reason, let unregisteredAt):
            guard let target = activity.pushTarget, target.token == push.deviceToken else {
                step.decisions.append(
                    Decision(
                        .tokenGoneIgnored, activity: key,
                        "\(reason) for token \(push.deviceToken.map { "\($0)" } ?? "none"), which has been replaced since; the activity stays"
                    ))
                break
            }
            let receivedAt =
                push.kind == .start ? activity.startToken?.key.occurredAt : activity.updateToken?.receivedAt
            if let unregisteredAt, let receivedAt, receivedAt > unregisteredAt {
                step.decisions.append(
                    Decision(
                        .tokenGoneIgnored, activity: key,
                        "\(reason) at \(RFC3339.format(unregisteredAt)), but the token was received after that; kept, the push stays pending"
                    ))
                break
            }
            if push.kind == .start, let registration = activity.startToken {
                step.state.pushToStartTokens.removeAll { $0.token == registration.token }
                step.retiredPushToStartTokens.append(registration)
            }
            activity.close(.failed, .tokenGone(reason), at: now)
            if activity.pending != nil && !isCurrent { step.withdrawn.append(key) }
            activity.pending = nil
            step.decisions.append(
                Decision(
                    .tokenGone, activity: key,
                    "APNs says \(reason) for \(push.kind == .start ? "push-to-start" : "update") token \(push.deviceToken.map { "\($0)" } ?? "none"): the activity failed"
                        + (push.kind == .start ? "; the push-to-start token is retired" : "")))

        case .retryLater(let reason):
            step.decisions.append(
                Decision(
                    .pushRetry, activity: key,
                    "\(reason): the push stays pending; retry(_:now:) rebuilds it with a fresh timestamp before it is sent again"
                ))

        case .dropped(let reason):
            if isCurrent {
                activity.pending = nil
                activity.planned = activity.sent
            }
            switch push.kind {
            case .start where activity.phase == .pendingStart:
                activity.close(.failed, .startDropped(reason), at: now)
            case .end where activity.phase == .ending:
                if activity.closeReason == .decided(.sweepTerminalNotEnded) {
                    // The sweeper's second try failed too: give up (the system ends it within 8 hours).
                    activity.close(.ended, .endDropped(reason), at: now)
                } else {
                    // Still up on the device: the sweeper sends the end once more.
                    activity.closeReason = .endNotAccepted(reason)
                }
            default:
                break
            }
            step.decisions.append(
                Decision(
                    .pushDropped, activity: key,
                    "APNs refused the \(push.kind.rawValue) (\(reason)); given up, the activity is \(activity.phase)"))
        }
        step.state.activities[index] = activity
        return finish(step, now: now)
    }

    /// Rebuilds every pending push for sending now: a fresh strictly increasing timestamp, the
    /// newest content, the same alert if the step is the same. Call it before resending a push
    /// that got `retryLater`.
    package func retry(_ state: OrderState, now: Date) -> Step {
        var step = Step(state: state)
        var keys = Set(state.activities.filter { $0.pending != nil }.map(\.key))
        if state.channel?.pending != nil { keys.insert(Self.channelKey) }
        reconcile(&step, context: TrackingContext(), now: now, announce: false, rebuild: keys)
        return finish(step, now: now)
    }
}
