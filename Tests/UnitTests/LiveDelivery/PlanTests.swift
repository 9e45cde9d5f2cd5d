import APNs
import Foundation
import LiveDeliveryCore
import TestSupport
import Testing

@testable import LiveDelivery

/// The consumer's and the dispatcher's decisions, made without a server from what they read: a batch of
/// events (``EventsPlan``) and a group of APNs' answers (``AnswersPlan``).
@Suite("Plans")
struct PlanTests {
    static let now = Date(timeIntervalSince1970: 1_795_000_000)

    static func tracker() throws -> OrderTracker {
        let config = TestEnvironment.projectRoot.appendingPathComponent("Config")
        return OrderTracker(
            configuration: try DefaultConfiguration.load(
                policyJSON: Array(try Data(contentsOf: config.appendingPathComponent("policy.json"))),
                mappingJSON: Array(try Data(contentsOf: config.appendingPathComponent("content-mapping.json")))))
    }

    static func events(_ messages: [InboundMessage]) throws -> [InboundEvent] {
        try messages.map { message in
            try EventDecoder.decode(message.body, routingKey: message.routingKey).get()
        }
    }

    /// An order with an app-started activity whose first status was accepted, and the plan of one more
    /// status for it: its state written and one update push.
    static func orderWithUpdate(
        _ tracker: OrderTracker, order: String = "o-1"
    ) throws -> (
        stored: OrderState, change: OrderChange
    ) {
        let opening = EventsPlan(
            try events([
                Events.activityToken(order, activity: "a-\(order)", token: String(repeating: "ab", count: 32)),
                Events.status(order, "confirmed", sequence: 1),
            ]), stored: [:], ordersOfUser: [:], tokens: [:], startLimit: StartLimit(maximum: 5), tracker: tracker,
            now: now)
        var stored = try #require(opening.changes[order]).state
        for push in try #require(opening.changes[order]).orderedPushes {
            stored = tracker.record(.accepted, for: push, in: stored, now: now).state
        }
        let update = EventsPlan(
            try events([Events.status(order, "preparing", sequence: 2, eta: .sample)]), stored: [order: stored],
            ordersOfUser: [:], tokens: [:], startLimit: StartLimit(maximum: 5), tracker: tracker, now: now)
        return (stored, try #require(update.changes[order]))
    }

    /// The answers to the changes' pushes, claimed at generation `claimed` (0: handed over without a row), and
    /// their outbox rows at `generation` (nil: none).
    static func answers(
        _ changes: [OrderChange], outcome: (PlannedPush) -> APNsOutcome, claimed: Int64 = 1, generation: Int64? = 1
    ) -> (sent: [PushDispatcher.Sent], outbox: [Outbox.Key: Outbox.LockedRow]) {
        var sent: [PushDispatcher.Sent] = []
        var outbox: [Outbox.Key: Outbox.LockedRow] = [:]
        for change in changes {
            for push in change.orderedPushes {
                let claim = Outbox.Claim(
                    orderID: change.state.orderID, activityKey: push.activityKey, generation: claimed, attempts: 1,
                    push: push)
                sent.append(PushDispatcher.Sent(claim: claim, outcome: outcome(push), latency: .milliseconds(5)))
                if let generation {
                    outbox[Outbox.Key(orderID: change.state.orderID, activityKey: push.activityKey)] =
                        Outbox.LockedRow(generation: generation, row: "(0,\(sent.count))")
                }
            }
        }
        return (sent, outbox)
    }

    static func plan(
        _ changes: [OrderChange], tracker: OrderTracker, claimed: Int64 = 1, generation: Int64? = 1,
        outcome: (PlannedPush) -> APNsOutcome
    ) -> AnswersPlan {
        let (sent, outbox) = answers(changes, outcome: outcome, claimed: claimed, generation: generation)
        var stored: [String: OrderState] = [:]
        var versions: [String: Int64] = [:]
        for change in changes {
            stored[change.state.orderID] = change.state
            versions[change.state.orderID] = 7
        }
        return AnswersPlan(
            sent, stored: stored, versions: versions, outbox: outbox, tracker: tracker,
            rules: PushSettlement.Rules(WorkerConfiguration.Dispatcher()), jitter: { 1 }, now: now)
    }

    @Test("a status plans its order's new state, one update push, and its decisions")
    func eventsPlanned() throws {
        let tracker = try Self.tracker()
        let (stored, change) = try Self.orderWithUpdate(tracker)
        #expect(change.original == stored)
        #expect(change.changed)
        #expect(change.orderedPushes.map(\.kind) == [.update])
        #expect(!change.decisions.isEmpty)
    }

    @Test("each push carries the trace of the event that set its content")
    func tracesCarried() throws {
        let tracker = try Self.tracker()
        let (stored, _) = try Self.orderWithUpdate(tracker)
        let message = Events.status("o-1", "picked_up", sequence: 3, eta: .sample)
        let event = try #require(try Self.events([message]).first)
        let trace = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
        let plan = EventsPlan(
            [event], stored: ["o-1": stored], ordersOfUser: [:], tokens: [:], startLimit: StartLimit(maximum: 5),
            traces: [event.eventID: trace], orderTraces: ["o-1": trace], tracker: tracker, now: Self.now)
        #expect(try #require(plan.changes["o-1"]).orderedPushes.map(\.traceParent) == [trace])
    }

    @Test("a delivered current update is folded: its activity row alone, with its apns-id, and its outbox row deleted")
    func deliveredFolded() throws {
        let tracker = try Self.tracker()
        let (_, change) = try Self.orderWithUpdate(tracker)
        let plan = Self.plan([change], tracker: tracker) { .delivered(apnsID: UUIDText.parse($0.apnsID)!) }
        #expect(plan.changes.isEmpty)
        #expect(plan.delivered.map(\.orderID) == ["o-1"])
        #expect(plan.delivered.first?.apnsIDs == change.orderedPushes.map(\.apnsID))
        #expect(plan.delivered.first?.version == 7)
        #expect(plan.settled == ["(0,1)"] && plan.released.isEmpty)
        #expect(plan.pauses.isEmpty && plan.notes.isEmpty)
        #expect(plan.ages.count == 1)
    }

    @Test("a delivered update whose outbox row is gone is recorded in full, as recording gives it")
    func deliveredWithoutRowRecorded() throws {
        let tracker = try Self.tracker()
        let (_, change) = try Self.orderWithUpdate(tracker)
        let (sent, _) = Self.answers([change], outcome: { .delivered(apnsID: UUIDText.parse($0.apnsID)!) })
        let plan = AnswersPlan(
            sent, stored: ["o-1": change.state], versions: ["o-1": 7], outbox: [:], tracker: tracker,
            rules: PushSettlement.Rules(WorkerConfiguration.Dispatcher()), jitter: { 1 }, now: Self.now)
        let push = try #require(change.orderedPushes.first)
        #expect(plan.delivered.isEmpty && plan.settled.isEmpty)
        #expect(
            plan.changes["o-1"]?.state == tracker.record(.accepted, for: push, in: change.state, now: Self.now).state)
    }

    @Test("a push replaced while in flight: recorded, its row released as replaced, nothing folded")
    func replacedReleased() throws {
        let tracker = try Self.tracker()
        let (_, change) = try Self.orderWithUpdate(tracker)
        let plan = Self.plan([change], tracker: tracker, generation: 2) {
            .delivered(apnsID: UUIDText.parse($0.apnsID)!)
        }
        #expect(plan.delivered.isEmpty && plan.settled.isEmpty)
        #expect(plan.changes["o-1"] != nil)
        #expect(plan.released.map(\.replaced) == [true])
    }

    @Test("token gone: the activity fails in full, the row goes, the note names the order")
    func tokenGone() throws {
        let tracker = try Self.tracker()
        let (_, change) = try Self.orderWithUpdate(tracker)
        let plan = Self.plan([change], tracker: tracker) { _ in
            .tokenGone(reason: .unregistered, unregisteredAt: nil)
        }
        #expect(plan.delivered.isEmpty)
        let recorded = try #require(plan.changes["o-1"])
        #expect(recorded.state.activities.map(\.phase) == [.failed])
        #expect(plan.settled == ["(0,1)"])
        #expect(plan.notes.first?.metadata[LiveDeliveryLoggingKeys.orderID] == "o-1")
    }

    @Test("a configuration fault pauses the app once per group, says so once, and releases every row uncounted")
    func pausedOnce() throws {
        let tracker = try Self.tracker()
        let first = try Self.orderWithUpdate(tracker, order: "o-1").change
        let second = try Self.orderWithUpdate(tracker, order: "o-2").change
        let plan = Self.plan([first, second], tracker: tracker) { _ in
            .configurationFault(reason: .badTopic, status: 400)
        }
        #expect(plan.pauses.map(\.bundleID) == [Events.bundleID])
        #expect(plan.notes.count == 1)
        #expect(plan.notes.first?.metadata[LiveDeliveryLoggingKeys.bundleID] == Events.bundleID)
        #expect(plan.released.map(\.uncounted) == [true, true])
        #expect(plan.changes.isEmpty && plan.delivered.isEmpty && plan.settled.isEmpty)
    }

    @Test("a push handed over without a row, delivered: folded as any other, and no row to delete")
    func handedDelivered() throws {
        let tracker = try Self.tracker()
        let (_, change) = try Self.orderWithUpdate(tracker)
        let plan = Self.plan([change], tracker: tracker, claimed: 0, generation: nil) {
            .delivered(apnsID: UUIDText.parse($0.apnsID)!)
        }
        #expect(plan.changes.isEmpty)
        #expect(plan.delivered.first?.apnsIDs == change.orderedPushes.map(\.apnsID))
        #expect(plan.settled.isEmpty && plan.released.isEmpty && plan.kept.isEmpty)
    }

    @Test("a push handed over without a row, while a newer one waits held in the outbox: that row is released")
    func handedReleasesHeld() throws {
        let tracker = try Self.tracker()
        let (_, change) = try Self.orderWithUpdate(tracker)
        let plan = Self.plan([change], tracker: tracker, claimed: 0, generation: 1) {
            .delivered(apnsID: UUIDText.parse($0.apnsID)!)
        }
        #expect(plan.released.map(\.replaced) == [true])
        #expect(plan.settled.isEmpty && plan.delivered.isEmpty)
    }

    @Test("a push handed over without a row, to retry: its retry's row starts with that send counted")
    func handedRetried() throws {
        let tracker = try Self.tracker()
        let (_, change) = try Self.orderWithUpdate(tracker)
        let plan = Self.plan([change], tracker: tracker, claimed: 0, generation: nil) { _ in
            .retryLater(reason: .tooManyRequests, status: 429, after: .seconds(1))
        }
        let recorded = try #require(plan.changes["o-1"])
        let key = try #require(change.orderedPushes.first).activityKey
        #expect(recorded.pushes[key] != nil)
        #expect(recorded.attempts[key] == 1)
        #expect(plan.released.isEmpty && plan.kept.isEmpty)
    }

    @Test("a push handed over without a row, kept for a paused app: it goes to the outbox unchanged")
    func handedKept() throws {
        let tracker = try Self.tracker()
        let (_, change) = try Self.orderWithUpdate(tracker)
        let plan = Self.plan([change], tracker: tracker, claimed: 0, generation: nil) { _ in
            .configurationFault(reason: .badTopic, status: 400)
        }
        #expect(plan.kept.map(\.push) == change.orderedPushes)
        #expect(plan.changes.isEmpty && plan.released.isEmpty)
        #expect(try plan.outboxWrites().count == 1)
    }

    @Test("the hand-off: a due silent update of an activity with nothing pending goes without a row, if slots allow")
    func handOffChosen() throws {
        let tracker = try Self.tracker()
        let (_, update) = try Self.orderWithUpdate(tracker, order: "o-1")
        let (_, other) = try Self.orderWithUpdate(tracker, order: "o-2")
        let lease = OrderStore.Writes.Lease(slots: 1, holdSeconds: 60)
        // A moment later: an update may wait for the next second (timestamps strictly increase).
        let now = Self.now.addingTimeInterval(5)
        #expect(OrderStore.Writes.duePushes([update, other], now: now) == 2)
        let writes = try OrderStore.Writes(
            [update, other], kind: "event", lease: lease, delivered: [], leading: [], sweepColumn: .keepEarlier,
            now: now)
        // One slot: the first order's update only.
        #expect(writes.handed.map(\.orderID) == ["o-1"])
        let none = try OrderStore.Writes(
            [update], kind: "event", lease: .none, delivered: [], leading: [], sweepColumn: .keepEarlier, now: now)
        #expect(none.handed.isEmpty)
        // Its activity's previous push still pending (not answered): no hand-off, the row is held instead.
        var pending = update
        pending.original = update.state
        let held = try OrderStore.Writes(
            [pending], kind: "event", lease: lease, delivered: [], leading: [], sweepColumn: .keepEarlier, now: now)
        #expect(held.handed.isEmpty)
    }
}
