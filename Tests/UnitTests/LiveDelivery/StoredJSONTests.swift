import Foundation
import LiveDeliveryCore
import LiveDeliveryJSON
import TestSupport
import Testing

@testable import LiveDelivery

/// The field-by-field writer and reader of the stored documents against Foundation's coders, the
/// reference: each reads what the other writes, to equal values, and fails where the other fails.
@Suite("StoredJSON")
struct StoredJSONTests {
    /// Every state and push the core produces for the example deliveries, as the worker stores them,
    /// and every push-to-start registration they carry.
    static func examples() throws -> (
        states: [OrderState], pushes: [PlannedPush], registrations: [PushToStartRegistration]
    ) {
        let config = TestEnvironment.projectRoot.appendingPathComponent("Config")
        let tracking = try DefaultConfiguration.load(
            policyJSON: Array(try Data(contentsOf: config.appendingPathComponent("policy.json"))),
            mappingJSON: Array(try Data(contentsOf: config.appendingPathComponent("content-mapping.json"))))
        let tracker = OrderTracker(configuration: tracking)
        var states: [String: OrderState] = [:]
        var registrations: [String: [PushToStartRegistration]] = [:]
        var settings: [String: [String: DeviceSettings]] = [:]
        var seen: [OrderState] = []
        var pushes: [PlannedPush] = []
        for file in [
            "examples/delivery-A-10023.jsonl", "examples/cancelled-B-20417.jsonl", "examples/settings-C-30117.jsonl",
            "examples/scheduled-D-40220.jsonl", "examples/group-E-50330.jsonl",
        ] {
            let text = try String(contentsOf: TestEnvironment.projectRoot.appendingPathComponent(file), encoding: .utf8)
            for line in text.split(separator: "\n") {
                guard case .success(let event) = EventDecoder.decode(Array(line.utf8)) else { continue }
                if case .pushToStartToken(let token) = event {
                    registrations[token.userID, default: []].append(token.registration)
                    continue
                }
                if case .activitySettings(let report) = event {
                    settings[report.userID, default: [:]][report.deviceID] = report.settings
                }
                // A settings report reaches the user's orders; everything else its own.
                let orders =
                    event.orderID.map { [$0] }
                    ?? states.values.filter { $0.record?.userID == event.userID }.map(\.orderID).sorted()
                for orderID in orders {
                    let now = event.occurredAt
                    var state = states[orderID] ?? OrderState(orderID: orderID, now: now)
                    let user = state.record?.userID ?? event.userID
                    var context = TrackingContext(
                        pushToStartTokens: user.flatMap { registrations[$0] } ?? [],
                        deviceSettings: user.flatMap { settings[$0] } ?? [:], openChannels: [:])
                    var followers = state.followers
                    if case .orderFollowers(let e) = event { followers += e.followers }
                    for follower in Set(followers) { context.pushToStartTokens += registrations[follower] ?? [] }
                    let step = tracker.apply(event, to: state, context: context, now: now)
                    state = step.state
                    if !step.pushes.isEmpty { seen.append(state) }  // with its pushes pending
                    var queue = step.pushes
                    while !queue.isEmpty {
                        let push = queue.removeFirst()
                        pushes.append(push)
                        let answer: PushOutcome =
                            push.kind == .openChannel
                            ? .channelCreated(channelID: "Y2hhbm5lbC1FLTUwMzMwAA==") : .accepted
                        let recorded = tracker.record(answer, for: push, in: state, now: max(now, push.notBefore))
                        if !recorded.pushes.isEmpty { seen.append(recorded.state) }
                        state = recorded.state
                        queue += recorded.pushes
                    }
                    states[orderID] = state
                    seen.append(state)
                }
            }
        }
        return (seen, pushes, registrations.values.flatMap { $0 })
    }

    /// The pushes with the alert texts the examples do not have: localized, with and without
    /// arguments, and every optional part.
    static func withEveryAlert(_ push: PlannedPush) -> [PlannedPush] {
        let alerts: [AlertContent] = [
            AlertContent(title: .plain("Arriving")),
            AlertContent(
                title: .localized(key: "ORDER_ARRIVING", args: ["Ana", "5"]),
                subtitle: .localized(key: "SUB", args: []),
                body: .plain("Your \"order\"\n"), sound: "default"),
        ]
        return alerts.map { alert in
            var push = push
            push.alert = alert
            push.traceParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
            return push
        }
    }

    @Test("JSONDecoder reads what StoredJSON writes, and StoredJSON reads what JSONEncoder writes")
    func foundationAgrees() throws {
        let (states, pushes, registrations) = try Self.examples()
        // What the comparison must cover to be worth anything.
        #expect(states.count > 10 && pushes.count > 5 && !registrations.isEmpty)
        #expect(states.contains { $0.activities.contains { $0.pending != nil } })
        #expect(states.contains { $0.activities.contains { $0.updateToken != nil && $0.sent != nil } })
        #expect(states.contains { $0.activities.contains { $0.startToken != nil } })
        #expect(states.contains { !$0.pushToStartTokens.isEmpty && $0.record?.terminal != nil })
        #expect(pushes.contains { $0.alert != nil } && pushes.contains { $0.alert == nil })
        #expect(states.contains { $0.channel?.pending != nil } && states.contains { !$0.followers.isEmpty })
        #expect(states.contains { $0.activities.contains { $0.channelID != nil } })
        #expect(Set(pushes.map(\.kind)) == [.start, .update, .end, .openChannel, .closeChannel])
        let decoder = JSONDecoder()
        let encoder = JSONEncoder()
        for state in states {
            let bytes = try StoredJSON.encode(state)
            #expect(try StoredJSON.decodeState(bytes) == state)
            #expect(try decoder.decode(OrderState.self, from: Data(bytes)) == state)
            #expect(try StoredJSON.decodeState(Array(try encoder.encode(state))) == state)
            // The same document, key order and number spelling aside.
            #expect(JSONValue.parse(bytes) == JSONValue.parse(Array(try encoder.encode(state))))
        }
        for push in pushes + pushes.flatMap(Self.withEveryAlert) {
            let bytes = try StoredJSON.encode(push)
            #expect(try StoredJSON.decodePush(bytes) == push)
            #expect(try decoder.decode(PlannedPush.self, from: Data(bytes)) == push)
            #expect(try StoredJSON.decodePush(Array(try encoder.encode(push))) == push)
            #expect(JSONValue.parse(bytes) == JSONValue.parse(Array(try encoder.encode(push))))
        }
        for registration in registrations {
            let bytes = try StoredJSON.encode(registration)
            #expect(try StoredJSON.decodeRegistration(bytes) == registration)
            #expect(try decoder.decode(PushToStartRegistration.self, from: Data(bytes)) == registration)
            #expect(try StoredJSON.decodeRegistration(Array(try encoder.encode(registration))) == registration)
        }
    }

    @Test("a state with a number JSON cannot hold is refused, not written")
    func refusesNonFiniteNumbers() throws {
        let (states, _, _) = try Self.examples()
        var state = try #require(states.first { $0.activities.contains { $0.sent != nil } })
        let index = try #require(state.activities.firstIndex { $0.sent != nil })
        state.activities[index].sent?.relevance = .nan
        #expect(throws: EncodingError.self) { try StoredJSON.encode(state) }
    }

    /// Every variant of `document` with one member removed, set to null, or given a value of
    /// another type, at any depth.
    static func variants(of document: JSONValue) -> [JSONValue] {
        switch document {
        case .object(let object):
            var variants: [JSONValue] = []
            let members = object.members.map { ($0.key, $0.value) }
            for index in members.indices {
                func replacing(_ value: JSONValue?) -> JSONValue {
                    var copy = members
                    if let value { copy[index].1 = value } else { copy.remove(at: index) }
                    return .object(JSONObject(copy))
                }
                variants.append(replacing(nil))
                variants.append(replacing(.null))
                variants.append(replacing(.string("x")))
                variants.append(replacing(.double(1.5)))
                for inner in Self.variants(of: members[index].1) { variants.append(replacing(inner)) }
            }
            return variants
        case .array(let elements):
            guard let first = elements.first else { return [.array([.null]), .array([.string("x")])] }
            return Self.variants(of: first).map { .array([$0] + elements.dropFirst()) }
        default:
            return []
        }
    }

    @Test(
        "with any member missing, null or of another type, it fails where JSONDecoder fails and reads the same otherwise"
    )
    func damagedDocumentsMatchJSONDecoder() throws {
        let (states, pushes, _) = try Self.examples()
        var compared = 0
        var failed = 0
        /// Every variant of the document read both ways: equal values, or both fail.
        func compare<Value: Decodable & Equatable>(_ document: [UInt8], _ read: ([UInt8]) throws -> Value) throws {
            for variant in Self.variants(of: try #require(JSONValue.parse(document))) {
                let bytes = variant.serialized()
                let expected = try? JSONDecoder().decode(Value.self, from: Data(bytes))
                #expect((try? read(bytes)) == expected, "\(variant.compactText)")
                compared += 1
                if expected == nil { failed += 1 }
            }
        }
        // A few of the richest documents (every variant is decoded twice).
        let richStates = states.map { try? StoredJSON.encode($0) }.compactMap { $0 }.sorted { $0.count > $1.count }
        for state in richStates.prefix(3) { try compare(state, StoredJSON.decodeState) }
        for push in [try #require(pushes.first { $0.alert != nil }), pushes[0]] + Self.withEveryAlert(pushes[0]) {
            try compare(try StoredJSON.encode(push), StoredJSON.decodePush)
        }
        #expect(compared > 1000 && failed > compared / 4 && failed < compared)
    }

    @Test("an error names the field where reading failed")
    func errorsCarryThePath() throws {
        let (states, _, _) = try Self.examples()
        let state = try #require(states.first { $0.activities.contains { $0.updateToken != nil } })
        var text = String(decoding: try StoredJSON.encode(state), as: UTF8.self)
        text = text.replacingOccurrences(of: #""receivedAt":"#, with: #""receivedAt":"soon","ignored":"#)
        do {
            _ = try StoredJSON.decodeState(Array(text.utf8))
            Issue.record("a string where a date belongs was read")
        } catch let DecodingError.typeMismatch(_, context) {
            #expect(context.codingPath.map(\.stringValue) == ["activities", "Index 0", "updateToken", "receivedAt"])
        }
        #expect(throws: DecodingError.self) { try StoredJSON.decodeState(Array("[]".utf8)) }
        #expect(throws: DecodingError.self) { try StoredJSON.decodeState(Array("{\"orderID\":".utf8)) }
    }

    @Test("a push stored by the first versions, with its payload as an array of bytes, still reads")
    func payloadAsByteArray() throws {
        let (_, pushes, _) = try Self.examples()
        let push = try #require(pushes.first)
        guard case .object(let object) = try #require(JSONValue.parse(try StoredJSON.encode(push))) else {
            Issue.record("a push is not an object")
            return
        }
        let document = JSONValue.object(
            JSONObject(
                object.members.map { member in
                    member.key == "payload"
                        ? (member.key, .array(push.payload.map { .int(Int($0)) })) : (member.key, member.value)
                }))
        #expect(try StoredJSON.decodePush(document.serialized()) == push)
    }
}
