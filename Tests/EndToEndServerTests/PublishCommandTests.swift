import ChildProcesses
import Foundation
import Logging
import RabbitMQ
import TestSupport
import Testing
import WorkerHarness

/// `livedelivery publish` on its own, against a queue this test binds: properties, counts, duplicates.
@Suite(.timeLimit(.minutes(6)))
struct PublishCommandTests {
    @Test func publishesEveryEventWithItsPropertiesAndTheRequestedDuplicates() async throws {
        try await Self.withQueue("e2e-publish", orders: 50) { name, connection, directory, scenario, file in
            let child = try ChildProcess.livedelivery(
                name: "publish",
                arguments: [
                    "publish", "--url", TestEnvironment.amqpURL, "--exchange", name, "--shuffle",
                    "--duplicate-rate", "0.5", "--seed", "7", file.path,
                ],
                environment: [:], logDirectory: directory)
            let status = try await child.waitForExit(timeout: .seconds(60))
            #expect(status == 0, "\(child.output)")

            let expected = try await eventuallyValue("the messages in the queue", timeout: .seconds(30)) { () -> Int? in
                let depth = try await connection.declareQueue(name, passive: true).messageCount
                return depth > scenario.events.count ? depth : nil
            }
            #expect(child.output.contains("published \(expected) messages"), "\(child.output)")
            var seen: [String: Int] = [:]
            let deliveries = try await connection.consume(queue: name, prefetch: 500)
            let byID = Dictionary(uniqueKeysWithValues: scenario.events.map { ($0.eventID, $0) })
            for try await delivery in deliveries {
                let id = try #require(delivery.messageID)
                let event = try #require(byID[id], "unknown message_id \(id)")
                #expect(delivery.routingKey == event.type)
                #expect(delivery.body == event.body, "bodies are published unchanged")
                #expect(delivery.properties.contentType == "application/json")
                #expect(delivery.properties.deliveryMode == .persistent)
                seen[id, default: 0] += 1
                try await delivery.ack()
                if seen.values.reduce(0, +) == expected { break }
            }
            _ = try? await deliveries.cancel()
            #expect(Set(seen.keys) == Set(byID.keys), "every event published")
            let duplicated = seen.values.filter { $0 > 1 }.count
            #expect(
                duplicated > scenario.events.count / 4 && duplicated < scenario.events.count * 3 / 4,
                "about half duplicated: \(duplicated)")
        }
    }

    /// `--interval`: each message confirmed before the next, in file order; a negative interval is refused.
    @Test func anIntervalPublishesOneAtATimeInFileOrder() async throws {
        try await Self.withQueue("e2e-publish-paced", orders: 2) { name, connection, directory, scenario, file in
            let refused = try ChildProcess.livedelivery(
                name: "publish-refused", arguments: ["publish", "--interval=-1", file.path], environment: [:],
                logDirectory: directory)
            #expect(try await refused.waitForExit(timeout: .seconds(60)) != 0)
            #expect(refused.output.contains("--interval is between 0 and 3600 seconds"), "\(refused.output)")

            let child = try ChildProcess.livedelivery(
                name: "publish",
                arguments: [
                    "publish", "--url", TestEnvironment.amqpURL, "--exchange", name, "--interval", "0.01", file.path,
                ],
                environment: [:], logDirectory: directory)
            #expect(try await child.waitForExit(timeout: .seconds(60)) == 0, "\(child.output)")
            #expect(child.output.contains("\(scenario.events.count) confirmed, 0 failed"), "\(child.output)")
            var order: [String] = []
            let deliveries = try await connection.consume(queue: name, prefetch: 500)
            for try await delivery in deliveries {
                order.append(delivery.messageID ?? "")
                try await delivery.ack()
                if order.count == scenario.events.count { break }
            }
            _ = try? await deliveries.cancel()
            #expect(order == scenario.events.map(\.eventID))
        }
    }

    /// An exchange and a queue bound to all of it, both named after the test, a file of `orders` deliveries' events,
    /// and a folder for the logs; all gone afterwards.
    static func withQueue(
        _ label: String, orders: Int,
        _ body: (
            _ name: String, _ connection: RabbitMQConnection, _ directory: URL, _ scenario: Scenario, _ file: URL
        ) async throws -> Void
    ) async throws {
        let name = TestEnvironment.uniqueName(label)
        let connection = try await RabbitMQConnection.connect(
            try AMQPConfiguration(url: TestEnvironment.amqpURL), logger: Logger(label: "e2e.publish"))
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(name)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        try await connection.declareExchange(name, type: .topic, durable: false, autoDelete: false)
        try await connection.declareQueue(name, durable: false)
        try await connection.bindQueue(name, exchange: name, routingKey: "#")
        let scenario = Scenario.deliveries(orders: orders, prefix: name)
        let file = directory.appendingPathComponent("events.jsonl")
        try scenario.events.map { String(decoding: $0.body, as: UTF8.self) }.joined(separator: "\n")
            .write(to: file, atomically: true, encoding: .utf8)
        do {
            try await body(name, connection, directory, scenario, file)
        } catch {
            await Self.remove(name, connection)
            throw error
        }
        await Self.remove(name, connection)
    }

    private static func remove(_ name: String, _ connection: RabbitMQConnection) async {
        _ = try? await connection.deleteQueue(name)
        try? await connection.deleteExchange(name)
        await connection.close()
    }
}
