import Foundation
import LiveDeliveryCore
import TestSupport
import Testing

@testable import LiveDelivery

@Suite("JSONStreamEncoder")
struct JSONStreamEncoderTests {
    /// Every state and push the core produces for the example deliveries, as the worker stores them.
    static func statesAndPushes() throws -> ([OrderState], [PlannedPush]) {
        let config = TestEnvironment.projectRoot.appendingPathComponent("Config")
        let tracking = try DefaultConfiguration.load(
            policyJSON: Array(try Data(contentsOf: config.appendingPathComponent("policy.json"))),
            mappingJSON: Array(try Data(contentsOf: config.appendingPathComponent("content-mapping.json"))))
        let tracker = OrderTracker(configuration: tracking)
        var states: [String: OrderState] = [:]
        var registrations: [String: [PushToStartRegistration]] = [:]
        var seen: [OrderState] = []
        var pushes: [PlannedPush] = []
        for file in ["examples/delivery-A-10023.jsonl", "examples/cancelled-B-20417.jsonl"] {
            let text = try String(contentsOf: TestEnvironment.projectRoot.appendingPathComponent(file), encoding: .utf8)
            for line in text.split(separator: "\n") {
                guard case .success(let event) = EventDecoder.decode(Array(line.utf8)) else { continue }
                if case .pushToStartToken(let token) = event {
                    registrations[token.userID, default: []].append(token.registration)
                    continue
                }
                guard let orderID = event.orderID else { continue }
                let now = event.occurredAt
                var state = states[orderID] ?? OrderState(orderID: orderID, now: now)
                let user = state.record?.userID ?? event.userID
                let step = tracker.apply(
                    event, to: state,
                    context: TrackingContext(pushToStartTokens: user.flatMap { registrations[$0] } ?? []),
                    now: now)
                state = step.state
                if !step.pushes.isEmpty { seen.append(state) }  // with its pushes pending
                for push in step.pushes {
                    pushes.append(push)
                    state = tracker.record(.accepted, for: push, in: state, now: max(now, push.notBefore)).state
                }
                states[orderID] = state
                seen.append(state)
            }
        }
        return (seen, pushes)
    }

    /// Both texts parse to the same JSON value (key order and number spelling aside).
    static func sameJSON(_ a: [UInt8], _ b: Data) throws -> Bool {
        let left = try JSONSerialization.jsonObject(with: Data(a), options: [.fragmentsAllowed]) as? NSObject
        let right = try JSONSerialization.jsonObject(with: b, options: [.fragmentsAllowed]) as? NSObject
        return left != nil && left == right
    }

    @Test("the core's states and pushes decode back equal, and read as JSONEncoder's output does")
    func coreValuesRoundTrip() throws {
        let (states, pushes) = try Self.statesAndPushes()
        #expect(states.count > 10 && pushes.count > 5)
        for state in states {
            let bytes = try JSONStreamEncoder.encode(state)
            #expect(try JSONDecoder().decode(OrderState.self, from: Data(bytes)) == state)
            #expect(try Self.sameJSON(bytes, try JSONEncoder().encode(state)))
        }
        for push in pushes {
            let bytes = try JSONStreamEncoder.encode([push, push])
            #expect(try JSONDecoder().decode([PlannedPush].self, from: Data(bytes)) == [push, push])
            #expect(try Self.sameJSON(bytes, try JSONEncoder().encode([push, push])))
        }
    }

    @Test("states and pushes written field by field are byte for byte what the Codable path writes")
    func storedJSONMatchesCodable() throws {
        let (states, pushes) = try Self.statesAndPushes()
        // What the comparison must cover to be worth anything.
        #expect(states.contains { $0.activities.contains { $0.pending != nil } })
        #expect(states.contains { $0.activities.contains { $0.updateToken != nil && $0.sent != nil } })
        #expect(states.contains { $0.activities.contains { $0.startToken != nil } })
        #expect(states.contains { !$0.pushToStartTokens.isEmpty && $0.record?.terminal != nil })
        #expect(pushes.contains { $0.alert != nil } && pushes.contains { $0.alert == nil })
        for state in states {
            let bytes = try StoredJSON.encode(state)
            #expect(bytes == (try JSONStreamEncoder.encode(state)))
            #expect(try JSONDecoder().decode(OrderState.self, from: Data(bytes)) == state)
            #expect(try JSONTapeDecoder.decode(OrderState.self, from: bytes) == state)
        }
        for push in pushes {
            let bytes = try StoredJSON.encode(push)
            #expect(bytes == (try JSONStreamEncoder.encode(push)))
            #expect(try JSONDecoder().decode(PlannedPush.self, from: Data(bytes)) == push)
        }
    }

    @Test("a state with a number JSON cannot hold is refused, not written")
    func storedJSONRefusesNonFiniteNumbers() throws {
        let (states, _) = try Self.statesAndPushes()
        var state = try #require(states.first { $0.activities.contains { $0.sent != nil } })
        let index = try #require(state.activities.firstIndex { $0.sent != nil })
        state.activities[index].sent?.relevance = .nan
        #expect(throws: EncodingError.self) { try StoredJSON.encode(state) }
    }

    struct Sample: Codable, Equatable {
        struct Empty: Codable, Equatable {}
        var text: String
        var numbers: [Int64]
        var small: [UInt8]
        var flags: [Bool?]
        var ratio: Double
        var fraction: Float
        var when: Date
        var blob: Data
        var link: URL
        var byName: [String: [Int]]
        var missing: String?
        var empty: Empty
        var nested: [[Sample.Empty]]
    }

    /// One value of every kind the encoder (and the tape decoder) special-cases.
    static let sample = Sample(
        text: "quote \" backslash \\ newline \n tab \t bell \u{07} nul \u{00} é 李 🚲 </script>",
        numbers: [0, -1, .max, .min], small: [0, 255], flags: [true, nil, false], ratio: -1234.5678e-9,
        fraction: 0.1, when: Date(timeIntervalSinceReferenceDate: 816_958_367.3624423),
        blob: Data([0, 1, 2, 250]), link: URL(string: "https://example.com/a?b=c")!,
        byName: ["a": [1], "b": []], missing: nil, empty: .init(), nested: [[], [.init()]])

    @Test("escapes, numbers, optionals, dates, data, URLs, dictionaries and empty values")
    func everyKindOfValue() throws {
        let sample = Self.sample
        let bytes = try JSONStreamEncoder.encode(sample)
        #expect(try JSONDecoder().decode(Sample.self, from: Data(bytes)) == sample)
        #expect(try Self.sameJSON(bytes, try JSONEncoder().encode(sample)))
        #expect(try JSONStreamEncoder.encode(["x": 42.0, "y": 1e300]) != [])
        #expect(
            try Self.sameJSON(
                try JSONStreamEncoder.encode([42.0, 1e300, 0.5]), try JSONEncoder().encode([42.0, 1e300, 0.5])))
    }

    enum Shape: Codable, Equatable {
        case dot
        case circle(radius: Double)
        case path([Shape], closed: Bool)
    }

    /// Writes through `superEncoder`, which cannot be streamed.
    struct Derived: Codable, Equatable {
        var base: Int
        var extra: String
        init(base: Int, extra: String) {
            self.base = base
            self.extra = extra
        }
        enum CodingKeys: CodingKey { case extra }
        init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            extra = try container.decode(String.self, forKey: .extra)
            base = try Int(from: try container.superDecoder())
        }
        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(extra, forKey: .extra)
            try base.encode(to: container.superEncoder())
        }
    }

    @Test("enums with associated values (nested containers) stream; superEncoder falls back to JSONEncoder")
    func nestedContainersAndFallback() throws {
        let shapes: [Shape] = [.dot, .circle(radius: 2.5), .path([.dot, .path([], closed: false)], closed: true)]
        let bytes = try JSONStreamEncoder.encode(["shapes": shapes])
        #expect(try JSONDecoder().decode([String: [Shape]].self, from: Data(bytes)) == ["shapes": shapes])
        #expect(try Self.sameJSON(bytes, try JSONEncoder().encode(["shapes": shapes])))
        let derived = [Derived(base: 7, extra: "x"), Derived(base: 8, extra: "y")]
        let fallback = try JSONStreamEncoder.encode(derived)
        #expect(try JSONDecoder().decode([Derived].self, from: Data(fallback)) == derived)
    }

    @Test("a number JSON cannot hold is refused with its path, as JSONEncoder refuses it")
    func nonFiniteNumbersAreRefused() throws {
        #expect(throws: EncodingError.self) { try JSONStreamEncoder.encode(["ratio": [1.0, .nan]]) }
        #expect(throws: EncodingError.self) { try JSONStreamEncoder.encode(Float.infinity) }
        do {
            _ = try JSONStreamEncoder.encode(["ratio": [1.0, .nan]])
        } catch EncodingError.invalidValue(_, let context) {
            #expect(context.codingPath.map(\.stringValue) == ["ratio", "Index 1"])
        }
    }
}
