import Foundation
import RabbitMQ
import TestSupport
import Testing

@testable import LiveDelivery

@Suite("Broker topology", .timeLimit(.minutes(2)))
struct TopologyTests {
    @Test("queues declared by an earlier release, without a member count, are declared again as they are")
    func queuesOfAnEarlierReleaseAreKept() async throws {
        var amqp = WorkerConfiguration.AMQP(endpoints: try AMQPEndpoints(urls: TestEnvironment.amqpURL))
        amqp.exchange = TestEnvironment.uniqueName("ld.topology")
        amqp.queue = TestEnvironment.uniqueName("ld.topology.queue")
        let (connection, _) = try await RabbitMQConnection.connect(to: amqp.endpoints, logger: quietLogger)
        // As the previous release declared them.
        try await connection.declareQueue(
            amqp.deadLetterQueue, durable: true, arguments: ["x-queue-type": .string("quorum")])
        try await connection.declareQueue(
            amqp.queue, durable: true,
            arguments: [
                "x-queue-type": .string("quorum"), "x-delivery-limit": .int64(Int64(amqp.deliveryLimit)),
                "x-dead-letter-exchange": .string(amqp.deadLetterExchange),
            ])
        try await EventConsumer.declareTopology(amqp, on: connection)
        try await EventConsumer.declareTopology(amqp, on: connection)
        // A queue the worker creates itself carries the member count, and is declared again alike.
        let fresh = TestEnvironment.uniqueName("ld.topology.fresh")
        try await EventConsumer.declareQuorumQueue(fresh, arguments: [:], groupSize: 3, on: connection)
        try await EventConsumer.declareQuorumQueue(fresh, arguments: [:], groupSize: 3, on: connection)
        _ = try await connection.deleteQueue(fresh)
        await connection.close()
        try await deleteTopology(amqp)
    }
}
