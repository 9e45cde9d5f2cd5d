import Foundation
import Testing

@testable import LiveDeliveryCore

/// The broadcast channel's machine alone: its phases, each of its requests with APNs' every answer, and the
/// sweeper's clock.
@Suite("Tracking: the broadcast channel's machine")
struct ChannelMachineTests {
    static let now = Fixtures.at(60)
    static let mark = ActivityMachineTests.mark("preparing")

    static func channel(
        _ phase: ActivityState.Phase, pending kind: PlannedPush.Kind?, reason: CloseReason? = nil
    ) -> ChannelMachine {
        var state = ActivityState(
            key: OrderTracker.channelKey, activityID: nil, deviceID: nil, phase: phase, now: Fixtures.at(0))
        state.broadcast = ActivityState.Broadcast(
            bundleID: "com.example.app", environment: .production, storesMostRecent: true)
        if phase != .pendingStart {
            state.channelID = "ch-1"
            state.startedAt = Fixtures.at(1)
        }
        state.closeReason = reason
        state.sent = ActivityMachineTests.mark("confirmed")
        if let kind {
            state.pending = ActivityState.PendingPush(
                apnsID: "p1", kind: kind, timestamp: 100, priority: 10, alertStep: nil, alertKind: nil, mark: mark)
            state.planned = mark
        }
        return ChannelMachine(state)
    }

    static func request(_ kind: PlannedPush.Kind, apnsID: String = "p1") -> PlannedPush {
        PlannedPush(
            orderID: "A-10023", activityKey: OrderTracker.channelKey, activityID: nil, kind: kind, deviceToken: nil,
            channelID: kind == .openChannel ? nil : "ch-1", environment: .production, bundleID: "com.example.app",
            apnsID: apnsID, priority: 10, timestamp: 100, notBefore: Fixtures.at(0), expiration: 0, headers: [],
            payload: [], alert: nil, step: "preparing", status: .preparing, statusKey: mark.statusKey, reason: "test",
            mark: mark)
    }

    @Test("its phase is read from the stored state: each sub-state of `ending` by what it waits for")
    func phases() {
        #expect(Self.channel(.pendingStart, pending: .openChannel).phase == .creating)
        #expect(Self.channel(.active, pending: nil).phase == .open)
        #expect(Self.channel(.active, pending: .update).phase == .open)
        #expect(Self.channel(.ending, pending: .end).phase == .ending)
        #expect(Self.channel(.ending, pending: .closeChannel).phase == .deleting)
        #expect(Self.channel(.ending, pending: .closeChannel, reason: .closeRetried).phase == .deleting)
        #expect(Self.channel(.ending, pending: nil, reason: .closeNotAccepted("500")).phase == .deletionRefused)
        #expect(Self.channel(.ended, pending: nil, reason: .endedByServer).phase == .deleted)
        #expect(Self.channel(.failed, pending: nil, reason: .channelRefused("400")).phase == .failed)
    }

    // MARK: - Creation

    @Test("created: open with APNs' id, the order's activities follow")
    func created() {
        var machine = Self.channel(.pendingStart, pending: .openChannel)
        let actions = machine.receive(
            .channelCreated(channelID: "ch-7"), for: Self.request(.openChannel), now: Self.now)
        #expect(machine.phase == .open)
        #expect(machine.state.channelID == "ch-7")
        #expect(machine.state.startedAt == Self.now)
        #expect(machine.state.pending == nil)
        #expect(actions.reconcile)
        #expect(actions.decisions.map(\.code) == [.channelOpened])
    }

    @Test(
        "not created (refused, token-like refusal, or no id in a 201): failed, the followers get per-token pushes",
        arguments: [
            (PushOutcome.dropped(reason: "400 CannotCreateChannelConfig"), "400 CannotCreateChannelConfig"),
            (.tokenRejected(reason: "400 BadChannelId", unregisteredAt: nil), "400 BadChannelId"),
            (.accepted, "no apns-channel-id in the answer"),
        ])
    func refused(_ outcome: PushOutcome, _ reason: String) {
        var machine = Self.channel(.pendingStart, pending: .openChannel)
        let actions = machine.receive(outcome, for: Self.request(.openChannel), now: Self.now)
        #expect(machine.phase == .failed)
        #expect(machine.state.closeReason == .channelRefused(reason))
        #expect(machine.state.pending == nil)
        #expect(actions.reconcile)
        #expect(actions.decisions.map(\.code) == [.channelRefused])
    }

    @Test(
        "a retry leaves every phase as it is",
        arguments: [
            (ActivityState.Phase.pendingStart, PlannedPush.Kind.openChannel), (.active, .update), (.ending, .end),
            (.ending, .closeChannel),
        ])
    func retry(_ phase: ActivityState.Phase, _ kind: PlannedPush.Kind) {
        var machine = Self.channel(phase, pending: kind)
        let before = machine.state
        let actions = machine.receive(
            .retryLater(reason: "429 TooManyRequests"), for: Self.request(kind), now: Self.now)
        #expect(machine.state == before)
        #expect(actions.decisions.map(\.code) == [.pushRetry])
        #expect(!actions.delete && !actions.reconcile && actions.endMembers == nil)
    }

    // MARK: - Broadcasts

    @Test("a broadcast update accepted counts as sent; refused, the planned content falls back to the sent")
    func broadcastUpdate() {
        var accepted = Self.channel(.active, pending: .update)
        let actions = accepted.receive(.accepted, for: Self.request(.update), now: Self.now)
        #expect(accepted.phase == .open)
        #expect(accepted.state.sent == Self.mark)
        #expect(accepted.state.pending == nil)
        #expect(actions.endMembers == nil && !actions.delete)

        var dropped = Self.channel(.active, pending: .update)
        let refused = dropped.receive(.dropped(reason: "400 BadPriority"), for: Self.request(.update), now: Self.now)
        #expect(dropped.phase == .open)
        #expect(dropped.state.planned == dropped.state.sent)
        #expect(refused.endMembers == nil && !refused.delete)
        #expect(refused.decisions.map(\.code) == [.pushDropped])
    }

    @Test("the end broadcast answered (accepted or refused): the activities in it end, then the channel is deleted")
    func endBroadcast() {
        var accepted = Self.channel(.ending, pending: .end, reason: .decided(.sweepIdle))
        let actions = accepted.receive(.accepted, for: Self.request(.end), now: Self.now)
        #expect(actions.endMembers == ChannelMachine.MembersEnd(reason: .decided(.sweepIdle), failed: false))
        #expect(actions.delete)

        var plain = Self.channel(.ending, pending: .end)
        let ended = plain.receive(.accepted, for: Self.request(.end), now: Self.now)
        #expect(ended.endMembers == ChannelMachine.MembersEnd(reason: .endedByServer, failed: false))

        var dropped = Self.channel(.ending, pending: .end)
        let refused = dropped.receive(.dropped(reason: "400 PayloadTooLarge"), for: Self.request(.end), now: Self.now)
        #expect(
            refused.endMembers == ChannelMachine.MembersEnd(reason: .endDropped("400 PayloadTooLarge"), failed: false))
        #expect(refused.delete)
    }

    @Test("the channel gone under a broadcast: failed, its activities given up, a newer request withdrawn")
    func gone() {
        var machine = Self.channel(.active, pending: .update)
        let actions = machine.receive(
            .tokenRejected(reason: "400 ChannelNotRegistered", unregisteredAt: nil),
            for: Self.request(.update, apnsID: "p0"), now: Self.now)
        #expect(machine.phase == .failed)
        #expect(machine.state.closeReason == .channelGone("400 ChannelNotRegistered"))
        #expect(machine.state.endedAt == Self.now)
        #expect(actions.withdraw)
        #expect(
            actions.endMembers
                == ChannelMachine.MembersEnd(reason: .channelGone("400 ChannelNotRegistered"), failed: true))
        #expect(!actions.delete)
    }

    @Test("a channel id answering anything but a creation is ignored")
    func strayChannelID() {
        var machine = Self.channel(.active, pending: .update)
        let before = machine.state
        let actions = machine.receive(.channelCreated(channelID: "ch-9"), for: Self.request(.update), now: Self.now)
        #expect(machine.state == before)
        #expect(actions.decisions.map(\.code) == [.unknownActivity])
    }

    @Test("an earlier broadcast answered while a newer one waits: the answer counts, the newer stays pending")
    func supersededBroadcast() {
        var accepted = Self.channel(.active, pending: .update)
        let actions = accepted.receive(.accepted, for: Self.request(.update, apnsID: "p0"), now: Self.now)
        #expect(accepted.state.pending?.apnsID == "p1")
        #expect(accepted.state.sent == Self.mark)
        #expect(actions.decisions.map(\.code) == [.pushAccepted])
        #expect(actions.decisions.first?.message.contains("a newer one is still pending") == true)
        #expect(!actions.withdraw && actions.endMembers == nil && !actions.delete)

        var dropped = Self.channel(.active, pending: .update)
        let planned = dropped.state.planned
        let refused = dropped.receive(
            .dropped(reason: "400 BadPriority"), for: Self.request(.update, apnsID: "p0"), now: Self.now)
        #expect(dropped.state.pending?.apnsID == "p1")
        #expect(dropped.state.planned == planned)
        #expect(refused.decisions.map(\.code) == [.pushDropped])
    }

    @Test("the channel gone under its end broadcast: failed, its activities given up, no deletion")
    func goneWhileEnding() {
        var machine = Self.channel(.ending, pending: .end, reason: .decided(.sweepIdle))
        let actions = machine.receive(
            .tokenRejected(reason: "400 ChannelNotRegistered", unregisteredAt: nil), for: Self.request(.end),
            now: Self.now)
        #expect(machine.phase == .failed)
        #expect(machine.state.pending == nil)
        #expect(!actions.withdraw)
        #expect(actions.endMembers?.failed == true)
        #expect(!actions.delete)
        #expect(actions.decisions.map(\.code) == [.channelGone])
    }

    @Test("an earlier creation answered with an id while a newer one waits: open, the newer left to be answered")
    func supersededCreation() {
        var machine = Self.channel(.pendingStart, pending: .openChannel)
        let actions = machine.receive(
            .channelCreated(channelID: "ch-7"), for: Self.request(.openChannel, apnsID: "p0"), now: Self.now)
        #expect(machine.state.channelID == "ch-7")
        #expect(machine.state.pending?.apnsID == "p1")
        #expect(actions.reconcile)
    }

    // MARK: - Deletion

    @Test("deleted (or already gone): closed with the reason it ended for")
    func deleted() {
        for outcome in [PushOutcome.accepted, .tokenRejected(reason: "400 ChannelNotRegistered", unregisteredAt: nil)] {
            var machine = Self.channel(.ending, pending: .closeChannel, reason: .decided(.sweepLifetime))
            let actions = machine.receive(outcome, for: Self.request(.closeChannel), now: Self.now)
            #expect(machine.phase == .deleted)
            #expect(machine.state.closeReason == .decided(.sweepLifetime))
            #expect(actions.decisions.map(\.code) == [.channelClosed])
        }
        var retried = Self.channel(.ending, pending: .closeChannel, reason: .closeRetried)
        _ = retried.receive(.accepted, for: Self.request(.closeChannel), now: Self.now)
        #expect(retried.state.closeReason == .endedByServer)
    }

    @Test("its deletion planned: the channel is deleting, whatever it was doing")
    func deletionPlanned() {
        var machine = Self.channel(.active, pending: .closeChannel)
        machine.deletionPlanned()
        #expect(machine.phase == .deleting)
        #expect(machine.state.phase == .ending)
    }

    @Test("a deletion refused once waits for the sweeper, which tries once more; refused twice, given up")
    func deletionRefused() {
        var machine = Self.channel(.ending, pending: .closeChannel)
        _ = machine.receive(
            .dropped(reason: "500 InternalServerError"), for: Self.request(.closeChannel), now: Self.now)
        #expect(machine.phase == .deletionRefused)

        let (end, actions) = machine.sweep(Policy.Sweep(), idle: false, now: Self.now)
        #expect(end == nil)
        #expect(actions.delete)
        #expect(machine.state.closeReason == .closeRetried)
        #expect(actions.decisions.map(\.code) == [.channelClosePlanned])

        var retried = Self.channel(.ending, pending: .closeChannel, reason: .closeRetried)
        let givenUp = retried.receive(
            .dropped(reason: "500 InternalServerError"), for: Self.request(.closeChannel), now: Self.now)
        #expect(retried.phase == .deleted)
        #expect(retried.state.closeReason == .closeDropped("500 InternalServerError"))
        #expect(givenUp.decisions.map(\.code) == [.channelCloseFailed])
    }

    // MARK: - The sweeper's clock

    @Test("open: ended near the 8-hour limit, or when the order is idle that long; other phases wait")
    func sweep() {
        let sweep = Policy.Sweep()
        let limit = Fixtures.at(1).addingTimeInterval(sweep.lifetime - sweep.lifetimeMargin)
        var open = Self.channel(.active, pending: nil)
        let early = open.sweep(sweep, idle: false, now: limit.addingTimeInterval(-1)).end
        let due = open.sweep(sweep, idle: false, now: limit)
        let idle = Fixtures.at(1).addingTimeInterval(sweep.idleTimeout)
        let idleEnd = open.sweep(sweep, idle: true, now: idle).end
        let busy = open.sweep(sweep, idle: false, now: idle).end
        #expect(early == nil)
        #expect(due.end == .sweepLifetime)
        #expect(due.actions == ChannelMachine.Actions())
        #expect(idleEnd == .sweepIdle)
        #expect(busy == nil)
        for waiting in [
            Self.channel(.pendingStart, pending: .openChannel), Self.channel(.ending, pending: .end),
            Self.channel(.ending, pending: .closeChannel), Self.channel(.ended, pending: nil, reason: .endedByServer),
            Self.channel(.failed, pending: nil, reason: .channelGone("410")),
        ] {
            var copy = waiting
            let (end, actions) = copy.sweep(sweep, idle: true, now: Fixtures.at(24 * 60))
            #expect(end == nil)
            #expect(actions == ChannelMachine.Actions())
            #expect(copy.state == waiting.state)
        }
    }

    @Test("near the app's channel limit: failed before it was asked for")
    func nearLimit() {
        var machine = Self.channel(.pendingStart, pending: nil)
        machine.giveUpNearLimit(now: Self.now)
        #expect(machine.phase == .failed)
        #expect(machine.state.closeReason == .decided(.channelLimitNear))
    }
}
