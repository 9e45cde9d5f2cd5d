import Foundation
import RabbitMQ
import TestSupport
import Testing

@testable import LiveDelivery

@Suite("Broker topology", .timeLimit(.minutes(6)))
struct TopologyTests {
    @Test("queues declared by an earlier release, without a member count, are declared again as they are")
    func queuesOfAnEarlierReleaseAreKept() async throws {
        try await Self.whileQuorumQueuesForm { try await Self.earlierReleasesQueuesAreKept() }
    }

    static func earlierReleasesQueuesAreKept() async throws {
        var amqp = WorkerConfiguration.AMQP(endpoints: try AMQPEndpoints(urls: TestEnvironment.amqpURL))
        amqp.exchange = TestEnvironment.uniqueName("ld.topology")
        amqp.queue = TestEnvironment.uniqueName("ld.topology.queue")
        let (connection, _) = try await RabbitMQConnection.connect(to: amqp.endpoints, logger: quietLogger)
        // As the previous release declared them, each holding a message.
        try await connection.declareQueue(
            amqp.deadLetterQueue, durable: true, arguments: ["x-queue-type": .string("quorum")])
        try await connection.declareQueue(
            amqp.queue, durable: true,
            arguments: [
                "x-queue-type": .string("quorum"), "x-delivery-limit": .int64(Int64(amqp.deliveryLimit)),
                "x-dead-letter-exchange": .string(amqp.deadLetterExchange),
            ])
        let publisher = try await RabbitMQPublisher.connect(
            try AMQPConfiguration(url: TestEnvironment.amqpURL), logger: quietLogger)
        for queue in [amqp.queue, amqp.deadLetterQueue] {
            try await publisher.publish(routingKey: queue, body: Array("earlier".utf8))
        }
        try await EventConsumer.declareTopology(amqp, on: connection)
        try await EventConsumer.declareTopology(amqp, on: connection)
        // The same queues, messages and all, with the arguments they had: no member count, no new limit.
        for queue in [amqp.queue, amqp.deadLetterQueue] {
            #expect(try await connection.declareQueue(queue, passive: true).messageCount == 1, "\(queue)")
        }
        let declared = try await Self.queueArguments()
        #expect(
            declared[amqp.queue] == [
                "x-queue-type": "quorum", "x-delivery-limit": "\(amqp.deliveryLimit)",
                "x-dead-letter-exchange": amqp.deadLetterExchange,
            ])
        #expect(declared[amqp.deadLetterQueue] == ["x-queue-type": "quorum"])
        // And in use: the exchange now routes events to the queue.
        PublishedEvents.record(routingKey: "order.status", body: Array("{}".utf8), messageID: nil)
        try await publisher.publish(exchange: amqp.exchange, routingKey: "order.status", body: Array("{}".utf8))
        await publisher.close()
        #expect(try await connection.declareQueue(amqp.queue, passive: true).messageCount == 2)

        // A dead-letter queue with the member count and no delivery limit is kept as it is too.
        let sized = TestEnvironment.uniqueName("ld.topology.sized")
        try await connection.declareQueue(
            sized, durable: true,
            arguments: ["x-queue-type": .string("quorum"), "x-quorum-initial-group-size": .int64(3)])
        let limit: [String: AMQPValue] = ["x-delivery-limit": .int64(Int64(EventConsumer.deadLetterDeliveryLimit))]
        let limited = try await EventConsumer.declareQuorumQueue(
            sized, arguments: [:], optional: limit, groupSize: 3, on: connection)
        #expect(!limited, "declared again without the limit")
        #expect(
            try await Self.queueArguments()[sized] == ["x-queue-type": "quorum", "x-quorum-initial-group-size": "3"])
        _ = try await connection.deleteQueue(sized)
        // A queue the worker creates itself carries the member count, and is declared again alike.
        let fresh = TestEnvironment.uniqueName("ld.topology.fresh")
        try await EventConsumer.declareQuorumQueue(fresh, arguments: [:], groupSize: 3, on: connection)
        try await EventConsumer.declareQuorumQueue(fresh, arguments: [:], groupSize: 3, on: connection)
        #expect(
            try await Self.queueArguments()[fresh] == ["x-queue-type": "quorum", "x-quorum-initial-group-size": "3"])
        _ = try await connection.deleteQueue(fresh)
        await connection.close()
        try await deleteTopology(amqp)
    }

    @Test("the worker's queues are quorum queues with the delivery limit, the dead-letter path and three members")
    func queueArguments() async throws {
        try await Self.whileQuorumQueuesForm { try await Self.theWorkersQueuesHaveTheirArguments() }
    }

    static func theWorkersQueuesHaveTheirArguments() async throws {
        var amqp = WorkerConfiguration.AMQP(endpoints: try AMQPEndpoints(urls: TestEnvironment.amqpURL))
        amqp.exchange = TestEnvironment.uniqueName("ld.topology")
        amqp.queue = TestEnvironment.uniqueName("ld.topology.queue")
        amqp.deliveryLimit = 7
        let (connection, _) = try await RabbitMQConnection.connect(to: amqp.endpoints, logger: quietLogger)
        try await EventConsumer.declareTopology(amqp, on: connection)
        await connection.close()

        let queues = try await Self.queueArguments()
        try await deleteTopology(amqp)
        let events = try #require(queues[amqp.queue])
        #expect(events["x-queue-type"] == "quorum")
        #expect(events["x-delivery-limit"] == "7")
        #expect(events["x-dead-letter-exchange"] == amqp.deadLetterExchange)
        #expect(events["x-quorum-initial-group-size"] == "3")
        let deadLetters = try #require(queues[amqp.deadLetterQueue])
        #expect(deadLetters["x-queue-type"] == "quorum")
        #expect(deadLetters["x-delivery-limit"] == "\(EventConsumer.deadLetterDeliveryLimit)", "a limit of its own")
        #expect(deadLetters["x-dead-letter-exchange"] == nil, "a dead letter is never dead-lettered again")
    }

    /// Runs `body` again (at most three times, with new names) when the broker could not start a quorum
    /// queue's Raft group in time: under the whole suite's load on two cores, RabbitMQ answers a declaration
    /// with 541 `cluster_not_formed` and closes the connection. The worker waits that out by reconnecting;
    /// these tests declare queues themselves, so they do the same.
    static func whileQuorumQueuesForm(_ body: () async throws -> Void) async throws {
        for attempt in 1... {
            do {
                return try await body()
            } catch let error as RabbitMQError
                where error.replyCode == 541 && error.replyText?.contains("cluster_not_formed") == true && attempt < 3
            {
                continue
            }
        }
    }

    /// Every queue's arguments as the broker holds them (`rabbitmqctl list_queues`), values as text.
    static func queueArguments() async throws -> [String: [String: String]] {
        let rows = try await RabbitMQBroker.main.rows(["list_queues", "name", "arguments"])
        var queues: [String: [String: String]] = [:]
        for row in rows {
            guard let name = row["name"] as? String, let arguments = row["arguments"] as? [[Any]] else { continue }
            var values: [String: String] = [:]
            for argument in arguments where argument.count == 3 {
                if let key = argument[0] as? String { values[key] = "\(argument[2])" }
            }
            queues[name] = values
        }
        return queues
    }
}
