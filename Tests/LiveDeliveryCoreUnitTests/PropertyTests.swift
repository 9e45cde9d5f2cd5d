import Foundation
import LiveDeliveryJSON
import LiveDeliveryTime
import PropertyBased
import Synchronization
import Testing

@testable import LiveDeliveryCore

/// One order's well-formed event stream: statuses moving forward (with repeats carrying new
/// details), at most one terminal status (the newest), the app's token report and maybe a rotation.
struct Scenario: CustomStringConvertible {
    var events: [InboundEvent]
    var context: TrackingContext
    var description: String {
        events.map { event in
            switch event {
            case .activitySettings(let e):
                "\(event.type):\(e.deviceID)(\(e.activitiesEnabled ? "on" : "off"))@\(RFC3339.format(e.occurredAt))"
            case .orderFollowers(let e): "\(event.type):\(e.followers)@\(RFC3339.format(e.occurredAt))"
            default: "\(event.type):\(event.eventID)"
            }
        }.joined(separator: " ") + " on file: \(context.pushToStartTokens.map(\.deviceID))"
    }

    init(seed: UInt64) {
        var rng = SplitMix64(seed: seed)
        let withSequence = Bool.random(using: &rng)
        let open: [OrderStatus] = [
            .placed, .confirmed, .preparing, .readyForPickup, .pickedUp, .outForDelivery, .arriving,
        ]
        var statuses: [OrderStatus] = open.filter { _ in Int.random(in: 0..<10, using: &rng) < 6 }
        if statuses.isEmpty { statuses = [open.randomElement(using: &rng)!] }
        var path: [OrderStatus] = []
        for status in statuses {
            path.append(status)
            while Int.random(in: 0..<4, using: &rng) == 0 { path.append(status) }
        }
        if Int.random(in: 0..<10, using: &rng) < 8 {
            path.append([.delivered, .cancelled, .deliveryFailed].randomElement(using: &rng)!)
        }
        var events: [InboundEvent] = []
        var minute = 0.0
        var eta = (40.0, 50.0)
        var courier: String?
        var tokenPlaced = false
        var rotation = Int.random(in: 0..<2, using: &rng) == 0
        for (index, status) in path.enumerated() {
            minute += Double(Int.random(in: 1...6, using: &rng))
            eta.1 += Double(Int.random(in: -3...15, using: &rng))
            eta.0 = min(eta.0 + Double(Int.random(in: -3...8, using: &rng)), eta.1)
            if status >= .pickedUp, courier == nil || Int.random(in: 0..<8, using: &rng) == 0 {
                courier = ["Sam", "Zoë", "李"].randomElement(using: &rng)!
            }
            let hasETA = status >= .preparing && Int.random(in: 0..<5, using: &rng) > 0
            events.append(
                Fixtures.status(
                    status.rawValue, seq: withSequence ? index + 1 : nil, minute: minute, id: "e\(index)",
                    courier: Int.random(in: 0..<6, using: &rng) > 0 ? courier : nil,
                    eta: hasETA ? eta : nil))
            if !tokenPlaced && (Policy().startOn.contains(status) || index == path.count - 1) {
                events.append(Fixtures.token(minute: minute + 0.5, id: "tok-1"))
                tokenPlaced = true
            } else if tokenPlaced && rotation {
                events.append(Fixtures.token(Fixtures.rotatedHex, minute: minute + 0.5, id: "tok-2"))
                rotation = false
            }
        }
        self.events = events
        self.context = TrackingContext(
            pushToStartTokens: Bool.random(using: &rng) ? [Fixtures.registration()] : [])
    }

    /// The events shuffled, with some delivered more than once.
    func delivery(seed: UInt64) -> [InboundEvent] {
        var rng = SplitMix64(seed: seed)
        var copies = events
        for _ in 0..<Int.random(in: 0...4, using: &rng) { copies.append(events.randomElement(using: &rng)!) }
        return copies.shuffled(using: &rng)
    }
}

/// Runs a delivery through the tracker with every push accepted (a channel's creation answered with its id),
/// the pushes those answers plan too; collects what was sent and what the phones show.
struct Replay {
    static let channelID = "Q0hBTk5FTC1BLTEwMDIzLTE="
    var state: OrderState
    var files: UserFiles
    var pushes: [PlannedPush] = []
    var phones = Phones()

    init(_ events: [InboundEvent], context: TrackingContext, tracker: OrderTracker) {
        let now = Fixtures.at(1000)
        state = OrderState(orderID: "A-10023", now: now)
        files = UserFiles(context)
        var created = false
        for event in events {
            guard let context = files.take(event, for: state, created: created) else { continue }
            created = true
            let step = tracker.apply(event, to: state, context: context, now: now)
            state = step.state
            phones.learn(event, files: files, state: state)
            var queue = step.pushes
            while !queue.isEmpty {
                let push = queue.removeFirst()
                pushes.append(push)
                let outcome: PushOutcome =
                    push.kind == .openChannel ? .channelCreated(channelID: Self.channelID) : .accepted
                phones.answered(push, outcome, state: state)
                let recorded = tracker.record(outcome, for: push, in: state, now: now)
                state = recorded.state
                queue.removeAll { pending in recorded.pushes.contains { $0.activityKey == pending.activityKey } }
                queue += recorded.pushes
            }
        }
    }

    /// What must converge: the order, and each activity's identity, phase, token and shown content.
    var converged: String {
        var lines = ["\(String(describing: state.record))"]
        for activity in state.activities.sorted(by: {
            ($0.deviceID ?? "", $0.activityID ?? "") < ($1.deviceID ?? "", $1.activityID ?? "")
        }) {
            lines.append(
                "\(activity.deviceID ?? "-") \(activity.activityID ?? "-") \(activity.phase) \(activity.updateToken?.token.hex ?? "-")"
                    + (activity.phase.isFinal ? "" : " \(activity.planned?.contentState ?? "-")"))
        }
        return lines.joined(separator: "\n")
    }
}

@Suite("Properties")
struct PropertyTests {
    let tracker = Fixtures.tracker()

    @Test func anyPermutationWithDuplicatesEndsInTheSameState() async {
        await propertyCheck(count: 300, input: Gen.int(in: 0...Int(Int32.max)), Gen.int(in: 0...Int(Int32.max))) {
            scenarioSeed, orderSeed in
            let scenario = Scenario(seed: UInt64(scenarioSeed))
            let inOrder = Replay(scenario.events, context: scenario.context, tracker: tracker)
            let shuffled = Replay(
                scenario.delivery(seed: UInt64(orderSeed)), context: scenario.context, tracker: tracker)
            #expect(shuffled.converged == inOrder.converged, "\(scenario)")
            // A non-final activity shows exactly the content of the converged order.
            if let record = shuffled.state.record {
                let content = JSONValue.object(tracker.configuration.mapping.contentState(for: record)).compactText
                for activity in shuffled.state.activities where !activity.phase.isFinal && activity.phase != .starting {
                    #expect(activity.planned?.contentState == content)
                }
            }
        }
    }

    /// The worker calls the tracker in place; tests and `render` by value: both give the same states and effects,
    /// for events, answers and retries alike.
    @Test func inPlaceCallsGiveWhatValueCallsGive() async {
        await propertyCheck(count: 200, input: Gen.int(in: 0...Int(Int32.max)), Gen.int(in: 0...Int(Int32.max))) {
            scenarioSeed, orderSeed in
            let scenario = Scenario(seed: UInt64(scenarioSeed))
            let now = Fixtures.at(1000)
            var state = OrderState(orderID: "A-10023", now: now)
            for (index, event) in scenario.delivery(seed: UInt64(orderSeed)).enumerated() {
                let step = tracker.apply(event, to: state, context: scenario.context, now: now)
                let effects = tracker.apply(event, updating: &state, context: scenario.context, now: now)
                #expect(state == step.state && effects == step.effects)
                for push in effects.pushes {
                    let outcome: PushOutcome = index % 3 == 0 ? .retryLater(reason: "TooManyRequests") : .accepted
                    let recorded = tracker.record(outcome, for: push, in: state, now: now)
                    #expect(tracker.record(outcome, for: push, updating: &state, now: now) == recorded.effects)
                    #expect(state == recorded.state)
                    let retried = tracker.retry(state, now: now)
                    #expect(tracker.retry(updating: &state, now: now) == retried.effects && state == retried.state)
                }
            }
        }
    }

    /// With the people around the order, which devices get an activity depends on what arrived before the order
    /// ended (a follower's token after the end starts nothing): the order converges, and whatever a phone still
    /// shows is the order's newest state.
    @Test(
        "with followers, their devices and settings, in any order: every phone still showing the order shows its newest state"
    )
    func withPeopleEveryPhoneShowsTheNewestState() async {
        await propertyCheck(count: 300, input: Gen.int(in: 0...Int(Int32.max)), Gen.int(in: 0...Int(Int32.max))) {
            scenarioSeed, orderSeed in
            let scenario = Scenario(seed: UInt64(scenarioSeed)).withPeople(seed: UInt64(scenarioSeed) ^ 0x5EED)
            let inOrder = Replay(scenario.events, context: scenario.context, tracker: tracker)
            let shuffled = Replay(
                scenario.delivery(seed: UInt64(orderSeed)), context: scenario.context, tracker: tracker)
            Self.checkNewestShown(shuffled, inOrder: inOrder, scenario: scenario, tracker: tracker)
        }
    }

    static func checkNewestShown(
        _ shuffled: Replay, inOrder: Replay, scenario: Scenario, tracker: OrderTracker
    ) {
        #expect(shuffled.state.record == inOrder.state.record, "\(scenario)")
        #expect(shuffled.state.followers == inOrder.state.followers, "\(scenario)")
        #expect(shuffled.phones.problems.isEmpty, "\(shuffled.phones.problems): \(scenario)")
        guard let record = shuffled.state.record else { return }
        let content = JSONValue.object(tracker.configuration.mapping.contentState(for: record)).compactText
        // A remotely started activity waits for the token its app reports (never, here) before it is updated; a
        // follower's in the channel gets the channel's broadcasts.
        for (key, shown) in shuffled.phones.activities.sorted(by: { $0.key < $1.key }) where !shown.ended {
            guard let activity = shuffled.state.activity(key), activity.phase != .starting else { continue }
            #expect(shown.content == content, "\(key) (\(activity.phase)) shows an older state: \(scenario)")
        }
        // Once the order is over, no phone shows it as running, but those the worker cannot reach (started and
        // never adopted: the system ends them).
        if record.isTerminal {
            let running = shuffled.phones.activities.filter { key, shown in
                !shown.ended && shuffled.state.activity(key)?.phase != .starting
            }
            #expect(running.isEmpty, "still running: \(running.keys.sorted()): \(scenario)")
        }
    }

    @Test func neverAnOlderStateAfterANewerOneAndNeverTwoAlertsPerStep() async {
        await propertyCheck(count: 300, input: Gen.int(in: 0...Int(Int32.max)), Gen.int(in: 0...Int(Int32.max))) {
            scenarioSeed, orderSeed in
            let scenario = Scenario(seed: UInt64(scenarioSeed)).withPeople(seed: UInt64(scenarioSeed) ^ 0x5EED)
            let replay = Replay(scenario.delivery(seed: UInt64(orderSeed)), context: scenario.context, tracker: tracker)
            #expect(replay.phones.problems.isEmpty, "\(replay.phones.problems): \(scenario)")
            var shown: [String: EventKey] = [:]
            var alerted: [String: Set<String>] = [:]
            var timestamps: [String: Int] = [:]
            // Every scenario reports a token: the loop has pushes to check, unless Live Activities are off there.
            #expect(!replay.pushes.isEmpty || scenario.turnsOff("iphone"), "\(scenario)")
            for push in replay.pushes where push.readByPhone {
                let device = push.activityKey
                if let previous = shown[device] {
                    #expect(
                        !previous.isNewer(than: push.statusKey),
                        "\(push.kind) showed \(push.statusKey) after \(previous)")
                }
                shown[device] = push.statusKey
                if push.alert != nil {
                    #expect(alerted[device, default: []].insert(push.step).inserted, "second alert for \(push.step)")
                }
                if let last = timestamps[device] { #expect(push.timestamp > last) }
                timestamps[device] = push.timestamp
                #expect(push.payload.count <= 4096)
                #expect((try? decodeApp(push)) != nil)
            }
        }
    }
}

/// A delivery through the tracker as the worker runs it: an outbox of one push per activity (a newer
/// push replaces an older one, a withdrawn start leaves), answered at random moments with 200, 429 (then
/// rebuilt by `retry`), 410 or a refusal, sweeps at random moments, and at the end every push left
/// answered 200 until nothing is left.
struct OutboxReplay {
    var state: OrderState
    var files: UserFiles
    /// Every push answered, in order, with its answer.
    var answered: [(push: PlannedPush, outcome: PushOutcome)] = []
    var outbox: [String: PlannedPush] = [:]
    var sweeps = 0
    var phones = Phones()
    /// For each acceptance ``OrderTracker/settledAcceptance(of:in:now:)`` settled: whether it gave the state recording
    /// it gave.
    var settledAsRecorded: [Bool] = []

    init(_ events: [InboundEvent], context: TrackingContext, tracker: OrderTracker, seed: UInt64) {
        var rng = SplitMix64(seed: seed)
        var minute = 1000.0
        state = OrderState(orderID: "A-10023", now: Fixtures.at(minute))
        files = UserFiles(context)
        var created = false
        for event in events {
            minute += Double(Int.random(in: 0...20, using: &rng))
            if let context = files.take(event, for: state, created: created) {
                created = true
                take(tracker.apply(event, to: state, context: context, now: Fixtures.at(minute)))
                phones.learn(event, files: files, state: state)
            }
            if Int.random(in: 0..<3, using: &rng) == 0 {
                dispatch(tracker: tracker, now: Fixtures.at(minute), rng: &rng)
            }
            if Int.random(in: 0..<6, using: &rng) == 0 {
                minute += Double(Int.random(in: 30...600, using: &rng))
                let context = files.context(for: state)
                take(tracker.sweep(state, context: context, now: Fixtures.at(minute)))
                phones.learn(context)
                sweeps += 1
            }
        }
        var rounds = 0
        while !outbox.isEmpty && rounds < 50 {
            minute += 1
            var accept = SplitMix64(seed: 0)
            dispatch(tracker: tracker, now: Fixtures.at(minute), rng: &accept, alwaysAccept: true)
            rounds += 1
        }
    }

    private mutating func take(_ step: Step) {
        state = step.state
        files.retire(step.retiredPushToStartTokens)
        for key in step.withdrawn { outbox[key] = nil }
        for push in step.pushes { outbox[push.activityKey] = push }
    }

    private mutating func dispatch(
        tracker: OrderTracker, now: Date, rng: inout SplitMix64, alwaysAccept: Bool = false
    ) {
        // As the dispatcher claims them: due first.
        let due = outbox.values.sorted { ($0.notBefore, $0.activityKey) < ($1.notBefore, $1.activityKey) }
        for key in due.map(\.activityKey) {
            guard let push = outbox.removeValue(forKey: key) else { continue }
            let outcome: PushOutcome
            switch alwaysAccept ? 0 : Int.random(in: 0..<10, using: &rng) {
            case 0..<6:
                outcome = push.kind == .openChannel ? .channelCreated(channelID: Replay.channelID) : .accepted
            case 6, 7: outcome = .retryLater(reason: "TooManyRequests")
            case 8:
                outcome = .tokenRejected(
                    reason: push.isChannelRequest ? "ChannelNotRegistered" : "Unregistered", unregisteredAt: nil)
            default:
                outcome = .dropped(
                    reason: push.kind == .openChannel ? "400 CannotCreateChannelConfig" : "PayloadTooLarge")
            }
            answered.append((push, outcome))
            phones.answered(push, outcome, state: state)
            let at = max(now, push.notBefore)
            let recorded = tracker.record(outcome, for: push, in: state, now: at)
            // Where the worker writes an acceptance as the update's id alone, settling it must be recording it.
            if outcome == .accepted, let settled = tracker.settledAcceptance(of: push, in: state, now: at) {
                settledAsRecorded.append(
                    settled == recorded.state && recorded.pushes.isEmpty && recorded.withdrawn.isEmpty
                        && recorded.retiredPushToStartTokens.isEmpty)
            }
            take(recorded)
            if case .retryLater = outcome { take(tracker.retry(state, now: now)) }
        }
    }

    var accepted: [PlannedPush] { answered.filter { $0.outcome == .accepted }.map(\.push) }
}

extension Scenario {
    /// The scenario with a second device: an activity the app reports on an iPad and, half the time, a
    /// push-to-start token on a third device.
    func withMoreDevices(seed: UInt64) -> Scenario {
        var rng = SplitMix64(seed: seed)
        var scenario = self
        let at = Double(Int.random(in: 1...40, using: &rng))
        scenario.events.append(
            Fixtures.token(
                String(repeating: "d4", count: 32), minute: at, id: "tok-ipad", activity: "ACT-2", device: "ipad"))
        if Bool.random(using: &rng) {
            scenario.context.pushToStartTokens.append(
                Fixtures.registration(device: "watch", hex: String(repeating: "e5", count: 32)))
        }
        return scenario
    }
}

@Suite("Properties with answers, devices and sweeps")
struct OutboxPropertyTests {
    let tracker = Fixtures.tracker()

    @Test("whatever APNs answers and whenever the sweeper runs, what a device shows only moves forward")
    func answersDevicesAndSweeps() async {
        await propertyCheck(
            count: 300, input: Gen.int(in: 0...Int(Int32.max)), Gen.int(in: 0...Int(Int32.max)),
            Gen.int(in: 0...Int(Int32.max))
        ) { scenarioSeed, orderSeed, answerSeed in
            check(scenarioSeed, orderSeed, answerSeed)
        }
    }

    /// One input of the property: the scenario, its delivery and APNs' answers from three seeds, replayed and checked.
    func check(_ scenarioSeed: Int, _ orderSeed: Int, _ answerSeed: Int) {
        let scenario = Scenario(seed: UInt64(scenarioSeed)).withMoreDevices(seed: UInt64(orderSeed))
            .withPeople(seed: UInt64(answerSeed))
        let replay = OutboxReplay(
            scenario.delivery(seed: UInt64(orderSeed)), context: scenario.context, tracker: tracker,
            seed: UInt64(answerSeed))
        Self.check(replay, scenario)
        #expect(!replay.settledAsRecorded.contains(false), "settling an accepted update differs from recording it")
    }

    /// The acceptances the worker settles by id alone happen in these replays, and each gives the recorded state.
    @Test func acceptedUpdatesSettledByIDAreRecorded() {
        var checked = 0
        for seed in 0..<40 {
            let scenario = Scenario(seed: UInt64(seed)).withMoreDevices(seed: UInt64(seed))
            let replay = OutboxReplay(
                scenario.delivery(seed: UInt64(seed)), context: scenario.context, tracker: tracker, seed: UInt64(seed))
            #expect(!replay.settledAsRecorded.contains(false), "seed \(seed)")
            checked += replay.settledAsRecorded.count
        }
        #expect(checked >= 20)
    }

    /// An input the random property check found (in CI): a follower's start into the order's broadcast channel,
    /// retried under 429s within one second, carried a timestamp held a few seconds ahead; the channel's end
    /// broadcast then took only the channel's own last timestamp and the clock, so it was older than the start
    /// the phone showed, and the phone kept the older content. Pins that a push to an activity in the channel
    /// and the channel's broadcasts run on one clock (`OrderTracker.newestShown(by:in:)`).
    @Test("regression: a channel's end is timed after the start its follower's phone shows")
    func channelEndAfterAFollowersHeldStart() {
        check(558_826_255, 1_089_375_565, 1_294_472_796)
    }

    /// Every answered push as the phones see it.
    static func check(_ replay: OutboxReplay, _ scenario: Scenario) {
        // The loops below must have something to check: the iPad's activity is always pushed to, unless Live
        // Activities are off there.
        #expect(!replay.answered.isEmpty || scenario.turnsOff("ipad"), "\(scenario)")
        #expect(replay.outbox.isEmpty, "the outbox drains")

        var shown: [String: EventKey] = [:]
        var timestamps: [String: Int] = [:]
        var alerted: [String: Set<String>] = [:]
        var starts: [String: Int] = [:]
        var ends: [String: Int] = [:]
        var rejected: Set<String> = []
        for (push, outcome) in replay.answered where push.readByPhone {
            let activity = push.activityKey
            if let token = push.deviceToken?.hex {
                #expect(!rejected.contains(token), "a push to a token APNs said is gone")
            }
            if let last = timestamps[activity] { #expect(push.timestamp > last, "timestamps increase") }
            timestamps[activity] = push.timestamp
            switch outcome {
            case .accepted:
                #expect(ends[activity, default: 0] == 0, "\(push.kind) after the activity's end")
                if let previous = shown[activity] {
                    #expect(!previous.isNewer(than: push.statusKey), "\(push.statusKey) after \(previous)")
                }
                shown[activity] = push.statusKey
                if push.alert != nil {
                    #expect(
                        alerted[activity, default: []].insert(push.step).inserted, "two alerts for \(push.step)")
                }
                if push.kind == .start { starts[activity, default: 0] += 1 }
                if push.kind == .end { ends[activity, default: 0] += 1 }
            case .tokenRejected:
                if let token = push.deviceToken?.hex { rejected.insert(token) }
            default:
                break
            }
            #expect(push.payload.count <= 4096)
            #expect((try? decodeApp(push)) != nil)
        }
        #expect(starts.values.allSatisfy { $0 <= 1 }, "one start per order and device: \(starts)")
        #expect(ends.values.allSatisfy { $0 <= 1 }, "ended once: \(ends)")
        #expect(replay.phones.problems.isEmpty, "\(replay.phones.problems): \(scenario)")
    }
}

extension PlannedPush {
    /// A start, update or end: what a phone reads. A channel's creation and deletion are requests to APNs.
    var readByPhone: Bool {
        switch kind {
        case .start, .update, .end: true
        case .openChannel, .closeChannel: false
        }
    }
}

/// What the worker files per user beside the order, as `EventProcessor` does (push-to-start tokens and device
/// settings, the newest report per device winning, a token APNs said is gone retired until a newer one), and the
/// context it reads from them for the order (`TrackingContext(order:…)`, as `EventsPlan` and the sweeper do).
/// The inbox is modelled for what reaches users: a duplicate report is neither filed nor applied again.
struct UserFiles {
    private(set) var tokens: [String: [(registration: PushToStartRegistration, retired: Bool)]] = [:]
    private(set) var settings: [String: [String: DeviceSettings]] = [:]
    private var seen: Set<String> = []

    init(_ context: TrackingContext) {
        for registration in context.pushToStartTokens { file(registration) }
        for settings in context.deviceSettings.values { file(settings) }
    }

    mutating func file(_ registration: PushToStartRegistration) {
        var list = tokens[registration.userID, default: []]
        if let index = list.firstIndex(where: { $0.registration.deviceID == registration.deviceID }) {
            guard registration.key.isNewer(than: list[index].registration.key) else { return }
            list[index] = (registration, false)
        } else {
            list.append((registration, false))
        }
        tokens[registration.userID] = list
    }

    mutating func file(_ report: DeviceSettings) {
        if let filed = settings[report.userID]?[report.deviceID], !report.key.isNewer(than: filed.key) { return }
        settings[report.userID, default: [:]][report.deviceID] = report
    }

    mutating func retire(_ registrations: [PushToStartRegistration]) {
        for gone in registrations {
            tokens[gone.userID] = tokens[gone.userID]?.map { entry in
                (entry.registration, entry.retired || entry.registration.token == gone.token)
            }
        }
    }

    /// The order's context now; `event` is the event being applied (an `order.followers` adds its people).
    func context(for state: OrderState, event: InboundEvent? = nil) -> TrackingContext {
        var joining: [String] = []
        if case .orderFollowers(let e)? = event { joining = e.followers }
        var open: [String: Int] = [:]
        if let channel = state.channel, let app = channel.broadcast?.app, !channel.phase.isFinal { open[app] = 1 }
        return TrackingContext(
            order: state, userID: state.record?.userID ?? event?.userID, joining: joining,
            tokens: tokens.mapValues { $0.filter { !$0.retired }.map(\.registration) }, settings: settings,
            openChannels: open)
    }

    /// Files a user's report (once); returns the context to apply `event` to the order with, or nil when it does
    /// not reach the order: a duplicate report, or one whose user neither owns nor follows the open order.
    mutating func take(_ event: InboundEvent, for state: OrderState, created: Bool) -> TrackingContext? {
        if event.reachesUser {
            guard seen.insert(event.eventID).inserted else { return nil }
            switch event {
            case .pushToStartToken(let e): file(e.registration)
            case .activitySettings(let e): file(e.settings)
            default: break
            }
            guard let user = event.userID, !state.isSettled,
                state.record?.userID == user || (created && state.followers.contains(user))
            else { return nil }
        }
        return context(for: state, event: event)
    }
}

/// What the phones show, push by push, as ActivityKit would: each activity the worker started or the app
/// reported (by activity key), the newest status and `aps.timestamp` it applied, whether it ended, and the
/// broadcast channel it was started into. A broadcast reaches every activity of its channel that has not ended; a
/// device whose Live Activities the worker has been told are off has its activities ended by the system.
/// Records what a correct worker never causes: an older state after a newer one, a push the phone drops for its
/// timestamp, anything after an end, a second start on a device for the order, a start on a device with Live
/// Activities off, a push to a token APNs said is gone.
struct Phones {
    struct Activity {
        var device: String?
        var channel: String?
        var status: EventKey?
        var content: String?
        var timestamp: Int?
        var ended = false
    }
    private(set) var activities: [String: Activity] = [:]
    private(set) var starts: [String: Int] = [:]
    private(set) var problems: [String] = []
    private var off: Set<String> = []
    private var gone: Set<String> = []

    /// The settings the tracker has been told with the event just applied (or a sweep's context).
    mutating func learn(_ event: InboundEvent?, files: UserFiles, state: OrderState) {
        learn(files.context(for: state, event: event))
    }

    mutating func learn(_ context: TrackingContext) {
        for (device, settings) in context.deviceSettings {
            guard !settings.activitiesEnabled else {
                off.remove(device)
                continue
            }
            guard off.insert(device).inserted else { continue }
            for key in activities.keys where activities[key]?.device == device { activities[key]?.ended = true }
        }
    }

    mutating func answered(_ push: PlannedPush, _ outcome: PushOutcome, state: OrderState) {
        if let token = push.deviceToken?.hex, gone.contains(token) {
            problems.append("\(push.kind) to \(push.activityKey) on a token APNs said is gone")
        }
        switch outcome {
        case .accepted, .channelCreated: break
        case .tokenRejected:
            if let token = push.deviceToken?.hex { gone.insert(token) }
            return
        default: return
        }
        switch push.kind {
        case .openChannel, .closeChannel: return
        case .start, .update, .end: break
        }
        if push.activityKey == OrderTracker.channelKey {
            guard let channel = push.channelID ?? push.header("apns-channel-id") else {
                problems.append("a broadcast \(push.kind) without a channel")
                return
            }
            for key in activities.keys.sorted() where activities[key]?.channel == channel {
                if activities[key]?.ended == false { show(push, on: key) }
            }
            return
        }
        let key = push.activityKey
        let device = state.activity(key)?.deviceID
        if push.kind == .start {
            if let device {
                starts[device, default: 0] += 1
                if starts[device, default: 0] > 1 { problems.append("a second start on device \(device)") }
                if off.contains(device) {
                    // The phone starts nothing.
                    problems.append("a start on device \(device), whose Live Activities are off")
                    activities[key] = Activity(device: device, ended: true)
                    return
                }
                if activities.contains(where: { $0.key != key && $0.value.device == device && !$0.value.ended }) {
                    problems.append("a start on device \(device), which already shows the order")
                }
            }
            let aps = (try? JSONSerialization.jsonObject(with: Data(push.payload)) as? [String: Any])?["aps"]
            activities[key] = Activity(
                device: device, channel: (aps as? [String: Any])?["input-push-channel"] as? String)
        } else if activities[key] == nil {
            // The app's own activity, reported with its token: on the phone before its first push.
            activities[key] = Activity(device: device)
        }
        show(push, on: key)
    }

    private mutating func show(_ push: PlannedPush, on key: String) {
        guard var activity = activities[key] else { return }
        guard !activity.ended else {
            problems.append("\(push.kind) showing \(push.status) to \(key) after its end")
            return
        }
        if let shown = activity.status, shown.isNewer(than: push.statusKey) {
            problems.append("\(key) shown \(push.statusKey) after \(shown)")
        }
        // ActivityKit keeps what it shows when a push's timestamp is older (an end still ends): harmless when the
        // content is the same, a lost state when it is not.
        if let timestamp = activity.timestamp, push.timestamp < timestamp {
            if push.mark.contentState != activity.content {
                problems.append(
                    "\(key) keeps its older content: the \(push.kind) with \(push.statusKey) has timestamp "
                        + "\(push.timestamp), before the \(timestamp) shown")
            }
        } else {
            activity.status = push.statusKey
            activity.content = push.mark.contentState
            activity.timestamp = push.timestamp
        }
        if push.kind == .end { activity.ended = true }
        activities[key] = activity
    }
}

extension Scenario {
    /// The scenario with the people around the order: 0–3 followers (`order.followers`, reported once, and a
    /// third of the time changed by a later report, which may list the order's own user), their phones and
    /// tablets with push-to-start tokens (on file from the start, or reported on the way and sometimes replaced),
    /// and up to three settings reports (`activity.settings`): frequent updates on or off, and Live Activities
    /// turned off (after the device's last token report, as a phone would) or on.
    func withPeople(seed: UInt64) -> Scenario {
        var rng = SplitMix64(seed: seed)
        var scenario = self
        func minute(_ event: InboundEvent) -> Double { event.occurredAt.timeIntervalSince(Fixtures.t0) / 60 }
        let span = max(events.map(minute).max() ?? 0, 1)
        func someMinute(after start: Double = 0) -> Double {
            start + Double(Int.random(in: 1...Int(max(span - start, 1)) + 10, using: &rng))
        }
        var added: [InboundEvent] = []
        var owners: [String: String] = ["iphone": "u-991"]  // device → user
        for event in events {
            if case .activityToken(let e) = event, let device = e.deviceID { owners[device] = "u-991" }
        }
        for registration in context.pushToStartTokens { owners[registration.deviceID] = registration.userID }

        // Followers and their devices.
        let people = ["u-f0", "u-f1", "u-f2"].shuffled(using: &rng)
        let count = Int.random(in: 0...3, using: &rng)
        var tokenIndex = 0
        for (index, user) in people.enumerated() {
            for device in ["\(user)-phone", "\(user)-pad"].prefix(Int.random(in: 1...2, using: &rng)) {
                owners[device] = user
                tokenIndex += 1
                let hex = String(repeating: String(format: "%02x", 0x40 + tokenIndex), count: 32)
                let reported = index >= count || Bool.random(using: &rng)
                if reported {
                    added.append(Self.pushToStart(user: user, device: device, hex: hex, minute: someMinute()))
                } else {
                    scenario.context.pushToStartTokens.append(
                        Fixtures.followerRegistration(user, device: device, hex: hex))
                }
                if Int.random(in: 0..<5, using: &rng) == 0 {
                    let replaced = String(repeating: String(format: "%02x", 0x80 + tokenIndex), count: 32)
                    added.append(
                        Self.pushToStart(user: user, device: device, hex: replaced, minute: someMinute(after: span / 2))
                    )
                }
            }
        }
        if count > 0 || Bool.random(using: &rng) {
            let first = Array(people.prefix(count)).sorted()
            let at = someMinute()
            added.append(Fixtures.followers(first, minute: at, id: "evt-followers-1"))
            if Int.random(in: 0..<3, using: &rng) == 0 {
                var next = (people + ["u-991"]).filter { _ in Bool.random(using: &rng) }
                next.sort()
                added.append(Fixtures.followers(next, minute: someMinute(after: at), id: "evt-followers-2"))
            }
        }

        // The people's settings.
        let devices = owners.keys.sorted()
        for index in 0..<Int.random(in: 0...3, using: &rng) {
            let device = devices.randomElement(using: &rng)!
            let enabled = Int.random(in: 0..<10, using: &rng) < 6
            // Live Activities turned off after the device's last token report: the app reports no token then.
            let lastToken =
                events.compactMap { event -> Double? in
                    guard case .activityToken(let e) = event, e.deviceID == device else { return nil }
                    return minute(event)
                }.max() ?? 0
            added.append(
                Self.settings(
                    user: owners[device]!, device: device, activities: enabled, frequent: Bool.random(using: &rng),
                    minute: enabled ? someMinute() : someMinute(after: lastToken), id: "evt-settings-\(index)"))
        }
        // In the order they happened (ties keep the scenario's order).
        scenario.events = (events + added).enumerated().sorted {
            (minute($0.element), $0.offset) < (minute($1.element), $1.offset)
        }.map(\.element)
        return scenario
    }

    /// Whether a settings report turns Live Activities off on `device`.
    func turnsOff(_ device: String) -> Bool {
        events.contains { event in
            guard case .activitySettings(let e) = event else { return false }
            return e.deviceID == device && !e.activitiesEnabled
        }
    }

    static func pushToStart(user: String, device: String, hex: String, minute: Double) -> InboundEvent {
        Fixtures.decode([
            "type": "activity.push_to_start_token", "version": 1, "event_id": "evt-p2s-\(device)-\(hex.prefix(2))",
            "occurred_at": Fixtures.iso(minute), "user_id": user, "device_id": device, "token": hex,
            "bundle_id": "com.example.pizza", "environment": "sandbox", "attributes_type": "DeliveryAttributes",
        ])
    }

    static func settings(
        user: String, device: String, activities: Bool, frequent: Bool, minute: Double, id: String
    ) -> InboundEvent {
        Fixtures.decode([
            "type": "activity.settings", "version": 1, "event_id": id, "occurred_at": Fixtures.iso(minute),
            "user_id": user, "device_id": device, "activities_enabled": activities,
            "frequent_pushes_enabled": frequent,
        ])
    }
}
