import Foundation
import Logging
import RabbitMQ
import TestSupport
import Testing

/// Connections to the test brokers (`scripts/services`), and small helpers.
enum TestBroker {
    static let logger = Logger(label: "RabbitMQTests")

    static func configuration(
        _ url: String = TestEnvironment.amqpURL,
        heartbeat: Duration? = nil
    ) throws -> AMQPConfiguration {
        var configuration = try AMQPConfiguration(url: url)
        configuration.connectionName = "RabbitMQTests"
        if let heartbeat { configuration.heartbeat = heartbeat }
        return configuration
    }

    static func connect(
        _ url: String = TestEnvironment.amqpURL, heartbeat: Duration? = nil
    ) async throws
        -> RabbitMQConnection
    {
        try await RabbitMQConnection.connect(configuration(url, heartbeat: heartbeat), logger: logger)
    }

    static func publisher(_ url: String = TestEnvironment.amqpURL) async throws -> RabbitMQPublisher {
        try await RabbitMQPublisher.connect(configuration(url), logger: logger)
    }

    /// How many ready messages `queue` holds, asked on a fresh connection.
    static func messageCount(_ queue: String, url: String = TestEnvironment.amqpURL) async throws -> Int {
        let connection = try await connect(url)
        do {
            let count = try await connection.declareQueue(queue, passive: true).messageCount
            await connection.close()
            return count
        } catch {
            await connection.close()
            throw error
        }
    }

    /// Deletes queues and exchanges a test created (best effort).
    static func cleanUp(queues: [String], exchanges: [String] = [], url: String = TestEnvironment.amqpURL) async {
        guard let connection = try? await connect(url) else { return }
        for queue in queues { _ = try? await connection.deleteQueue(queue) }
        for exchange in exchanges { try? await connection.deleteExchange(exchange) }
        await connection.close()
    }
}

/// A short-lived classic queue (expires if a test dies before cleaning up).
let temporaryQueueArguments: [String: AMQPValue] = ["x-expires": 300_000]

extension RabbitMQDeliveries.AsyncIterator {
    /// The next delivery; fails the test if the sequence ended.
    mutating func nextDelivery(sourceLocation: SourceLocation = #_sourceLocation) async throws -> RabbitMQDelivery {
        let delivery = try await next()
        return try #require(delivery, sourceLocation: sourceLocation)
    }
}

func utf8(_ bytes: [UInt8]) -> String { String(decoding: bytes, as: UTF8.self) }
