import APNsModel
import Foundation
import LiveDeliveryActivity
import LiveDeliveryJSON
import Testing

@testable import LiveDeliveryCore

/// Plays an events file the way the worker (and `render`) does: push-to-start tokens per user,
/// every push accepted.
struct WorkerSimulation {
    let tracker: OrderTracker
    var orders: [String: OrderState] = [:]
    var users: [String: [PushToStartRegistration]] = [:]
    var pushes: [(PlannedPush, OrderRecord)] = []
    var rejections: [EventRejection] = []

    init(tracker: OrderTracker = Fixtures.tracker()) { self.tracker = tracker }

    mutating func play(_ path: String) {
        var clock = Date.distantPast
        let text = String(decoding: Fixtures.bytes(path), as: UTF8.self)
        for line in text.split(separator: "\n") where !line.isEmpty {
            switch EventDecoder.decode(Array(line.utf8)) {
            case .failure(let rejection):
                rejections.append(rejection)
            case .success(let event):
                clock = max(clock, event.occurredAt)
                if case .pushToStartToken(let e) = event {
                    users[e.userID, default: []].append(e.registration)
                    for (id, state) in orders where state.record?.userID == e.userID { run(event, id, clock) }
                } else {
                    run(event, event.orderID!, clock)
                }
            }
        }
    }

    mutating func run(_ event: InboundEvent, _ orderID: String, _ now: Date) {
        var state = orders[orderID] ?? OrderState(orderID: orderID, now: now)
        let user = state.record?.userID ?? event.userID
        let step = tracker.apply(
            event, to: state, context: TrackingContext(pushToStartTokens: user.flatMap { users[$0] } ?? []), now: now)
        state = step.state
        for push in step.pushes {
            pushes.append((push, state.record!))
            state = tracker.record(.accepted, for: push, in: state, now: max(now, push.notBefore)).state
        }
        orders[orderID] = state
    }
}

@Suite("Payloads: decoding proofs")
struct DecodingProofTests {
    static let stepTable: [OrderStatus: DeliveryStep] = [
        .placed: .confirmed, .confirmed: .confirmed, .preparing: .preparing, .readyForPickup: .preparing,
        .pickedUp: .pickedUp, .outForDelivery: .delivering, .arriving: .delivering, .delivered: .delivered,
    ]

    @Test(arguments: ["examples/delivery-A-10023.jsonl", "examples/cancelled-B-20417.jsonl"])
    func everyPushOfTheExamplesDecodesIntoTheAppTypes(_ path: String) throws {
        var simulation = WorkerSimulation()
        simulation.play(path)
        #expect(!simulation.pushes.isEmpty)
        for (push, record) in simulation.pushes {
            #expect(push.payload.count <= 4096)
            let (state, attributes) = try decodeApp(push)
            #expect(state.driverName == (record.courierName?.value ?? ""))
            if let eta = record.eta?.value {
                #expect(state.estimatedDeliveryTime == eta.earliest...eta.latest)
            } else {
                let updated = record.newest.occurredAt
                #expect(
                    state.estimatedDeliveryTime == updated.addingTimeInterval(1800)...updated.addingTimeInterval(3600))
            }
            let expectedStep =
                Self.stepTable[record.status] ?? record.latestOpen.flatMap { Self.stepTable[$0.value] } ?? .confirmed
            #expect(state.currentStep == expectedStep)
            if push.kind == .start {
                #expect(
                    attributes
                        == DeliveryAttributes(
                            orderNumber: record.orderNumber!.value, restaurantName: record.merchantName!.value))
            } else {
                #expect(attributes == nil)
            }
        }
    }

    @Test func theDeliveryExampleSendsWhatAUserExpects() {
        var simulation = WorkerSimulation()
        simulation.play("examples/delivery-A-10023.jsonl")
        let summary = simulation.pushes.map { push, _ in
            "\(push.kind.rawValue) \(push.priority)" + (push.alert.map { " \($0.title)" } ?? "")
        }
        #expect(
            summary == [
                "start 10 Order confirmed",  // push-to-start at confirmed
                "update 5",  // preparing, with an ETA
                "update 10 Running late",  // the ETA slipped 15 min
                "update 5",  // ready for pickup: only the relevance changed
                "update 5",  // picked up by Sam
                "update 10 Sam is on the way",
                "update 5",  // ETA +2 min (the older seq 8 changed nothing)
                "update 5",  // ETA +13 min: on_the_way has alerted already
                "update 10 Sam is arriving",
                "end 10 Delivered",
            ])
        #expect(simulation.rejections.isEmpty)
        #expect(simulation.orders["A-10023"]?.isSettled == true)
        var cancelled = WorkerSimulation()
        cancelled.play("examples/cancelled-B-20417.jsonl")
        #expect(cancelled.rejections.map(\.reason) == [.unknownStatus, .invalidToken])
        #expect(cancelled.pushes.last?.0.kind == .end)
        #expect(cancelled.pushes.last?.0.alert.map { "\($0.title)" } == "Order cancelled")
    }

    @Test func unicodeNamesSurviveTheRoundTrip() throws {
        var run = Fixtures.Run()
        run.apply(Fixtures.token(minute: 0))
        let name = "Zoë \u{1F6B2} 李 \"Quote\" \\ \n"
        let push = try #require(
            run.apply(Fixtures.status("picked_up", seq: 1, minute: 1, courier: name, merchant: "Café ☕️")).pushes.first)
        #expect(try decodeApp(push).0.driverName == name)
    }

    @Test func unixSecondsEncodingForApps() throws {
        var configuration = Fixtures.configuration
        configuration.mapping.contentState[1].dateEncoding = .unixSeconds
        var run = Fixtures.Run(tracker: OrderTracker(configuration: configuration))
        run.apply(Fixtures.token(minute: 0))
        let push = try #require(run.apply(Fixtures.status("preparing", seq: 1, minute: 1, eta: (30, 40))).pushes.first)
        struct Epochs: Decodable {
            var aps: APS
            struct APS: Decodable {
                var contentState: State
                enum CodingKeys: String, CodingKey { case contentState = "content-state" }
            }
            struct State: Decodable { var estimatedDeliveryTime: [Int] }
        }
        let decoded = try JSONDecoder().decode(Epochs.self, from: Data(push.payload))
        #expect(
            decoded.aps.contentState.estimatedDeliveryTime == [
                Int(Fixtures.at(30).timeIntervalSince1970), Int(Fixtures.at(40).timeIntervalSince1970),
            ])
    }
}

@Suite("Payloads: headers, dates and size")
struct PayloadBoundaryTests {
    @Test func headersAreExactlyWhatAPNsNeeds() throws {
        var run = Fixtures.Run()
        run.apply(Fixtures.token(minute: 0))
        let push = try #require(run.apply(Fixtures.status("preparing", seq: 1, minute: 1)).pushes.first)
        #expect(
            push.headers.map(\.name) == ["apns-push-type", "apns-topic", "apns-priority", "apns-expiration", "apns-id"])
        #expect(push.header("apns-push-type") == "liveactivity")
        #expect(push.header("apns-topic") == "com.example.pizza.push-type.liveactivity")
        #expect(push.header("apns-expiration") == String(Int(Fixtures.at(1).timeIntervalSince1970) + 3600))
        let id = try #require(push.header("apns-id"))
        #expect(UUID(uuidString: id) != nil)
        #expect(id == id.lowercased())
        #expect(push.path == "/3/device/\(Fixtures.updateHex)")
        #expect(!push.redactedPath.contains(Fixtures.updateHex))
        #expect(!push.description.contains(Fixtures.updateHex))
        #expect(push.environment.host == "api.sandbox.push.apple.com")
        // The same step replayed gives the same apns-id (no randomness).
        let again = run.tracker.apply(
            Fixtures.status("picked_up", seq: 2, minute: 2), to: run.state, now: Fixtures.at(2))
        let replay = run.tracker.apply(
            Fixtures.status("picked_up", seq: 2, minute: 2), to: run.state, now: Fixtures.at(2))
        #expect(again.pushes.map(\.apnsID) == replay.pushes.map(\.apnsID))
    }

    @Test(arguments: [(20_000.0, 14_400), (14_400.0, 14_400), (0.0, -1), (900.0, 900)])
    func dismissalIsWithinFourHours(_ configured: Double, _ expectedOffset: Int) throws {
        var run = Fixtures.Run(tracker: Fixtures.tracker { $0.statuses[.delivered]?.dismissAfter = configured })
        run.apply(Fixtures.token(minute: 0))
        let end = try #require(run.apply(Fixtures.status("delivered", seq: 1, minute: 1)).pushes.first)
        #expect(try aps(end)["dismissal-date"] as? Int == end.timestamp + expectedOffset)
    }

    @Test func staleDateFollowsTheETAOrTheClock() throws {
        var run = Fixtures.Run()
        run.apply(Fixtures.token(minute: 0))
        let noETA = try #require(run.apply(Fixtures.status("preparing", seq: 1, minute: 1)).pushes.first)
        #expect(try aps(noETA)["stale-date"] as? Int == Int(Fixtures.at(31).timeIntervalSince1970))
        let pastETA = try #require(
            run.apply(Fixtures.status("preparing", seq: 2, minute: 2, eta: (-20, -10))).pushes.first)
        #expect(try aps(pastETA)["stale-date"] as? Int == Int(Fixtures.at(7).timeIntervalSince1970))
    }

    static func builder(kind: PlannedPush.Kind, padding: Int, alert: AlertContent?) -> PayloadBuilder {
        PayloadBuilder(
            kind: kind, contentState: JSONObject([("driverName", .string(String(repeating: "x", count: padding)))]),
            attributesType: kind == .start ? "DeliveryAttributes" : nil,
            attributes: kind == .start ? JSONObject([("orderNumber", .int(1))]) : nil, timestamp: 1_795_255_290,
            staleDate: 1_795_257_090, dismissalDate: nil, relevance: 50, alert: alert,
            startFallbackAlert: AlertContent(title: .plain("Tracking"), sound: "default"), inputPushToken: true)
    }

    /// The payload written straight into a buffer is the payload value serialized, byte for byte, for every
    /// kind and optional part (and with the content-state's text given or not).
    @Test(arguments: [PlannedPush.Kind.start, .update, .end])
    func writtenPayloadIsTheValueSerialized(_ kind: PlannedPush.Kind) {
        let alerts: [AlertContent?] = [
            nil, Self.alert,
            AlertContent(
                title: .localized(key: "STEP", args: ["a\"b", "ü\n"]), subtitle: .plain("s"), sound: "default"),
        ]
        for alert in alerts {
            for relevance in [nil, 50, 37.5] as [Double?] {
                var builder = Self.builder(kind: kind, padding: 3, alert: alert)
                builder.relevance = relevance
                builder.dismissalDate = kind == .end ? 1_795_257_000 : nil
                builder.contentState = JSONObject([
                    ("driverName", .string("Sam \"the\" courier")), ("eta", .double(1.5)), ("n", .int(-12)),
                    ("ok", .bool(true)), ("none", .null), ("list", .array([.int(1), .string("x")])),
                ])
                let expected = builder.json(alert: alert).serialized()
                #expect(builder.serialized(alert: alert) == expected)
                builder.contentStateJSON = JSONValue.object(builder.contentState).compactText
                #expect(builder.serialized(alert: alert) == expected)
                builder.inputPushChannel = "Q0hBTk5FTA=="
                #expect(builder.serialized(alert: alert) == builder.json(alert: alert).serialized())
            }
        }
    }

    static let alert = AlertContent(
        title: .plain("A title longer than the fallback's"), body: .plain(String(repeating: "b", count: 200)),
        sound: "default")

    @Test(arguments: [PlannedPush.Kind.start, .update])
    func exactly4096BytesIsSentAsIs(_ kind: PlannedPush.Kind) {
        let base = Self.builder(kind: kind, padding: 0, alert: Self.alert).json(alert: Self.alert).serialized().count
        guard
            case .built(let bytes, let alert, let notes) = Self.builder(
                kind: kind, padding: 4096 - base, alert: Self.alert
            ).build(maxBytes: 4096)
        else {
            Issue.record("refused")
            return
        }
        #expect(bytes.count == 4096)
        #expect(alert == Self.alert)
        #expect(notes.isEmpty)
    }

    @Test func oneByteOverDropsTheAlertBodyFirst() {
        let base = Self.builder(kind: .update, padding: 0, alert: Self.alert).json(alert: Self.alert).serialized().count
        guard
            case .built(let bytes, let alert, let notes) = Self.builder(
                kind: .update, padding: 4097 - base, alert: Self.alert
            ).build(maxBytes: 4096)
        else {
            Issue.record("refused")
            return
        }
        #expect(bytes.count <= 4096)
        #expect(alert == AlertContent(title: .plain("A title longer than the fallback's"), sound: "default"))
        #expect(notes.count == 1 && notes[0].contains("4097 bytes"))
    }

    @Test func anUpdateLosesItsAlertAndAStartFallsBackBeforeRefusing() {
        let noAlert = Self.builder(kind: .update, padding: 0, alert: nil).json(alert: nil).serialized().count
        guard
            case .built(let bytes, let alert, _) = Self.builder(
                kind: .update, padding: 4096 - noAlert, alert: Self.alert
            ).build(maxBytes: 4096)
        else {
            Issue.record("refused")
            return
        }
        #expect(bytes.count == 4096 && alert == nil)
        guard
            case .refused(let why) = Self.builder(kind: .update, padding: 4097 - noAlert, alert: Self.alert).build(
                maxBytes: 4096)
        else {
            Issue.record("built over the limit")
            return
        }
        #expect(why.contains("4097 bytes > 4096"))
        let fallback = AlertContent(title: .plain("Tracking"), sound: "default")
        let startBase = Self.builder(kind: .start, padding: 0, alert: fallback).json(alert: fallback).serialized().count
        guard
            case .built(_, let startAlert, _) = Self.builder(kind: .start, padding: 4096 - startBase, alert: Self.alert)
                .build(maxBytes: 4096)
        else {
            Issue.record("refused")
            return
        }
        #expect(startAlert == fallback)
        guard
            case .refused = Self.builder(kind: .start, padding: 4097 - startBase, alert: Self.alert).build(
                maxBytes: 4096)
        else {
            Issue.record("built over the limit")
            return
        }
    }

    @Test func theTrackerNeverProducesAnOversizedPayload() throws {
        var run = Fixtures.Run(tracker: Fixtures.tracker { $0.maxPayloadBytes = 256 })
        run.apply(Fixtures.token(minute: 0))
        let name = String(repeating: "👩‍👩‍👧‍👦", count: 100)
        let step = run.apply(Fixtures.status("out_for_delivery", seq: 1, minute: 1, courier: name))
        #expect(step.pushes.isEmpty)
        #expect(step.decisions.codes().contains("payload_refused"))
        #expect(run.activity.pending == nil && run.activity.planned == nil)
        let small = run.apply(Fixtures.status("out_for_delivery", seq: 2, minute: 2, courier: "Sam", eta: (20, 30)))
        let push = try #require(small.pushes.first)
        #expect(push.payload.count <= 256)
        #expect(small.decisions.codes().contains("payload_trimmed"))
    }
}

@Suite("Payloads: apns-id")
struct PushIDTests {
    /// The ids are a stored contract (a replayed step must produce the same `apns-id`): these values
    /// come from the first version of the derivation.
    @Test func theDerivationIsStable() {
        #expect(
            PushID.make(["o12345", "activity:act-12345", "update", "1795301315", #"{"currentStep":"pickedUp"}"#])
                == "7b83532d-c710-835c-86b2-f8bb09796453")
        #expect(PushID.make(["Zürich ☕"]) == "5b3a3778-1ce8-8ea7-a9dc-7bd895b5c632")
        #expect(PushID.make([]) == "cbf29ce4-8422-8325-8422-2325cbf29ce4")
    }

    @Test func partsAreSeparated() {
        #expect(PushID.make(["ab", "c"]) == "ad22872f-536e-8705-8aea-b75abc72812a")
        #expect(PushID.make(["a", "bc"]) == "401801fc-84f3-8a79-bb05-c88e8a980e72")
    }

    @Test func theIDIsAVersion8UUID() throws {
        let id = PushID.make(["o1", "activity:a", "end", "1"])
        let uuid = try #require(UUID(uuidString: id))
        #expect(uuid.uuidString.lowercased() == id)
        #expect(Array(id)[14] == "8")
        #expect("89ab".contains(Array(id)[19]))
    }
}
