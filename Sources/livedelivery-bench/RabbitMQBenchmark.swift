import ArgumentParser
import Foundation
import Logging
import RabbitMQ

/// Publishes N messages with confirms (pipelined), then consumes and acks them with a prefetch.
struct RabbitMQBenchmark: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "rabbitmq",
        abstract: "RabbitMQ module throughput: confirmed publish, then consume + ack."
    )

    @Option(help: "Messages to publish and then consume.")
    var messages = 50_000

    @Option(help: "Consumer prefetch (basic.qos).")
    var prefetch: UInt16 = 200

    @Option(help: "Ack every Nth delivery with multiple=true (1 = ack each delivery on its own).")
    var ackEvery = 1

    @Option(help: "Publishes in flight at once (awaiting their confirms).")
    var inFlight = 1_000

    @Option(help: "Message body size in bytes.")
    var size = 256

    @Option(help: "AMQP URL (default: LIVEDELIVERY_AMQP_URL or the local services broker).")
    var url =
        ProcessInfo.processInfo.environment["LIVEDELIVERY_AMQP_URL"]
        ?? "amqp://livedelivery:livedelivery@127.0.0.1:56720/%2F"

    @Flag(help: "Declare a quorum queue instead of a classic one.")
    var quorum = false

    func run() async throws {
        var logger = Logger(label: "livedelivery-bench")
        logger.logLevel = .warning
        var configuration = try AMQPConfiguration(url: url)
        configuration.connectionName = "livedelivery-bench"
        let connection = try await RabbitMQConnection.connect(configuration, logger: logger)
        let publisher = try await RabbitMQPublisher.connect(configuration, logger: logger)
        let queue = "bench-\(UUID().uuidString.prefix(8).lowercased())"
        var arguments: [String: AMQPValue] = quorum ? ["x-queue-type": "quorum"] : [:]
        arguments["x-expires"] = 600_000
        try await connection.declareQueue(queue, durable: true, arguments: arguments)
        print("rabbitmq: \(messages) messages of \(size) bytes, queue \(queue) (\(quorum ? "quorum" : "classic"))")

        let body = [UInt8](repeating: UInt8(ascii: "x"), count: size)
        let clock = ContinuousClock()
        let publishStart = clock.now
        let messages = messages
        let inFlight = max(1, inFlight)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for index in 0..<messages {
                if index >= inFlight { try await group.next() }
                group.addTask {
                    try await publisher.publish(
                        routingKey: queue, body: body, properties: RabbitMQMessageProperties(messageID: "\(index)"))
                }
            }
            try await group.waitForAll()
        }
        report("publish (confirmed, \(inFlight) in flight)", count: messages, elapsed: clock.now - publishStart)

        let consumeStart = clock.now
        var received = 0
        let ackEvery = max(1, ackEvery)
        for try await delivery in try await connection.consume(queue: queue, prefetch: prefetch) {
            received += 1
            if received % ackEvery == 0 || received == messages {
                try await delivery.ack(multiple: ackEvery > 1)
            }
            if received == messages { break }
        }
        let acks = ackEvery == 1 ? "ack each" : "ack multiple every \(ackEvery)"
        report("consume + \(acks) (prefetch \(prefetch))", count: received, elapsed: clock.now - consumeStart)

        try await connection.deleteQueue(queue)
        await publisher.close()
        await connection.close()
    }

    private func report(_ what: String, count: Int, elapsed: Duration) {
        let seconds = elapsed.seconds
        let rate = Double(count) / max(seconds, 1e-9)
        print("  \(what): \(count) in \(String(format: "%.2f", seconds)) s = \(Int(rate)) msg/s")
    }
}
