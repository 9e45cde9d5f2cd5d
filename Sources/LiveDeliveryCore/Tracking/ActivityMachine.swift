import Foundation
import LiveDeliveryTime

/// One activity's life as a state machine. An ``ActivityState`` changes phase here and nowhere else.
///
/// ```
/// pendingStart ─start accepted─▶ starting ─update token─▶ active ─end planned─▶ ending ─end accepted─▶ ended
///      │            (into the order's channel: straight to active)                 │
///      │                                                     end refused: ending again (the sweeper's
///      │                                                     second try); refused twice: ended, given up
///      ├─ the order is over first ─▶ ended (start withdrawn; a late acceptance still starts it)
///      └─ start refused ─▶ failed
/// starting ─never adopted─▶ failed
/// any phase but the final ones ─ token gone ─▶ failed · the app's end ─▶ ended or expired
///                               Live Activities off ─▶ ended · its channel's end ─▶ ended or failed
/// ```
///
/// Each transition takes its input and the clock, and returns what the coordinator (``OrderTracker``) must do
/// beyond the activity itself: ``Actions``.
extension ActivityState {
    /// What a transition asks of the order around the activity.
    struct Actions: Hashable, Sendable {
        /// Why, for the timeline.
        var decisions: [Decision] = []
        /// The activity's pending push must not be sent any more (nothing replaces it).
        var withdraw = false
        /// A push-to-start token APNs said is gone: the order drops it and the worker retires it.
        var retired: PushToStartRegistration?

        init(_ decisions: Decision..., withdraw: Bool = false) {
            self.decisions = decisions
            self.withdraw = withdraw
        }
    }

    // MARK: - APNs' answers

    /// APNs' answer to one of the activity's pushes. A push already superseded (not the one ``pending``)
    /// still counts when accepted, but never moves the activity back.
    mutating func receive(_ outcome: PushOutcome, for push: PlannedPush, now: Date) -> Actions {
        let isCurrent = pending?.apnsID == push.apnsID
        switch outcome {
        case .accepted:
            return accepted(push, isCurrent: isCurrent, now: now)
        case .channelCreated:
            return Actions(
                Decision(.unknownActivity, activity: key, "a channel id answered a \(push.kind.rawValue); ignored"))
        case .tokenRejected(let reason, let unregisteredAt):
            return tokenRejected(reason, unregisteredAt: unregisteredAt, push: push, isCurrent: isCurrent, now: now)
        case .retryLater(let reason):
            return Actions(
                Decision(
                    .pushRetry, activity: key,
                    "\(reason): the push stays pending; retry(_:now:) rebuilds it with a fresh timestamp before it is sent again"
                ))
        case .dropped(let reason):
            return dropped(reason, push: push, isCurrent: isCurrent, now: now)
        }
    }

    /// Accepted: the content counts as sent; a start starts the activity (a withdrawn one too: it is on the
    /// device now), an end ends it. An earlier start accepted while a newer start waits withdraws the newer.
    private mutating func accepted(_ push: PlannedPush, isCurrent: Bool, now: Date) -> Actions {
        var actions = Actions()
        countSent(
            push.mark, priority: push.priority, timestamp: push.timestamp,
            cutoff: Int(now.timeIntervalSince1970.rounded(.down)) - 3600)
        if isCurrent { pending = nil }
        switch push.kind {
        case .start:
            if phase == .pendingStart || (phase == .ended && closeReason == .decided(.startWithdrawn)) {
                // Started into the order's channel: no update token comes; the channel updates it.
                phase = channelID != nil ? .active : .starting
                closeReason = nil
                endedAt = nil
                startedAt = now
            }
            if !isCurrent, pending?.kind == .start {
                pending = nil
                planned = push.mark
                actions.withdraw = true
                actions.decisions.append(
                    Decision(
                        .withdrawn, activity: key,
                        "an earlier start was accepted: the newer pending start is withdrawn (never start twice); the newest state follows as an update"
                    ))
            }
        case .end:
            if phase == .ending || (isCurrent && !phase.isFinal) {
                close(.ended, closeReason ?? .endedByServer, at: now)
            }
        case .update, .openChannel, .closeChannel:
            break
        }
        actions.decisions.append(
            Decision(
                .pushAccepted, activity: key,
                "\(push.kind.rawValue) accepted (apns-id \(push.apnsID))"
                    + (isCurrent ? "" : "; a newer push is still pending") + "; the activity is \(phase)"))
        return actions
    }

    /// The token is gone: the activity fails, unless the push went to a token replaced since, or the token
    /// arrived after APNs' timestamp of its end. A push-to-start token's end retires it.
    private mutating func tokenRejected(
        _ reason: String, unregisteredAt: Date?, push: PlannedPush, isCurrent: Bool, now: Date
    ) -> Actions {
        guard let target = pushTarget, target.token == push.deviceToken else {
            return Actions(
                Decision(
                    .tokenGoneIgnored, activity: key,
                    "\(reason) for token \(push.deviceToken.map { "\($0)" } ?? "none"), which has been replaced since; the activity stays"
                ))
        }
        let receivedAt = push.kind == .start ? startToken?.key.occurredAt : updateToken?.receivedAt
        if let unregisteredAt, let receivedAt, receivedAt > unregisteredAt {
            return Actions(
                Decision(
                    .tokenGoneIgnored, activity: key,
                    "\(reason) at \(RFC3339.format(unregisteredAt)), but the token was received after that; kept, the push stays pending"
                ))
        }
        var actions = Actions(withdraw: pending != nil && !isCurrent)
        if push.kind == .start { actions.retired = startToken }
        if phase.isFinal {
            // Closed already (its pending push withdrawn): it keeps why; a gone push-to-start token still goes.
            actions.decisions.append(
                Decision(
                    .tokenGoneIgnored, activity: key,
                    "\(reason) for a push to an activity already \(phase); it stays so"
                        + (actions.retired != nil ? "; the push-to-start token is retired" : "")))
            return actions
        }
        close(.failed, .tokenGone(reason), at: now)
        pending = nil
        actions.decisions.append(
            Decision(
                .tokenGone, activity: key,
                "APNs says \(reason) for \(push.kind == .start ? "push-to-start" : "update") token \(push.deviceToken.map { "\($0)" } ?? "none"): the activity failed"
                    + (push.kind == .start ? "; the push-to-start token is retired" : "")))
        return actions
    }

    /// Refused for good: the push is given up. A refused start fails the activity; a refused end leaves it
    /// `ending` for the sweeper's second try, and a second refusal gives up (the system ends it in 8 hours).
    private mutating func dropped(_ reason: String, push: PlannedPush, isCurrent: Bool, now: Date) -> Actions {
        if isCurrent {
            pending = nil
            planned = sent
        }
        switch push.kind {
        case .start where phase == .pendingStart:
            close(.failed, .startDropped(reason), at: now)
        case .end where phase == .ending:
            if closeReason == .decided(.sweepTerminalNotEnded) {
                close(.ended, .endDropped(reason), at: now)
            } else {
                closeReason = .endNotAccepted(reason)
            }
        default:
            break
        }
        return Actions(
            Decision(
                .pushDropped, activity: key,
                "APNs refused the \(push.kind.rawValue) (\(reason)); given up, the activity is \(phase)"))
    }

    // MARK: - The sweeper's clock

    /// What the sweeper's clock decides for the activity: an end (near the 8-hour limit, or idle) that the
    /// coordinator plans, a second try at an end APNs refused, or giving up a start the app never adopted.
    /// An activity in the order's channel is the channel's to end.
    mutating func sweep(_ sweep: Policy.Sweep, idle: Bool, now: Date) -> (end: Decision.Code?, actions: Actions) {
        let started = clockStart
        switch phase {
        case .active where channelID != nil:
            return (nil, Actions())
        case .active:
            if now >= started.addingTimeInterval(sweep.lifetime - sweep.lifetimeMargin) {
                return (.sweepLifetime, Actions())
            }
            if idle, now >= started.addingTimeInterval(sweep.idleTimeout) { return (.sweepIdle, Actions()) }
        case .ending where pending == nil:
            switch closeReason {
            case nil, .endNotAccepted?:
                let was = closeReason?.stored ?? "no end pending"
                closeReason = .decided(.sweepTerminalNotEnded)
                return (
                    nil,
                    Actions(
                        Decision(
                            .sweepTerminalNotEnded, activity: key,
                            "the end was not accepted (\(was)); sending it once more"))
                )
            default:
                break
            }
        case .starting where now >= started.addingTimeInterval(sweep.adoptionTimeout):
            close(.failed, .decided(.sweepNeverAdopted), at: now)
            let ago = Int((now.timeIntervalSince(started) / 60).rounded())
            return (
                nil,
                Actions(
                    Decision(
                        .sweepNeverAdopted, activity: key,
                        "started \(ago) min ago and the app never reported its update token; given up (the system ends it by itself)"
                    ))
            )
        default:
            break
        }
        return (nil, Actions())
    }

    // MARK: - The app, the person and the order

    /// The app reported the activity with its update token: it is active, and a start still pending is moot.
    mutating func adopt(activityID: String, token: DeviceToken, now: Date) -> Actions {
        let was = phase
        self.activityID = activityID
        phase = .active
        closeReason = nil
        if startedAt == nil { startedAt = now }
        var actions = Actions(
            Decision(
                .activityAdopted, activity: key,
                "the app reports activity \(activityID) (was \(was)) with token \(token); it is active"))
        if pending?.kind == .start {
            actions.withdraw = true
            pending = nil
        }
        return actions
    }

    /// The app reported the end (or the system's): no more pushes.
    mutating func endedOnDevice(_ reason: ActivityEndReason, now: Date) -> Actions {
        guard !phase.isFinal else {
            return Actions(Decision(.activityAlreadyFinal, activity: key, "already \(phase); nothing changes"))
        }
        close(reason == .expired ? .expired : .ended, .reportedByApp(reason), at: now)
        return Actions(
            Decision(
                .activityEndedOnDevice, activity: key, "the activity ended on the device (\(reason)); no more pushes"),
            withdraw: withdrawPending())
    }

    /// Live Activities are off on the device: as if the person ended it.
    mutating func disable(device: String, now: Date) -> Actions {
        close(.ended, .decided(.activitiesDisabled), at: now)
        return Actions(
            Decision(
                .activitiesDisabled, activity: key,
                "Live Activities are off on device \(device): the activity counts as ended by the person; no more pushes"
            ),
            withdraw: withdrawPending())
    }

    /// The order is over before the start went out: the start is withdrawn (if APNs accepts it after all, the
    /// activity starts and is ended like any other).
    mutating func withdrawStart(status: OrderStatus, now: Date) -> Actions {
        let withdraw = withdrawPending()
        close(.ended, .decided(.startWithdrawn), at: now)
        return Actions(
            Decision(
                .startWithdrawn, activity: key,
                "the order is \(status) before the start went out; the start is withdrawn"),
            withdraw: withdraw)
    }

    /// Its end is planned (``pending`` is the end push): it is ending.
    mutating func endPlanned(sweep: Decision.Code?) {
        if let sweep { closeReason = .decided(sweep) }
        if pending?.kind == .end { phase = .ending }
    }

    /// The order's channel it runs in ended (or vanished: `failed`): so does the activity. Returns whether its
    /// pending push is withdrawn.
    mutating func endWithChannel(_ reason: CloseReason, failed: Bool, now: Date) -> Bool {
        let withdraw = withdrawPending()
        close(failed ? .failed : .ended, reason, at: now)
        return withdraw
    }

    /// Drops the pending push; returns whether there was one.
    private mutating func withdrawPending() -> Bool {
        guard pending != nil else { return false }
        pending = nil
        return true
    }
}

extension Step {
    /// Carries out what an activity's transition asks of the order.
    mutating func take(_ actions: ActivityState.Actions, for key: String) {
        decisions.append(contentsOf: actions.decisions)
        if actions.withdraw { withdrawn.append(key) }
        if let retired = actions.retired {
            state.pushToStartTokens.removeAll { $0.token == retired.token }
            retiredPushToStartTokens.append(retired)
        }
    }
}
