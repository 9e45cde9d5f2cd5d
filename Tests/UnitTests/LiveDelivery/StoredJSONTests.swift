import Foundation
import LiveDeliveryCore
import LiveDeliveryJSON
import TestSupport
import Testing

@testable import LiveDelivery

/// The stored documents in JSON (``StoredJSON``): what an earlier release stored still reads, to equal values,
/// and what is written reads back.
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

    /// The documents of `Tests/Fixtures/stored-json-documents.txt`: order states and pushes as the release
    /// before `sql/118` stored them (JSON), each with the index of the example value it holds.
    static func storedByEarlierRelease() throws -> [(kind: String, index: Int, document: [UInt8])] {
        let file = TestEnvironment.projectRoot.appendingPathComponent("Tests/Fixtures/stored-json-documents.txt")
        return try String(contentsOf: file, encoding: .utf8).split(separator: "\n").map { line in
            let parts = line.split(separator: " ", maxSplits: 2)
            return (String(parts[0]), try #require(Int(parts[1])), Array(parts[2].utf8))
        }
    }

    @Test("the JSON an earlier release stored reads to the same states and pushes, and is written back alike")
    func earlierReleaseDocuments() throws {
        let (states, pushes, _) = try Self.examples()
        let documents = try Self.storedByEarlierRelease()
        #expect(documents.contains { $0.kind == "state" } && documents.contains { $0.kind == "push" })
        for (kind, index, document) in documents {
            if kind == "state" {
                let state = states[index]
                #expect(try StoredJSON.decode(OrderState.self, document) == state)
                #expect(try StoredState.decode(document) == state)
                #expect(JSONValue.parse(try StoredJSON.encode(state)) == JSONValue.parse(document))
            } else {
                let push = (pushes + pushes.flatMap(Self.withEveryAlert))[index]
                #expect(try StoredJSON.decode(PlannedPush.self, document) == push)
                #expect(try StoredPush.decode(document) == push)
                #expect(JSONValue.parse(try StoredJSON.encode(push)) == JSONValue.parse(document))
            }
        }
    }

    @Test("every state, push and registration reads back from the JSON written for it")
    func roundTrip() throws {
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
        for state in states {
            #expect(try StoredJSON.decode(OrderState.self, try StoredJSON.encode(state)) == state)
        }
        for push in pushes + pushes.flatMap(Self.withEveryAlert) {
            #expect(try StoredJSON.decode(PlannedPush.self, try StoredJSON.encode(push)) == push)
        }
        for registration in registrations {
            let bytes = try StoredJSON.encode(registration)
            #expect(try StoredJSON.decode(PushToStartRegistration.self, bytes) == registration)
            // The members admins read in SQL (`registration->>'deviceID'`).
            guard case .object(let object)? = JSONValue.parse(bytes) else {
                Issue.record("a registration is not an object")
                continue
            }
            #expect(
                object.members.map(\.key).sorted() == [
                    "attributesType", "bundleID", "deviceID", "environment", "key", "token", "userID",
                ])
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

    @Test("with any member missing, null or of another type, reading gives a value or a clear error, never a crash")
    func damagedDocuments() throws {
        let documents = try Self.storedByEarlierRelease()
        var compared = 0
        var failed = 0
        for (kind, _, document) in documents.prefix(2) + documents.suffix(2) {
            for variant in Self.variants(of: try #require(JSONValue.parse(document))) {
                let bytes = variant.serialized()
                let read: Bool =
                    kind == "state"
                    ? (try? StoredJSON.decode(OrderState.self, bytes)) != nil
                    : (try? StoredJSON.decode(PlannedPush.self, bytes)) != nil
                compared += 1
                if !read { failed += 1 }
            }
        }
        // Optional members may go missing or null; a required one may not, and no member may change type.
        #expect(compared > 1000 && failed > compared / 4 && failed < compared)
    }

    @Test("an error names the member that is missing")
    func errorsNameTheMember() throws {
        let (states, _, _) = try Self.examples()
        let state = try #require(states.first { $0.activities.contains { $0.updateToken != nil } })
        var text = String(decoding: try StoredJSON.encode(state), as: UTF8.self)
        text = text.replacingOccurrences(of: #""receivedAt":"#, with: #""received":"#)
        #expect(throws: StoredDocumentError(message: "stored JSON document lacks receivedAt")) {
            try StoredJSON.decode(OrderState.self, Array(text.utf8))
        }
        #expect(throws: StoredDocumentError.self) { try StoredJSON.decode(OrderState.self, Array("[]".utf8)) }
        #expect(throws: DecodingError.self) { try StoredJSON.decode(OrderState.self, Array("{\"orderID\":".utf8)) }
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
        #expect(try StoredJSON.decode(PlannedPush.self, document.serialized()) == push)
    }
}
