import ChildProcesses
import Foundation
import Logging
import RabbitMQ
import Testing
import WorkerHarness

/// Bad input ends in the dead-letter path with a machine-readable reason, and the worker carries on.
@Suite(.timeLimit(.minutes(5)))
struct DeadLetterTests {
    @Test func malformedMessagesAreDeadLetteredWithTheirReasons() async throws {
        try await Fixture.with("malformed") { fixture in
            try await fixture.startWorker("w1")
            let token = String(repeating: "ab", count: 32)
            func status(_ id: String, _ extra: String) -> [UInt8] {
                Array(
                    #"{"type":"order.status","version":1,"event_id":"\#(id)","occurred_at":"2026-11-21T10:00:00Z","order_id":"bad-\#(id)","user_id":"u","status":"confirmed"\#(extra)}"#
                        .utf8)
            }
            let bad: [(routingKey: String, body: [UInt8], messageID: String?, reason: String)] = [
                ("order.status", Array("{not json".utf8), "m-json", "malformed_json"),
                (
                    "order.status",
                    Array(
                        #"{"type":"order.status","version":2,"event_id":"m-ver","occurred_at":"2026-11-21T10:00:00Z","order_id":"x","user_id":"u","status":"placed"}"#
                            .utf8), "m-ver", "unknown_version"
                ),
                (
                    "order.exploded",
                    Array(
                        #"{"type":"order.exploded","version":1,"event_id":"m-type","occurred_at":"2026-11-21T10:00:00Z"}"#
                            .utf8), "m-type", "unknown_type"
                ),
                (
                    "order.status", Array(status("m-status", "").replacingConfirmed(with: "teleported")), "m-status",
                    "unknown_status"
                ),
                (
                    "order.status",
                    status("m-eta", #","eta":{"earliest":"2026-11-21T11:00:00Z","latest":"2026-11-21T10:00:00Z"}"#),
                    "m-eta", "invalid_eta_range"
                ),
                (
                    "order.status",
                    Array(
                        #"{"type":"order.status","version":1,"event_id":"m-field","occurred_at":"2026-11-21T10:00:00Z","user_id":"u","status":"placed"}"#
                            .utf8), "m-field", "missing_field"
                ),
                (
                    "activity.token",
                    Array(
                        #"{"type":"activity.token","version":1,"event_id":"m-tok","occurred_at":"2026-11-21T10:00:00Z","order_id":"x","activity_id":"a","token":"xyz","bundle_id":"com.example.pizza","environment":"production"}"#
                            .utf8), "m-tok", "invalid_token"
                ),
                (
                    "order.status",
                    Array(#"{"type":"order.status","version":1,"event_id":"m-big","pad":""#.utf8)
                        + Array(repeating: UInt8(ascii: "x"), count: 70_000) + Array(#""}"#.utf8), "m-big",
                    "body_too_large"
                ),
            ]
            try await fixture.publish(bad.map { ($0.routingKey, $0.body, $0.messageID) })
            // A good event afterwards: the worker carries on.
            let good = Scenario.deliveries(orders: 1, prefix: fixture.name)
            try await fixture.publish(good.events)
            _ = token

            try await eventually("every bad message in dead_letters", timeout: .seconds(120)) {
                try await fixture.count("SELECT count(*) FROM dead_letters") >= bad.count
            }
            let reasons = try await fixture.strings("SELECT reason FROM dead_letters ORDER BY reason")
            #expect(reasons.sorted() == bad.map(\.reason).sorted())
            try await fixture.waitUntilSettled(eventIDs: Set(good.events.map(\.eventID)))
            try await fixture.waitUntilAllEnded(good)
            try await fixture.verifyConverged(good)
            for worker in fixture.runningWorkers { #expect(worker.isRunning) }
        }
    }

    /// A message the broker gives up on (returned more often than x-delivery-limit) is dead-lettered by the
    /// broker and then moved into dead_letters by the worker with reason delivery_limit.
    @Test func poisonMessageEndsAsDeliveryLimit() async throws {
        try await Fixture.with("poison") { fixture in
            // Let the worker declare its topology, then stop it so that this test can play the failing consumer.
            let first = try await fixture.startWorker("declarer")
            #expect(try await first.process.terminate() == 0)

            let poison = Array(#"{"type":"order.status","version":1,"event_id":"poison-1"}"#.utf8)
            try await fixture.publish([("order.status", poison, "poison-1")])
            let connection = try await RabbitMQConnection.connect(
                try AMQPConfiguration(url: fixture.amqpURL), logger: fixture.logger)
            let deliveries = try await connection.consume(queue: fixture.queue, prefetch: 1)
            // Play a consumer that fails on it every time (nack + requeue) until the broker gives up on it.
            let failing = Task {
                for try await delivery in deliveries { try await delivery.nack(requeue: true) }
            }
            try await eventually("the broker to dead-letter the message", timeout: .seconds(120)) {
                try await connection.declareQueue("\(fixture.queue).dead-letter", passive: true).messageCount == 1
            }
            failing.cancel()
            _ = try? await deliveries.cancel()
            await connection.close()

            try await fixture.startWorker("mover")
            try await eventually("the poison message in dead_letters", timeout: .seconds(120)) {
                try await fixture.strings("SELECT reason FROM dead_letters").contains("delivery_limit")
            }
            #expect(try await fixture.count("SELECT count(*) FROM inbox WHERE event_id = 'poison-1'") == 0)
        }
    }
}

extension Array where Element == UInt8 {
    fileprivate func replacingConfirmed(with status: String) -> [UInt8] {
        Array(
            String(decoding: self, as: UTF8.self).replacingOccurrences(of: "\"confirmed\"", with: "\"\(status)\"").utf8)
    }
}
