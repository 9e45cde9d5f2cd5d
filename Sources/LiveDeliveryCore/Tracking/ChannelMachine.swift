import Foundation

/// The life of an order's broadcast channel (iOS 18) as a state machine, over the channel's stored state
/// (``OrderState/channel``). Its ``Phase`` is read from that state; it changes here and nowhere else.
///
/// ```
/// creating ─201 with an id─▶ open ─order over (or the sweeper's end)─▶ ending ─end broadcast answered─▶ deleting
///    │                          │                                      (no activity running in it: straight to deleting)
///    │                          └─ channel gone (410, ChannelNotRegistered) ─▶ failed, its activities given up
///    └─ refused, or no id ─▶ failed (the followers' devices get per-token pushes)
/// deleting ─accepted─▶ deleted · refused ─▶ deletion refused ─the sweeper's second try─▶ deleting
///                                                             refused twice ─▶ deleted (given up)
/// ```
///
/// Transitions return ``Actions``: what the coordinator (``OrderTracker``) must do with the order around the
/// channel, which the machine does not hold (its activities, the deletion's request, the followers' starts).
struct ChannelMachine: Sendable {
    /// Where the channel is.
    enum Phase: Hashable, Sendable {
        /// Its creation is planned or in flight.
        case creating
        /// APNs created it: followers' devices start into it; updates go as broadcasts.
        case open
        /// Its end broadcast is planned or in flight.
        case ending
        /// Its deletion is planned or in flight.
        case deleting
        /// APNs refused the deletion once: the sweeper tries once more.
        case deletionRefused
        /// Deleted (or, after a second refusal, given up).
        case deleted
        /// Never created, near the app's channel limit, or gone under its activities.
        case failed
    }

    /// The end of the activities in the channel.
    struct MembersEnd: Hashable, Sendable {
        var reason: CloseReason
        /// Gone (the channel vanished) rather than ended.
        var failed: Bool
    }

    /// What a transition asks of the order around the channel.
    struct Actions: Hashable, Sendable {
        var decisions: [Decision] = []
        /// The channel's pending request must not be sent any more.
        var withdraw = false
        /// The activities in the channel end with it.
        var endMembers: MembersEnd?
        /// Plan the channel's deletion now.
        var delete = false
        /// The order's activities follow the channel's news (created: followers start into it; refused: they
        /// start with per-token pushes).
        var reconcile = false

        init(
            _ decisions: Decision..., withdraw: Bool = false, endMembers: MembersEnd? = nil, delete: Bool = false,
            reconcile: Bool = false
        ) {
            self.decisions = decisions
            self.withdraw = withdraw
            self.endMembers = endMembers
            self.delete = delete
            self.reconcile = reconcile
        }
    }

    static let key = OrderTracker.channelKey

    var state: ActivityState

    init(_ state: ActivityState) {
        self.state = state
    }

    var phase: Phase {
        switch state.phase {
        case .pendingStart: .creating
        case .starting, .active: .open
        case .ending:
            switch (state.pending?.kind, state.closeReason) {
            case (.closeChannel?, _): .deleting
            case (nil, .closeNotAccepted?): .deletionRefused
            default: .ending
            }
        case .ended, .expired: .deleted
        case .failed: .failed
        }
    }

    // MARK: - Decisions of the coordinator's

    /// Near the app's channel limit: no channel for this order.
    mutating func giveUpNearLimit(now: Date) {
        state.close(.failed, .decided(.channelLimitNear), at: now)
    }

    /// Its deletion is planned (``ActivityState/pending`` is the request).
    mutating func deletionPlanned() {
        state.phase = .ending
    }

    // MARK: - APNs' answers

    /// APNs' answer to one of the channel's requests.
    mutating func receive(_ outcome: PushOutcome, for push: PlannedPush, now: Date) -> Actions {
        let isCurrent = state.pending?.apnsID == push.apnsID
        switch (push.kind, outcome) {
        case (_, .retryLater(let reason)):
            return Actions(
                Decision(
                    .pushRetry, activity: Self.key,
                    "\(reason): the request stays pending; it is rebuilt with a fresh timestamp before it is sent again"
                ))
        case (.openChannel, .channelCreated(let channelID)):
            return created(channelID, isCurrent: isCurrent, now: now)
        case (.openChannel, .dropped(let reason)), (.openChannel, .tokenRejected(let reason, _)):
            return refused(reason, now: now)
        case (.openChannel, _):
            return refused("no apns-channel-id in the answer", now: now)
        case (.closeChannel, .accepted), (.closeChannel, .tokenRejected):
            let reason = state.closeReason == .closeRetried ? nil : state.closeReason
            state.close(.ended, reason ?? .endedByServer, at: now)
            state.pending = nil
            return Actions(Decision(.channelClosed, activity: Self.key, "channel \(push.channelID ?? "") deleted"))
        case (.closeChannel, .dropped(let reason)):
            return deletionRefused(reason, channelID: push.channelID ?? "", now: now)
        case (_, .accepted):
            return broadcastAccepted(push, isCurrent: isCurrent, now: now)
        case (_, .tokenRejected(let reason, _)):
            let withdraw = state.pending != nil && !isCurrent
            state.close(.failed, .channelGone(reason), at: now)
            state.pending = nil
            return Actions(
                Decision(
                    .channelGone, activity: Self.key,
                    "APNs says \(reason) for channel \(push.channelID ?? ""): the activities in it can no longer be updated and are given up"
                ), withdraw: withdraw, endMembers: MembersEnd(reason: .channelGone(reason), failed: true))
        case (_, .dropped(let reason)):
            if isCurrent {
                state.pending = nil
                state.planned = state.sent
            }
            let decision = Decision(
                .pushDropped, activity: Self.key, "APNs refused the broadcast \(push.kind.rawValue) (\(reason))")
            guard push.kind == .end else { return Actions(decision) }
            return Actions(
                decision, endMembers: MembersEnd(reason: .endDropped(reason), failed: false), delete: true)
        case (_, .channelCreated):
            return Actions(
                Decision(.unknownActivity, activity: Self.key, "a channel id answered a \(push.kind.rawValue); ignored")
            )
        }
    }

    private mutating func created(_ channelID: String, isCurrent: Bool, now: Date) -> Actions {
        state.channelID = channelID
        state.phase = .active
        state.startedAt = now
        state.closeReason = nil
        if isCurrent { state.pending = nil }
        return Actions(
            Decision(
                .channelOpened, activity: Self.key,
                "APNs created broadcast channel \(channelID): the followers' devices start into it"), reconcile: true)
    }

    private mutating func refused(_ reason: String, now: Date) -> Actions {
        state.close(.failed, .channelRefused(reason), at: now)
        state.pending = nil
        return Actions(
            Decision(
                .channelRefused, activity: Self.key,
                "APNs did not create the channel (\(reason)): the followers' devices get per-token pushes"),
            reconcile: true)
    }

    private mutating func deletionRefused(_ reason: String, channelID: String, now: Date) -> Actions {
        state.pending = nil
        if state.closeReason == .closeRetried {
            state.close(.ended, .closeDropped(reason), at: now)
            return Actions(
                Decision(
                    .channelCloseFailed, activity: Self.key,
                    "APNs refused to delete channel \(channelID) twice (\(reason)); given up: it counts against the app's limit until deleted by hand"
                ))
        }
        state.closeReason = .closeNotAccepted(reason)
        return Actions(
            Decision(
                .channelCloseFailed, activity: Self.key,
                "APNs refused to delete channel \(channelID) (\(reason)); the sweeper tries once more"))
    }

    /// A broadcast accepted: its content counts as sent; an end broadcast ends the activities in the channel,
    /// then the channel is deleted.
    private mutating func broadcastAccepted(_ push: PlannedPush, isCurrent: Bool, now: Date) -> Actions {
        state.countSent(
            push.mark, priority: push.priority, timestamp: push.timestamp,
            cutoff: Int(now.timeIntervalSince1970.rounded(.down)) - 3600)
        if isCurrent { state.pending = nil }
        var actions = Actions(
            Decision(
                .pushAccepted, activity: Self.key,
                "broadcast \(push.kind.rawValue) accepted (apns-request-id \(push.apnsID))"
                    + (isCurrent ? "" : "; a newer one is still pending")))
        if push.kind == .end {
            actions.endMembers = MembersEnd(reason: state.closeReason ?? .endedByServer, failed: false)
            actions.delete = true
        }
        return actions
    }

    // MARK: - The sweeper's clock

    /// What the sweeper's clock decides for the channel: its end near the 8-hour limit or when the order is
    /// idle (the coordinator plans it), or a second try at a deletion APNs refused.
    mutating func sweep(_ sweep: Policy.Sweep, idle: Bool, now: Date) -> (end: Decision.Code?, actions: Actions) {
        switch phase {
        case .open:
            let started = state.clockStart
            if now >= started.addingTimeInterval(sweep.lifetime - sweep.lifetimeMargin) {
                return (.sweepLifetime, Actions())
            }
            if idle, now >= started.addingTimeInterval(sweep.idleTimeout) { return (.sweepIdle, Actions()) }
        case .deletionRefused:
            guard case .closeNotAccepted(let reason)? = state.closeReason else { break }
            state.closeReason = .closeRetried
            return (
                nil,
                Actions(
                    Decision(
                        .channelClosePlanned, activity: Self.key,
                        "the deletion was not accepted (\(reason)); sending it once more"), delete: true)
            )
        default:
            break
        }
        return (nil, Actions())
    }
}
