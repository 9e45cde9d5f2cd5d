import Foundation
import LiveDeliveryCore
import Testing

@testable import LiveDelivery

/// The field-by-field reader of states and pushes against the `Codable` path it replaces: equal
/// values from the same text, and failure where that path fails.
@Suite("StoredJSON reading")
struct StoredJSONTests {
    @Test("every state and push of the example deliveries reads back equal")
    func examplesReadBack() throws {
        let (states, pushes) = try JSONStreamEncoderTests.statesAndPushes()
        for state in states {
            #expect(try StoredJSON.decodeState(try StoredJSON.encode(state)) == state)
        }
        for push in pushes {
            #expect(try StoredJSON.decodePush(try StoredJSON.encode(push)) == push)
            // The trace of the event that planned it goes with it into the outbox, and both paths read it.
            var traced = push
            traced.traceParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
            #expect(try StoredJSON.decodePush(try StoredJSON.encode(traced)) == traced)
            #expect(try JSONDecoder().decode(PlannedPush.self, from: Data(try StoredJSON.encode(traced))) == traced)
        }
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
        "with any member missing, null or of another type, it fails where the Codable path fails and reads the same otherwise"
    )
    func damagedDocumentsMatchTheCodablePath() throws {
        let (states, pushes) = try JSONStreamEncoderTests.statesAndPushes()
        var compared = 0
        var failed = 0
        /// Every variant of the document read both ways: equal values, or both fail.
        func compare<Value: Decodable & Equatable>(_ document: [UInt8], _ read: ([UInt8]) throws -> Value) throws {
            for variant in Self.variants(of: try #require(JSONValue.parse(document))) {
                let bytes = variant.serialized()
                let expected = try? JSONTapeDecoder.decode(Value.self, from: bytes)
                #expect((try? read(bytes)) == expected, "\(variant.compactText)")
                compared += 1
                if expected == nil { failed += 1 }
            }
        }
        // A few of the richest documents (every variant is decoded twice).
        let richStates = states.map { try? StoredJSON.encode($0) }.compactMap { $0 }.sorted { $0.count > $1.count }
        for state in richStates.prefix(3) { try compare(state, StoredJSON.decodeState) }
        for push in [try #require(pushes.first { $0.alert != nil }), pushes[0]] {
            try compare(try StoredJSON.encode(push), StoredJSON.decodePush)
        }
        #expect(compared > 1000 && failed > compared / 4 && failed < compared)
    }

    @Test("an error names the field where reading failed")
    func errorsCarryThePath() throws {
        let (states, _) = try JSONStreamEncoderTests.statesAndPushes()
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
        let (_, pushes) = try JSONStreamEncoderTests.statesAndPushes()
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
