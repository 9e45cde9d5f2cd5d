import Foundation
import Testing

@testable import LiveDeliveryCore

/// The activity's machine alone: each transition from each phase, with APNs' every answer, and the clock.
@Suite("Tracking: the activity's machine")
struct ActivityMachineTests {
    static let token = DeviceToken(hex: Fixtures.updateHex)!
    static let startToken = DeviceToken(hex: Fixtures.pushToStartHex)!
    static let rotated = DeviceToken(hex: Fixtures.rotatedHex)!
    static let now = Fixtures.at(60)

    static func mark(_ step: String) -> ActivityState.ContentMark {
        ActivityState.ContentMark(
            contentState: "{\"step\":\"\(step)\"}", step: step, relevance: 50, status: .preparing,
            statusKey: EventKey(sequence: 2, occurredAt: Fixtures.at(0), eventID: "e-\(step)"), eta: nil)
    }

    /// An activity in `phase` whose pending push (apns-id `p1`) is a `kind`, with its push target on file.
    static func activity(
        _ phase: ActivityState.Phase, pending kind: PlannedPush.Kind?, reason: CloseReason? = nil,
        inChannel: Bool = false
    ) -> ActivityState {
        var activity = ActivityState(
            key: "device:d1", activityID: nil, deviceID: "d1", phase: phase, now: Fixtures.at(0))
        activity.closeReason = reason
        activity.startToken = PushToStartRegistration(
            userID: "u-991", deviceID: "d1", token: startToken, bundleID: "com.example.app", environment: .production,
            attributesType: "DeliveryAttributes",
            key: EventKey(sequence: nil, occurredAt: Fixtures.at(0), eventID: "r1"))
        if phase != .pendingStart {
            activity.updateToken = ActivityState.UpdateToken(
                token: token, bundleID: "com.example.app", environment: .production,
                key: EventKey(sequence: nil, occurredAt: Fixtures.at(1), eventID: "t1"), receivedAt: Fixtures.at(1))
            activity.startedAt = Fixtures.at(1)
        }
        if inChannel { activity.channelID = "ch-1" }
        activity.sent = mark("confirmed")
        if let kind {
            activity.pending = ActivityState.PendingPush(
                apnsID: "p1", kind: kind, timestamp: 100, priority: 10, alertStep: nil, alertKind: nil,
                mark: mark("preparing"))
            activity.planned = mark("preparing")
        }
        return activity
    }

    static func push(_ kind: PlannedPush.Kind, apnsID: String = "p1", to target: DeviceToken? = nil) -> PlannedPush {
        PlannedPush(
            orderID: "A-10023", activityKey: "device:d1", activityID: nil, kind: kind,
            deviceToken: target ?? (kind == .start ? startToken : token), environment: .production,
            bundleID: "com.example.app", apnsID: apnsID, priority: 10, timestamp: 100, notBefore: Fixtures.at(0),
            expiration: 0, headers: [], payload: [], alert: nil, step: "preparing", status: .preparing,
            statusKey: mark("preparing").statusKey, reason: "test", mark: mark("preparing"))
    }

    static let outcomes: [PushOutcome] = [
        .accepted, .channelCreated(channelID: "ch-9"), .tokenRejected(reason: "410 Unregistered", unregisteredAt: nil),
        .retryLater(reason: "429 TooManyRequests"), .dropped(reason: "400 BadPriority"),
    ]

    // MARK: - APNs' answers, by phase

    struct Answer: Sendable, CustomTestStringConvertible {
        var phase: ActivityState.Phase
        var kind: PlannedPush.Kind
        var reason: CloseReason? = nil
        var inChannel = false
        var outcome: PushOutcome
        var expected: ActivityState.Phase
        var expectedReason: CloseReason?
        var testDescription: String { "\(kind) in \(phase) (\(reason?.stored ?? "-")) answered \(outcome)" }
    }

    static let answers: [Answer] = [
        Answer(phase: .pendingStart, kind: .start, outcome: .accepted, expected: .starting, expectedReason: nil),
        Answer(
            phase: .pendingStart, kind: .start, inChannel: true, outcome: .accepted, expected: .active,
            expectedReason: nil),
        Answer(
            phase: .ended, kind: .start, reason: .decided(.startWithdrawn), outcome: .accepted, expected: .starting,
            expectedReason: nil),
        Answer(
            phase: .pendingStart, kind: .start, outcome: .dropped(reason: "400 BadPriority"), expected: .failed,
            expectedReason: .startDropped("400 BadPriority")),
        Answer(
            phase: .pendingStart, kind: .start,
            outcome: .tokenRejected(reason: "410 Unregistered", unregisteredAt: nil),
            expected: .failed, expectedReason: .tokenGone("410 Unregistered")),
        Answer(
            phase: .pendingStart, kind: .start, outcome: .retryLater(reason: "500"), expected: .pendingStart,
            expectedReason: nil),
        Answer(phase: .starting, kind: .start, outcome: .accepted, expected: .starting, expectedReason: nil),
        Answer(
            phase: .starting, kind: .start, outcome: .dropped(reason: "400 BadPriority"), expected: .starting,
            expectedReason: nil),
        Answer(phase: .active, kind: .update, outcome: .accepted, expected: .active, expectedReason: nil),
        Answer(
            phase: .active, kind: .update, outcome: .dropped(reason: "400 BadPriority"), expected: .active,
            expectedReason: nil),
        Answer(
            phase: .active, kind: .update, outcome: .tokenRejected(reason: "400 BadDeviceToken", unregisteredAt: nil),
            expected: .failed, expectedReason: .tokenGone("400 BadDeviceToken")),
        Answer(
            phase: .active, kind: .update, outcome: .channelCreated(channelID: "x"), expected: .active,
            expectedReason: nil),
        Answer(phase: .ending, kind: .end, outcome: .accepted, expected: .ended, expectedReason: .endedByServer),
        Answer(
            phase: .ending, kind: .end, reason: .decided(.sweepIdle), outcome: .accepted, expected: .ended,
            expectedReason: .decided(.sweepIdle)),
        Answer(
            phase: .ending, kind: .end, outcome: .dropped(reason: "400 BadPriority"), expected: .ending,
            expectedReason: .endNotAccepted("400 BadPriority")),
        Answer(
            phase: .ending, kind: .end, reason: .decided(.sweepTerminalNotEnded),
            outcome: .dropped(reason: "400 BadPriority"), expected: .ended,
            expectedReason: .endDropped("400 BadPriority")),
        Answer(
            phase: .ending, kind: .end, outcome: .tokenRejected(reason: "410 Unregistered", unregisteredAt: nil),
            expected: .failed, expectedReason: .tokenGone("410 Unregistered")),
        Answer(
            phase: .ended, kind: .update, reason: .reportedByApp(.dismissedByUser), outcome: .accepted,
            expected: .ended, expectedReason: .reportedByApp(.dismissedByUser)),
        Answer(
            phase: .expired, kind: .start, reason: .reportedByApp(.expired), outcome: .accepted, expected: .expired,
            expectedReason: .reportedByApp(.expired)),
        Answer(
            phase: .failed, kind: .start, reason: .tokenGone("410"), outcome: .accepted, expected: .failed,
            expectedReason: .tokenGone("410")),
    ]

    @Test("each answer moves the activity to its phase and reason", arguments: answers)
    func answer(_ answer: Answer) {
        var activity = Self.activity(
            answer.phase, pending: answer.kind, reason: answer.reason, inChannel: answer.inChannel)
        let actions = activity.receive(answer.outcome, for: Self.push(answer.kind), now: Self.now)
        #expect(activity.phase == answer.expected)
        #expect(activity.closeReason == answer.expectedReason)
        #expect(!actions.decisions.isEmpty)
        switch answer.outcome {
        case .accepted:
            #expect(activity.pending == nil)
            #expect(activity.sent == Self.mark("preparing"))
        case .retryLater, .channelCreated:
            #expect(activity.pending != nil)
        case .dropped:
            #expect(activity.pending == nil)
            #expect(activity.planned == activity.sent)
        case .tokenRejected:
            #expect(activity.pending == nil)
            #expect(actions.retired == (answer.kind == .start ? activity.startToken : nil))
        }
        if activity.phase.isFinal && !answer.phase.isFinal { #expect(activity.endedAt == Self.now) }
        if answer.phase == .pendingStart && activity.phase == .starting { #expect(activity.startedAt == Self.now) }
    }

    /// Every phase and kind with every answer: the invariants no single case spells out. A final activity has
    /// nothing pending (every way into a final phase withdraws it); a late answer still arrives.
    @Test(
        "in every phase: a retry or a stray channel id changes nothing, a gone token fails a live activity, a final one stays final"
    )
    func everyPhaseEveryAnswer() {
        for phase in ActivityState.Phase.allCases {
            for kind in [PlannedPush.Kind.start, .update, .end] {
                for outcome in Self.outcomes {
                    let before = Self.activity(phase, pending: phase.isFinal ? nil : kind)
                    var after = before
                    let target = before.pushTarget?.token
                    let actions = after.receive(outcome, for: Self.push(kind, to: target), now: Self.now)
                    let label: Comment = "\(kind) in \(phase): \(outcome)"
                    #expect(actions.decisions.count >= 1, label)
                    switch outcome {
                    case .retryLater, .channelCreated:
                        #expect(after == before, label)
                    case .tokenRejected:
                        #expect(after.phase == (phase.isFinal ? phase : .failed), label)
                        #expect(after.pending == nil, label)
                        #expect((actions.retired != nil) == (kind == .start), label)
                    case .accepted, .dropped:
                        if phase.isFinal { #expect(after.phase == phase, label) }
                    }
                    if phase.isFinal { #expect(after.closeReason == before.closeReason, label) }
                }
            }
        }
    }

    @Test("a late acceptance of a withdrawn start starts the activity after all: it is on the device")
    func lateStartAfterWithdrawal() {
        var withdrawn = Self.activity(.ended, pending: nil, reason: .decided(.startWithdrawn))
        _ = withdrawn.receive(.accepted, for: Self.push(.start), now: Self.now)
        #expect(withdrawn.phase == .starting)
        #expect(withdrawn.closeReason == nil)
        #expect(withdrawn.endedAt == nil)
    }

    @Test("an earlier start accepted while a newer start waits: started once, the newer is withdrawn")
    func earlierStartAccepted() {
        var activity = Self.activity(.pendingStart, pending: .start)
        let actions = activity.receive(.accepted, for: Self.push(.start, apnsID: "p0"), now: Self.now)
        #expect(activity.phase == .starting)
        #expect(activity.pending == nil)
        #expect(actions.withdraw)
        #expect(actions.decisions.map(\.code) == [.withdrawn, .pushAccepted])
    }

    @Test("an end accepted that is not the one pending still ends an ending activity; an update's does not")
    func supersededAcceptances() {
        var ending = Self.activity(.ending, pending: .end)
        _ = ending.receive(.accepted, for: Self.push(.end, apnsID: "p0"), now: Self.now)
        #expect(ending.phase == .ended)
        var active = Self.activity(.active, pending: .update)
        _ = active.receive(.accepted, for: Self.push(.update, apnsID: "p0"), now: Self.now)
        #expect(active.phase == .active)
        #expect(active.pending?.apnsID == "p1")
    }

    @Test("a gone token that was replaced since, or arrived after APNs' timestamp, leaves the activity as it is")
    func tokenGoneIgnored() {
        var replaced = Self.activity(.active, pending: .update)
        let before = replaced
        let ignored = replaced.receive(
            .tokenRejected(reason: "410 Unregistered", unregisteredAt: nil), for: Self.push(.update, to: Self.rotated),
            now: Self.now)
        #expect(replaced == before)
        #expect(ignored.decisions.map(\.code) == [.tokenGoneIgnored])

        var newer = Self.activity(.active, pending: .update)
        let kept = newer.receive(
            .tokenRejected(reason: "410 Unregistered", unregisteredAt: Fixtures.at(0)), for: Self.push(.update),
            now: Self.now)
        #expect(newer.phase == .active)
        #expect(newer.pending != nil)
        #expect(kept.decisions.map(\.code) == [.tokenGoneIgnored])
    }

    @Test("a gone token of an activity whose newer push waits withdraws that push")
    func tokenGoneWithdrawsTheNewer() {
        var activity = Self.activity(.active, pending: .update)
        let actions = activity.receive(
            .tokenRejected(reason: "410 Unregistered", unregisteredAt: nil), for: Self.push(.update, apnsID: "p0"),
            now: Self.now)
        #expect(activity.phase == .failed)
        #expect(actions.withdraw)
    }

    // MARK: - The sweeper's clock

    static let sweep = Policy.Sweep()

    @Test("active: ended near the 8-hour limit, or when idle that long; not in a channel, not before")
    func sweepActive() {
        let activity = Self.activity(.active, pending: nil)
        let started = activity.clockStart
        func end(after seconds: TimeInterval, idle: Bool, inChannel: Bool = false) -> Decision.Code? {
            var copy = inChannel ? Self.activity(.active, pending: nil, inChannel: true) : activity
            let (end, actions) = copy.sweep(Self.sweep, idle: idle, now: started.addingTimeInterval(seconds))
            #expect(actions == ActivityState.Actions())
            #expect(copy == (inChannel ? Self.activity(.active, pending: nil, inChannel: true) : activity))
            return end
        }
        let limit = Self.sweep.lifetime - Self.sweep.lifetimeMargin
        #expect(end(after: limit, idle: false) == .sweepLifetime)
        #expect(end(after: limit - 1, idle: false) == nil)
        #expect(end(after: Self.sweep.idleTimeout, idle: true) == .sweepIdle)
        #expect(end(after: Self.sweep.idleTimeout, idle: false) == nil)
        #expect(end(after: Self.sweep.idleTimeout - 1, idle: true) == nil)
        #expect(end(after: limit, idle: true, inChannel: true) == nil)
    }

    @Test("a scheduled start later than the start moves the clock to it")
    func sweepCountsFromTheScheduledStart() {
        var activity = Self.activity(.active, pending: nil)
        activity.scheduledStart = Fixtures.at(120)
        let limit = Self.sweep.lifetime - Self.sweep.lifetimeMargin
        let early = activity.sweep(Self.sweep, idle: false, now: Fixtures.at(1).addingTimeInterval(limit)).end
        #expect(early == nil)
        let due = activity.sweep(Self.sweep, idle: false, now: Fixtures.at(120).addingTimeInterval(limit)).end
        #expect(due == .sweepLifetime)
    }

    @Test("ending with nothing pending: the end is sent once more; with an end pending or a reason of its own, nothing")
    func sweepEnding() {
        for reason in [nil, CloseReason.endNotAccepted("400 BadPriority")] {
            var activity = Self.activity(.ending, pending: nil, reason: reason)
            let (end, actions) = activity.sweep(Self.sweep, idle: false, now: Self.now)
            #expect(end == nil)
            #expect(activity.closeReason == .decided(.sweepTerminalNotEnded))
            #expect(activity.phase == .ending)
            #expect(actions.decisions.map(\.code) == [.sweepTerminalNotEnded])
        }
        for activity in [
            Self.activity(.ending, pending: .end), Self.activity(.ending, pending: nil, reason: .decided(.sweepIdle)),
        ] {
            var copy = activity
            let (end, actions) = copy.sweep(Self.sweep, idle: true, now: Self.now)
            #expect(end == nil)
            #expect(actions.decisions.isEmpty)
            #expect(copy == activity)
        }
    }

    @Test("starting: given up once the app has not adopted it within the timeout")
    func sweepStarting() {
        var activity = Self.activity(.starting, pending: nil)
        let started = activity.clockStart
        _ = activity.sweep(Self.sweep, idle: false, now: started.addingTimeInterval(Self.sweep.adoptionTimeout - 1))
        #expect(activity.phase == .starting)
        let (_, actions) = activity.sweep(
            Self.sweep, idle: false, now: started.addingTimeInterval(Self.sweep.adoptionTimeout))
        #expect(activity.phase == .failed)
        #expect(activity.closeReason == .decided(.sweepNeverAdopted))
        #expect(actions.decisions.map(\.code) == [.sweepNeverAdopted])
    }

    @Test(
        "pending starts and final phases: the clock changes nothing",
        arguments: [
            ActivityState.Phase.pendingStart, .ended, .expired, .failed,
        ])
    func sweepLeavesAlone(_ phase: ActivityState.Phase) {
        let activity = Self.activity(phase, pending: nil)
        var copy = activity
        let (end, actions) = copy.sweep(Self.sweep, idle: true, now: Fixtures.at(24 * 60))
        #expect(end == nil)
        #expect(actions == ActivityState.Actions())
        #expect(copy == activity)
    }

    // MARK: - The app, the person and the order

    @Test("adopted: active from any phase, a pending start withdrawn, the first start time kept")
    func adopt() {
        var pending = Self.activity(.pendingStart, pending: .start)
        let actions = pending.adopt(activityID: "act-1", token: Self.token, now: Self.now)
        #expect(pending.phase == .active)
        #expect(pending.activityID == "act-1")
        #expect(pending.startedAt == Self.now)
        #expect(pending.pending == nil)
        #expect(actions.withdraw)

        var ending = Self.activity(.ending, pending: .end, reason: .decided(.sweepIdle))
        let kept = ending.adopt(activityID: "act-1", token: Self.token, now: Self.now)
        #expect(ending.phase == .active)
        #expect(ending.closeReason == nil)
        #expect(ending.startedAt == Fixtures.at(1))
        #expect(ending.pending?.kind == .end)
        #expect(!kept.withdraw)
    }

    @Test("the app's end: ended or expired with its reason, the pending push withdrawn; a final activity stays")
    func endedOnDevice() {
        var active = Self.activity(.active, pending: .update)
        let actions = active.endedOnDevice(.dismissedByUser, now: Self.now)
        #expect(active.phase == .ended)
        #expect(active.closeReason == .reportedByApp(.dismissedByUser))
        #expect(active.endedAt == Self.now)
        #expect(actions.withdraw)

        var expiring = Self.activity(.starting, pending: nil)
        let expired = expiring.endedOnDevice(.expired, now: Self.now)
        #expect(!expired.withdraw)
        #expect(expiring.phase == .expired)

        let failed = Self.activity(.failed, pending: nil, reason: .tokenGone("410"))
        var copy = failed
        let again = copy.endedOnDevice(.endedOnDevice, now: Self.now)
        #expect(again.decisions.map(\.code) == [.activityAlreadyFinal])
        #expect(copy == failed)
    }

    @Test("Live Activities off: ended as by the person; the order over first: the start withdrawn")
    func disabledAndWithdrawn() {
        var active = Self.activity(.active, pending: .update)
        let disabled = active.disable(device: "d1", now: Self.now)
        #expect(disabled.withdraw)
        #expect(active.phase == .ended)
        #expect(active.closeReason == .decided(.activitiesDisabled))

        var pending = Self.activity(.pendingStart, pending: .start)
        let actions = pending.withdrawStart(status: .cancelled, now: Self.now)
        #expect(actions.withdraw)
        #expect(pending.phase == .ended)
        #expect(pending.closeReason == .decided(.startWithdrawn))
        #expect(actions.decisions.map(\.code) == [.startWithdrawn])
    }

    @Test("an end planned makes the activity ending, with the sweeper's reason if it is one")
    func endPlanned() {
        var active = Self.activity(.active, pending: .end)
        active.endPlanned(sweep: .sweepLifetime)
        #expect(active.phase == .ending)
        #expect(active.closeReason == .decided(.sweepLifetime))
        var nothingPlanned = Self.activity(.active, pending: nil)
        nothingPlanned.endPlanned(sweep: nil)
        #expect(nothingPlanned.phase == .active)
        #expect(nothingPlanned.closeReason == nil)
    }

    @Test("its channel's end ends it (or fails it, when the channel vanished)")
    func endWithChannel() {
        var member = Self.activity(.active, pending: .update, inChannel: true)
        let withdrawn = member.endWithChannel(.endedByServer, failed: false, now: Self.now)
        #expect(withdrawn)
        #expect(member.phase == .ended)
        var gone = Self.activity(.active, pending: nil, inChannel: true)
        let nothingPending = gone.endWithChannel(.channelGone("400 ChannelNotRegistered"), failed: true, now: Self.now)
        #expect(!nothingPending)
        #expect(gone.phase == .failed)
        #expect(gone.closeReason == .channelGone("400 ChannelNotRegistered"))
    }
}
