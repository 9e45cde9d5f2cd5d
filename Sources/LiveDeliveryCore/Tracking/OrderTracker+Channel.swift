import APNsModel
import Foundation
import LiveDeliveryJSON

/// Orders that several people follow (`order.followers`), and the broadcast channel (iOS 18) that carries
/// one order's pushes to all of its followers' devices in one request.
///
/// The channel is ``OrderState/channel``, planned like an activity (its budget, alerts, timestamps and
/// content marks) but with its own requests:
/// `pending_start` (creation planned) → `active` (APNs created it; followers' devices start into it with
/// `input-push-channel`; updates go as broadcasts) → `ending` (the end broadcast, then the deletion) →
/// `ended`. `failed`: APNs refused it, the app was near the channel limit, or the channel vanished; the
/// followers' devices then get per-token pushes (or, if the channel vanished under them, are given up).
/// The order's own user keeps per-token pushes: Apple advises device tokens for one person's updates.
extension OrderTracker {
    /// The key of an order's broadcast channel in the outbox and on the timeline.
    package static let channelKey = "channel"

    // MARK: - Followers

    /// Records a followers report; returns whether the followers changed. A follower who is no longer
    /// listed gets nothing new started; what runs on their devices runs to the order's end.
    func applyFollowers(_ e: OrderFollowersEvent, _ step: inout Step) -> Bool {
        if let current = step.state.followersKey, !e.key.isNewer(than: current) {
            step.decisions.append(
                Decision(.followersOlder, "an older followers report (\(e.eventID)); the newer one stands"))
            return false
        }
        let old = Set(step.state.followers)
        let new = Set(e.followers)
        step.state.followers = e.followers
        step.state.followersKey = e.key
        let removed = old.subtracting(new)
        step.state.pushToStartTokens.removeAll { removed.contains($0.userID) }
        let added = new.subtracting(old)
        var change: [String] = added.sorted().map { "+\($0)" } + removed.sorted().map { "−\($0)" }
        if change.isEmpty { change = ["no change"] }
        step.decisions.append(
            Decision(
                .followersChanged,
                "followed by \(e.followers.count) \(e.followers.count == 1 ? "person" : "people") besides the order's user"
                    + " (\(change.joined(separator: ", ")))"))
        return !added.isEmpty || !removed.isEmpty
    }

    // MARK: - Opening

    /// Decides on a channel once an order that may start activities has enough followers and one of them
    /// has a device to start: opens one, or, near the app's channel limit, records that the followers get
    /// per-token pushes. Decided once per order.
    func openChannelIfWanted(
        _ step: inout Step, record: OrderRecord, context: TrackingContext, mark: ActivityState.ContentMark, now: Date
    ) {
        let broadcast = policy.broadcast
        guard step.state.channel == nil, broadcast.minimumFollowers > 0, !record.isTerminal,
            policy.startOn.contains(record.status)
        else { return }
        let followers = step.state.channelFollowers
        guard followers.count >= broadcast.minimumFollowers,
            let registration = step.state.pushToStartTokens.first(where: {
                followers.contains($0.userID) && $0.attributesType == mapping.attributesType
            }),
            let counts = context.openChannels
        else { return }
        var channel = ActivityState(
            key: Self.channelKey, activityID: nil, deviceID: nil, phase: .pendingStart, now: now)
        channel.broadcast = ActivityState.Broadcast(
            bundleID: registration.bundleID, environment: registration.environment,
            storesMostRecent: broadcast.storeMostRecent)
        let open = counts[registration.app] ?? 0
        if open >= broadcast.channelLimit - broadcast.channelHeadroom {
            var machine = ChannelMachine(channel)
            machine.giveUpNearLimit(now: now)
            channel = machine.state
            step.decisions.append(
                Decision(
                    .channelLimitNear, activity: Self.channelKey,
                    "\(open) broadcast channels are open for \(registration.app), within \(broadcast.channelHeadroom) of the limit of \(broadcast.channelLimit): the followers' devices get per-token pushes"
                ))
        } else {
            planOpenChannel(&channel, &step, record: record, mark: mark, now: now, followers: followers.count)
        }
        step.state.channel = channel
    }

    private func planOpenChannel(
        _ channel: inout ActivityState, _ step: inout Step, record: OrderRecord, mark: ActivityState.ContentMark,
        now: Date, followers: Int
    ) {
        guard let broadcast = channel.broadcast else { return }
        let storage = broadcast.storesMostRecent ? "the most recent message stored" : "no message stored"
        configuration.composeChannelRequest(
            .openChannel, &channel, &step, record: record, mark: mark, now: now,
            reason: "\(followers) followers: a broadcast channel for \(broadcast.app), \(storage)")
    }

    private func planCloseChannel(
        _ channel: inout ActivityState, _ step: inout Step, record: OrderRecord, mark: ActivityState.ContentMark,
        now: Date
    ) {
        guard let channelID = channel.channelID else { return }
        var machine = ChannelMachine(channel)
        machine.deletionPlanned()
        channel = machine.state
        configuration.composeChannelRequest(
            .closeChannel, &channel, &step, record: record, mark: mark, now: now,
            reason: "the order's activities in it have ended: delete channel \(channelID)")
    }

    // MARK: - Planning

    /// Brings the channel in line with the order: its creation retried, a broadcast for new content while a
    /// follower's activity runs in it, its end at the order's end (or the sweeper's), then its deletion.
    func reconcileChannel(
        _ step: inout Step, record: OrderRecord, content: JSONObject, mark: ActivityState.ContentMark, now: Date,
        forced: Bool, sweepEnd: Decision.Code?
    ) {
        guard var channel = step.state.channel else { return }
        defer { step.state.channel = channel }
        switch channel.phase {
        case .pendingStart:
            // Kept even if the order ends meanwhile: the channel is then deleted once created.
            if forced || channel.pending == nil {
                planOpenChannel(
                    &channel, &step, record: record, mark: mark, now: now,
                    followers: step.state.channelFollowers.count)
            }
        case .active:
            // The followers' starts carry the content of their moment: broadcasts follow from there.
            if channel.planned == nil { channel.planned = mark }
            let running = step.state.activities.contains {
                $0.channelID == channel.channelID && $0.phase == .active
            }
            let starting = step.state.activities.contains {
                $0.channelID == channel.channelID && $0.phase == .pendingStart
            }
            if let sweepEnd, running {
                planEnd(&channel, &step, record: record, content: content, mark: mark, now: now, sweep: sweepEnd)
            } else if record.isTerminal || sweepEnd != nil {
                if running {
                    planEnd(&channel, &step, record: record, content: content, mark: mark, now: now, sweep: nil)
                } else if !starting {
                    planCloseChannel(&channel, &step, record: record, mark: mark, now: now)
                }
            } else if running && (forced || mark.differs(from: channel.planned)) {
                planUpdate(&channel, &step, record: record, content: content, mark: mark, now: now)
            }
        case .ending:
            guard forced, let pending = channel.pending else { break }
            if pending.kind == .closeChannel {
                planCloseChannel(&channel, &step, record: record, mark: mark, now: now)
            } else {
                planEnd(
                    &channel, &step, record: record, content: content, mark: mark, now: now,
                    sweep: channel.closeReason?.sweepEnd)
            }
        default:
            break
        }
    }

    /// The channel's share of a sweep: its end near the 8-hour limit or when the order is idle, and a second
    /// try at a deletion APNs did not accept.
    func sweepChannel(_ step: inout Step, idle: Bool, now: Date) -> Decision.Code? {
        guard let channel = step.state.channel, let record = step.state.record else { return nil }
        var machine = ChannelMachine(channel)
        let (end, actions) = machine.sweep(policy.sweep, idle: idle, now: now)
        take(actions, machine, &step, mark: configuration.contentMark(for: record).1, now: now)
        return end
    }

    // MARK: - Outcomes

    /// Records APNs' answer to one of the channel's requests. Once the channel is created or refused, the
    /// followers' devices wait for their start, which needs their settings: the sweeper starts them
    /// (``TrackingConfiguration/followersWaitingSince(_:)``).
    func recordChannel(_ outcome: PushOutcome, for push: PlannedPush, _ step: inout Step, now: Date) {
        guard let channel = step.state.channel else {
            step.decisions.append(
                Decision(.unknownActivity, activity: Self.channelKey, "order \(step.state.orderID) has no channel"))
            return
        }
        var machine = ChannelMachine(channel)
        let actions = machine.receive(outcome, for: push, now: now)
        take(actions, machine, &step, mark: push.mark, now: now)
    }

    /// Carries out what a transition of the channel asks of the order, and stores the channel.
    private func take(
        _ actions: ChannelMachine.Actions, _ machine: ChannelMachine, _ step: inout Step,
        mark: @autoclosure () -> ActivityState.ContentMark, now: Date
    ) {
        step.decisions.append(contentsOf: actions.decisions)
        if actions.withdraw { step.withdrawn.append(Self.channelKey) }
        if let end = actions.endMembers { endMembers(of: machine.state, end, &step, now: now) }
        var channel = machine.state
        if actions.delete, let record = step.state.record {
            planCloseChannel(&channel, &step, record: record, mark: mark(), now: now)
        }
        step.state.channel = channel
        if actions.reconcile {
            reconcile(&step, context: .unread, now: now, announce: false, rebuild: [])
        }
    }

    /// The end of the channel's activities: they show their final content (or stay as they are).
    private func endMembers(
        of channel: ActivityState, _ end: ChannelMachine.MembersEnd, _ step: inout Step, now: Date
    ) {
        guard let channelID = channel.channelID else { return }
        for index in step.state.activities.indices
        where step.state.activities[index].channelID == channelID && !step.state.activities[index].phase.isFinal {
            if step.state.activities[index].endWithChannel(end.reason, failed: end.failed, now: now) {
                step.withdrawn.append(step.state.activities[index].key)
            }
        }
    }
}
