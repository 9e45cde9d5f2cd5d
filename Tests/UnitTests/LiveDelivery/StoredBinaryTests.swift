import Foundation
import LiveDeliveryCore
import TestSupport
import Testing

@testable import LiveDelivery

/// The binary documents of an order's state and a planned push (`orders.state`, `outbox.push`, `sql/118`):
/// every state and push of the example deliveries reads back equal, the JSON an earlier release stored
/// still reads, and a damaged document is refused with an error, never a crash.
@Suite("Stored binary documents")
struct StoredBinaryTests {
    @Test("every example state reads back equal, and smaller than its JSON")
    func roundTrip() throws {
        let states = try StoredJSONTests.examples().states
        #expect(states.count > 10)
        #expect(states.contains { $0.activities.contains { $0.pending != nil && $0.startToken != nil } })
        #expect(states.contains { !$0.pushToStartTokens.isEmpty })
        for state in states {
            let document = StoredState.encode(state)
            #expect(try StoredState.decode(document) == state)
            #expect(document.count < (try StoredJSON.encode(state)).count)
        }
    }

    @Test(
        "every example push, with every kind of alert, reads back equal, and the JSON of earlier releases still reads")
    func pushRoundTrip() throws {
        let pushes = try StoredJSONTests.examples().pushes
        #expect(pushes.count > 5)
        for push in pushes + pushes.flatMap(StoredJSONTests.withEveryAlert) {
            let document = StoredPush.encode(push)
            #expect(try StoredPush.decode(document) == push)
            #expect(try StoredPush.decode(try StoredJSON.encode(push)) == push)
            #expect(throws: StoredDocumentError.self) { try StoredPush.decode(Array(document.dropLast())) }
        }
    }

    @Test("a state handed over to another cell is a version-4 document that reads back equal; every other stays 3")
    func handedOverRoundTrip() throws {
        let config = TestEnvironment.projectRoot.appendingPathComponent("Config")
        let tracker = OrderTracker(
            configuration: try DefaultConfiguration.load(
                policyJSON: Array(try Data(contentsOf: config.appendingPathComponent("policy.json"))),
                mappingJSON: Array(try Data(contentsOf: config.appendingPathComponent("content-mapping.json")))))
        for state in try StoredJSONTests.examples().states where state.isQuiet && state.handedOver == nil {
            #expect(StoredState.encode(state).first == 3)
            let handedOver = tracker.handOver(state, to: "eu-2", now: state.lastChangeAt).state
            let document = StoredState.encode(handedOver)
            #expect(document.first == 4)
            #expect(try StoredState.decode(document) == handedOver)
            #expect(try StoredState.decode(document).handedOver?.value.state == state)
        }
    }

    @Test("a state an earlier release stored as JSON still reads")
    func jsonStillReads() throws {
        for state in try StoredJSONTests.examples().states {
            #expect(try StoredState.decode(try StoredJSON.encode(state)) == state)
        }
    }

    @Test("a version-1 document (before the frequent-updates setting and scheduled starts) still reads, without them")
    func versionOneStillReads() throws {
        let states = try StoredJSONTests.examples().states
        #expect(states.contains { $0.activities.contains { $0.frequentPushes != nil } })
        #expect(states.contains { $0.activities.contains { $0.scheduledStart != nil } })
        for state in states {
            var without = state
            without.followers = []
            without.followersKey = nil
            without.channel = nil
            for index in without.activities.indices {
                without.activities[index].frequentPushes = nil
                without.activities[index].scheduledStart = nil
                without.activities[index].channelID = nil
                without.activities[index].broadcast = nil
            }
            #expect(try StoredState.decode(StoredState.encode(state, version: 1)) == without)
        }
    }

    @Test("a version-2 document (before followers and broadcast channels) still reads, without them")
    func versionTwoStillReads() throws {
        for state in try StoredJSONTests.examples().states {
            var without = state
            without.followers = []
            without.followersKey = nil
            without.channel = nil
            for index in without.activities.indices {
                without.activities[index].channelID = nil
                without.activities[index].broadcast = nil
            }
            #expect(try StoredState.decode(StoredState.encode(state, version: 2)) == without)
        }
    }

    @Test("a truncated, extended or unknown document is refused with an error")
    func damagedRefused() throws {
        let state = try #require(try StoredJSONTests.examples().states.last)
        let document = StoredState.encode(state)
        for length in stride(from: 0, to: document.count, by: 7) {
            #expect(throws: StoredDocumentError.self) { try StoredState.decode(Array(document.prefix(length))) }
        }
        #expect(throws: StoredDocumentError.self) { try StoredState.decode(document + [0]) }
        var unknown = document
        unknown[0] = StoredState.version + 1
        #expect(throws: StoredDocumentError.self) { try StoredState.decode(unknown) }
    }

    @Test("flipped bytes never crash the reader")
    func flippedBytes() throws {
        let state = try #require(try StoredJSONTests.examples().states.last)
        let document = StoredState.encode(state)
        for index in 1..<document.count {
            for flip: UInt8 in [0x01, 0x80, 0xFF] {
                var damaged = document
                damaged[index] ^= flip
                _ = try? StoredState.decode(damaged)
            }
        }
    }
}
