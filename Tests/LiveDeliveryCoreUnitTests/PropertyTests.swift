import Foundation
import LiveDeliveryJSON
import PropertyBased
import Testing

@testable import LiveDeliveryCore

/// One order's well-formed event stream: statuses moving forward (with repeats carrying new
/// details), at most one terminal status (the newest), the app's token report and maybe a rotation.
struct Scenario: CustomStringConvertible {
    var events: [InboundEvent]
    var context: TrackingContext
    var description: String { events.map { "\($0.type):\($0.eventID)" }.joined(separator: " ") }

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

/// Runs a delivery through the tracker with every push accepted; collects what was sent.
struct Replay {
    var state: OrderState
    var pushes: [PlannedPush] = []

    init(_ events: [InboundEvent], context: TrackingContext, tracker: OrderTracker) {
        let now = Fixtures.at(1000)
        state = OrderState(orderID: "A-10023", now: now)
        for event in events {
            let step = tracker.apply(event, to: state, context: context, now: now)
            state = step.state
            for push in step.pushes {
                pushes.append(push)
                state = tracker.record(.accepted, for: push, in: state, now: now).state
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

    @Test func neverAnOlderStateAfterANewerOneAndNeverTwoAlertsPerStep() async {
        await propertyCheck(count: 300, input: Gen.int(in: 0...Int(Int32.max)), Gen.int(in: 0...Int(Int32.max))) {
            scenarioSeed, orderSeed in
            let scenario = Scenario(seed: UInt64(scenarioSeed))
            let replay = Replay(scenario.delivery(seed: UInt64(orderSeed)), context: scenario.context, tracker: tracker)
            var shown: [String: EventKey] = [:]
            var alerted: [String: Set<String>] = [:]
            var timestamps: [String: Int] = [:]
            // Every scenario reports a token: the loop has pushes to check.
            #expect(!replay.pushes.isEmpty, "\(scenario)")
            for push in replay.pushes {
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
    /// Every push answered, in order, with its answer.
    var answered: [(push: PlannedPush, outcome: PushOutcome)] = []
    var outbox: [String: PlannedPush] = [:]
    var sweeps = 0

    init(_ events: [InboundEvent], context: TrackingContext, tracker: OrderTracker, seed: UInt64) {
        var rng = SplitMix64(seed: seed)
        var minute = 1000.0
        state = OrderState(orderID: "A-10023", now: Fixtures.at(minute))
        for event in events {
            minute += Double(Int.random(in: 0...20, using: &rng))
            take(tracker.apply(event, to: state, context: context, now: Fixtures.at(minute)))
            if Int.random(in: 0..<3, using: &rng) == 0 {
                dispatch(tracker: tracker, now: Fixtures.at(minute), rng: &rng)
            }
            if Int.random(in: 0..<6, using: &rng) == 0 {
                minute += Double(Int.random(in: 30...600, using: &rng))
                take(tracker.sweep(state, context: context, now: Fixtures.at(minute)))
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
        for key in step.withdrawn { outbox[key] = nil }
        for push in step.pushes { outbox[push.activityKey] = push }
    }

    private mutating func dispatch(
        tracker: OrderTracker, now: Date, rng: inout SplitMix64, alwaysAccept: Bool = false
    ) {
        for key in outbox.keys.sorted() {
            guard let push = outbox.removeValue(forKey: key) else { continue }
            let outcome: PushOutcome
            switch alwaysAccept ? 0 : Int.random(in: 0..<10, using: &rng) {
            case 0..<6: outcome = .accepted
            case 6, 7: outcome = .retryLater(reason: "TooManyRequests")
            case 8: outcome = .tokenRejected(reason: "Unregistered", unregisteredAt: nil)
            default: outcome = .dropped(reason: "PayloadTooLarge")
            }
            answered.append((push, outcome))
            take(tracker.record(outcome, for: push, in: state, now: max(now, push.notBefore)))
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
            let scenario = Scenario(seed: UInt64(scenarioSeed)).withMoreDevices(seed: UInt64(orderSeed))
            let replay = OutboxReplay(
                scenario.delivery(seed: UInt64(orderSeed)), context: scenario.context, tracker: tracker,
                seed: UInt64(answerSeed))
            // The loops below must have something to check: the iPad's activity is always pushed to.
            #expect(!replay.answered.isEmpty, "\(scenario)")
            #expect(replay.outbox.isEmpty, "the outbox drains")

            var shown: [String: EventKey] = [:]
            var timestamps: [String: Int] = [:]
            var alerted: [String: Set<String>] = [:]
            var starts: [String: Int] = [:]
            var ends: [String: Int] = [:]
            var rejected: Set<String> = []
            for (push, outcome) in replay.answered {
                let activity = push.activityKey
                #expect(!rejected.contains(push.deviceToken?.hex ?? ""), "a push to a token APNs said is gone")
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
                    rejected.insert(push.deviceToken?.hex ?? "")
                default:
                    break
                }
                #expect(push.payload.count <= 4096)
                #expect((try? decodeApp(push)) != nil)
            }
            #expect(starts.values.allSatisfy { $0 <= 1 }, "one start per order and device: \(starts)")
            #expect(ends.values.allSatisfy { $0 <= 1 }, "ended once: \(ends)")
        }
    }
}
