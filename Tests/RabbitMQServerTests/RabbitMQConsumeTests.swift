import Foundation
import RabbitMQ
import TestSupport
import Testing

@Suite(.timeLimit(.minutes(6)))
struct RabbitMQConsumeTests {
    @Test func publishWithConfirmsThenConsumeAndAck() async throws {
        let queue = TestEnvironment.uniqueName("rmq-basic")
        let connection = try await TestBroker.connect()
        let publisher = try await TestBroker.publisher()
        try await connection.declareQueue(queue, durable: false, arguments: temporaryQueueArguments)

        let timestamp = Date(timeIntervalSince1970: 1_700_000_000)
        let headers: [String: AMQPValue] = [
            "order": "o-1", "attempt": 3, "small": .int32(7), "flag": true, "ratio": 0.5,
            "nested": ["list": [1, "two"]], "raw": .bytes([0, 255]), "nothing": nil, "at": .timestamp(timestamp),
        ]
        for index in 0..<10 {
            try await publisher.publish(
                routingKey: queue, body: Array("message \(index)".utf8),
                properties: RabbitMQMessageProperties(
                    contentType: "text/plain", headers: headers, messageID: "m-\(index)", timestamp: timestamp,
                    appID: "tests"))
        }

        let deliveries = try await connection.consume(queue: queue, prefetch: 4)
        var iterator = deliveries.makeAsyncIterator()
        for index in 0..<10 {
            let delivery = try await iterator.nextDelivery()
            #expect(utf8(delivery.body) == "message \(index)")
            #expect(delivery.messageID == "m-\(index)")
            #expect(delivery.properties.contentType == "text/plain")
            #expect(delivery.properties.appID == "tests")
            #expect(delivery.properties.timestamp == timestamp)
            #expect(delivery.properties.deliveryMode == .persistent)
            #expect(delivery.headers == headers)
            #expect(!delivery.redelivered)
            #expect(delivery.exchange == "")
            #expect(delivery.routingKey == queue)
            #expect(delivery.consumerTag == deliveries.consumerTag)
            #expect(delivery.deliveryCount == 0)
            try await delivery.ack()
        }
        await connection.close()
        // Unacked deliveries would be requeued by the close: none are.
        #expect(try await TestBroker.messageCount(queue) == 0)
        await publisher.close()
        await TestBroker.cleanUp(queues: [queue])
    }

    @Test func ackMultipleSettlesEarlierDeliveries() async throws {
        let queue = TestEnvironment.uniqueName("rmq-multi")
        let connection = try await TestBroker.connect()
        let publisher = try await TestBroker.publisher()
        try await connection.declareQueue(queue, durable: false, arguments: temporaryQueueArguments)
        for index in 0..<5 { try await publisher.publish(routingKey: queue, body: [UInt8(index)]) }
        var iterator = try await connection.consume(queue: queue, prefetch: 10).makeAsyncIterator()
        var last: RabbitMQDelivery?
        for _ in 0..<5 { last = try await iterator.nextDelivery() }
        try await #require(last).ack(multiple: true)
        await connection.close()
        #expect(try await TestBroker.messageCount(queue) == 0)
        await publisher.close()
        await TestBroker.cleanUp(queues: [queue])
    }

    @Test func nackAndRejectWithAndWithoutRequeue() async throws {
        let queue = TestEnvironment.uniqueName("rmq-nack")
        let connection = try await TestBroker.connect()
        let publisher = try await TestBroker.publisher()
        try await connection.declareQueue(queue, durable: false, arguments: temporaryQueueArguments)
        try await publisher.publish(routingKey: queue, body: Array("a".utf8))
        try await publisher.publish(routingKey: queue, body: Array("b".utf8))

        var iterator = try await connection.consume(queue: queue, prefetch: 1).makeAsyncIterator()
        let first = try await iterator.nextDelivery()
        #expect(utf8(first.body) == "a")
        #expect(!first.redelivered)
        try await first.nack(requeue: true)

        let again = try await iterator.nextDelivery()
        #expect(utf8(again.body) == "a")
        #expect(again.redelivered)
        try await again.reject(requeue: true)

        let third = try await iterator.nextDelivery()
        #expect(utf8(third.body) == "a")
        #expect(third.redelivered)
        try await third.nack(requeue: false)

        let second = try await iterator.nextDelivery()
        #expect(utf8(second.body) == "b")
        try await second.reject(requeue: false)

        await connection.close()
        #expect(try await TestBroker.messageCount(queue) == 0)
        await publisher.close()
        await TestBroker.cleanUp(queues: [queue])
    }

    @Test func quorumQueueDeadLettersAPoisonMessageAtTheDeliveryLimit() async throws {
        let queue = TestEnvironment.uniqueName("rmq-poison")
        let deadLetterExchange = TestEnvironment.uniqueName("rmq-dlx")
        let deadLetterQueue = TestEnvironment.uniqueName("rmq-dlq")
        let connection = try await TestBroker.connect()
        let publisher = try await TestBroker.publisher()
        try await connection.declareExchange(deadLetterExchange, type: .direct, durable: false)
        try await connection.declareQueue(deadLetterQueue, durable: false, arguments: temporaryQueueArguments)
        try await connection.bindQueue(deadLetterQueue, exchange: deadLetterExchange, routingKey: "poison")
        try await connection.declareQueue(
            queue,
            arguments: [
                "x-queue-type": "quorum", "x-delivery-limit": 2, "x-dead-letter-exchange": .string(deadLetterExchange),
                "x-dead-letter-routing-key": "poison",
            ])
        try await publisher.publish(
            routingKey: queue, body: Array("poison".utf8), properties: RabbitMQMessageProperties(messageID: "p-1"))

        var iterator = try await connection.consume(queue: queue, prefetch: 1).makeAsyncIterator()
        var counts: [Int] = []
        for _ in 0..<3 {
            let delivery = try await iterator.nextDelivery()
            #expect(delivery.messageID == "p-1")
            counts.append(delivery.deliveryCount)
            try await delivery.nack(requeue: true)
        }
        #expect(counts == [0, 1, 2])

        var deadLetters = try await connection.consume(queue: deadLetterQueue, prefetch: 1).makeAsyncIterator()
        let dead = try await deadLetters.nextDelivery()
        #expect(utf8(dead.body) == "poison")
        #expect(dead.messageID == "p-1")
        #expect(dead.firstDeathReason == "delivery_limit")
        #expect(dead.headers["x-first-death-queue"]?.stringValue == queue)
        let death = try #require(dead.headers["x-death"]?.arrayValue?.first?.tableValue)
        #expect(death["reason"]?.stringValue == "delivery_limit")
        #expect(death["queue"]?.stringValue == queue)
        #expect(death["count"]?.intValue == 1)
        #expect(death["time"]?.dateValue != nil)
        try await dead.ack()

        await connection.close()
        await publisher.close()
        await TestBroker.cleanUp(queues: [queue, deadLetterQueue], exchanges: [deadLetterExchange])
    }

    @Test func busyConsumerKeepsItsConnectionThroughManyHeartbeats() async throws {
        let queue = TestEnvironment.uniqueName("rmq-busy")
        let connection = try await TestBroker.connect(heartbeat: .seconds(1))
        #expect(connection.heartbeat == .seconds(1))
        let publisher = try await TestBroker.publisher()
        try await connection.declareQueue(queue, durable: false, arguments: temporaryQueueArguments)
        try await publisher.publish(routingKey: queue, body: Array("slow".utf8))
        var iterator = try await connection.consume(queue: queue, prefetch: 1).makeAsyncIterator()
        let delivery = try await iterator.nextDelivery()

        // The scenario itself, not synchronisation: the application does not touch the library
        // for six heartbeat intervals. The broker drops clients after 2-3 missed heartbeats.
        try await Task.sleep(for: .seconds(6))

        #expect(connection.isOpen)
        try await delivery.ack()
        await connection.close()
        // Had the connection died, the message would have been requeued.
        #expect(try await TestBroker.messageCount(queue) == 0)
        await publisher.close()
        await TestBroker.cleanUp(queues: [queue])
    }

    @Test func brokerCancelsTheConsumerWhenItsQueueIsDeleted() async throws {
        let queue = TestEnvironment.uniqueName("rmq-cancel")
        let connection = try await TestBroker.connect()
        try await connection.declareQueue(queue, durable: false, arguments: temporaryQueueArguments)
        var iterator = try await connection.consume(queue: queue, prefetch: 1).makeAsyncIterator()
        try await connection.deleteQueue(queue)
        let error = await #expect(throws: RabbitMQError.self) {
            while try await iterator.next() != nil {}
        }
        #expect(error?.code == .consumerCancelled)
        #expect(connection.isOpen)
        await connection.close()
    }

    @Test("batches: at most `max` each, in order, every delivery once; after cancel the rest, then nil")
    func batchesComeInOrderAndEndAfterCancel() async throws {
        let queue = TestEnvironment.uniqueName("rmq-batches")
        let connection = try await TestBroker.connect()
        let publisher = try await TestBroker.publisher()
        try await connection.declareQueue(queue, durable: false, arguments: temporaryQueueArguments)
        for index in 0..<20 { try await publisher.publish(routingKey: queue, body: [UInt8(index)]) }
        let deliveries = try await connection.consume(queue: queue, prefetch: 50)
        var bodies: [UInt8] = []
        while bodies.count < 20 {
            let batch = try #require(try await deliveries.nextBatch(max: 6))
            #expect(!batch.isEmpty && batch.count <= 6, "a batch of \(batch.count)")
            bodies += batch.map { $0.body[0] }
            for delivery in batch { try await delivery.ack() }
        }
        #expect(bodies == (0..<20).map(UInt8.init))
        try await deliveries.cancel()
        #expect(try await deliveries.nextBatch(max: 6) == nil)
        #expect(try await connection.declareQueue(queue, passive: true).consumerCount == 0)
        #expect(try await TestBroker.messageCount(queue) == 0)
        await connection.close()
        await publisher.close()
        await TestBroker.cleanUp(queues: [queue])
    }

    @Test("a task cancelled while it waits for a batch gets nil, and the consumer is cancelled on the broker")
    func cancelledTakeEndsTheConsumer() async throws {
        let queue = TestEnvironment.uniqueName("rmq-take-cancel")
        let connection = try await TestBroker.connect()
        try await connection.declareQueue(queue, durable: false, arguments: temporaryQueueArguments)
        let deliveries = try await connection.consume(queue: queue, prefetch: 1)
        let waiting = Task { try await deliveries.nextBatch(max: 10) }
        waiting.cancel()
        #expect(try await waiting.value == nil)
        try await eventually("the consumer cancelled on the broker", limit: .seconds(10)) {
            try await connection.declareQueue(queue, passive: true).consumerCount == 0
        }
        try await connection.deleteQueue(queue)
        await connection.close()
    }

    @Test func applicationCancelEndsTheSequence() async throws {
        let queue = TestEnvironment.uniqueName("rmq-appcancel")
        let connection = try await TestBroker.connect()
        try await connection.declareQueue(queue, durable: false, arguments: temporaryQueueArguments)
        let deliveries = try await connection.consume(queue: queue, prefetch: 1)
        var iterator = deliveries.makeAsyncIterator()
        try await deliveries.cancel()
        let end = try await iterator.next()
        #expect(end == nil)
        #expect(try await connection.declareQueue(queue, passive: true).consumerCount == 0)
        try await connection.deleteQueue(queue)
        await connection.close()
    }

    @Test func deliveriesOfAClosedConnectionCannotBeSettled() async throws {
        let queue = TestEnvironment.uniqueName("rmq-stale")
        let connection = try await TestBroker.connect()
        let publisher = try await TestBroker.publisher()
        try await connection.declareQueue(queue, durable: false, arguments: temporaryQueueArguments)
        try await publisher.publish(routingKey: queue, body: [1])
        var iterator = try await connection.consume(queue: queue, prefetch: 1).makeAsyncIterator()
        let delivery = try await iterator.nextDelivery()
        await connection.close()
        let end = try await iterator.next()
        #expect(end == nil)
        let error = await #expect(throws: RabbitMQError.self) { try await delivery.ack() }
        #expect(error?.code == .staleDelivery)
        // The close requeued it.
        #expect(try await TestBroker.messageCount(queue) == 1)
        await publisher.close()
        await TestBroker.cleanUp(queues: [queue])
    }
}
