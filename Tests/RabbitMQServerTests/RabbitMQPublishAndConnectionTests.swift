import RabbitMQ
import TestSupport
import Testing

@Suite(.timeLimit(.minutes(6)))
struct RabbitMQPublishAndConnectionTests {
    @Test func manyPipelinedPublishesAreAllConfirmed() async throws {
        let queue = TestEnvironment.uniqueName("rmq-pipeline")
        let connection = try await TestBroker.connect()
        let publisher = try await TestBroker.publisher()
        try await connection.declareQueue(queue, durable: false, arguments: temporaryQueueArguments)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for index in 0..<500 {
                group.addTask { try await publisher.publish(routingKey: queue, body: Array("\(index)".utf8)) }
            }
            try await group.waitForAll()
        }
        #expect(try await connection.declareQueue(queue, passive: true).messageCount == 500)
        try await connection.deleteQueue(queue)
        await connection.close()
        await publisher.close()
    }

    @Test func unroutableMandatoryPublishThrows() async throws {
        let publisher = try await TestBroker.publisher()
        let routingKey = TestEnvironment.uniqueName("rmq-nowhere")
        let error = await #expect(throws: RabbitMQError.self) {
            try await publisher.publish(exchange: "amq.direct", routingKey: routingKey, body: [1], mandatory: true)
        }
        #expect(error?.code == .unroutable)
        #expect(error?.replyCode == 312)
        #expect(error?.isRetriable == false)
        // Without mandatory the broker confirms (and drops) it.
        try await publisher.publish(exchange: "amq.direct", routingKey: routingKey, body: [1])
        #expect(publisher.isOpen)
        await publisher.close()
    }

    @Test func publishToAMissingExchangeClosesOnlyThatChannel() async throws {
        let queue = TestEnvironment.uniqueName("rmq-after404")
        let connection = try await TestBroker.connect()
        let publisher = try await TestBroker.publisher()
        try await connection.declareQueue(queue, durable: false, arguments: temporaryQueueArguments)
        let error = await #expect(throws: RabbitMQError.self) {
            try await publisher.publish(exchange: TestEnvironment.uniqueName("rmq-missing"), routingKey: "x", body: [1])
        }
        #expect(error?.code == .channelClosed)
        #expect(error?.replyCode == 404)
        // The next publish opens a fresh confirm channel.
        try await publisher.publish(routingKey: queue, body: [2])
        #expect(try await connection.declareQueue(queue, passive: true).messageCount == 1)
        try await connection.deleteQueue(queue)
        await connection.close()
        await publisher.close()
    }

    @Test func channelErrorOnDeclareLeavesTheConnectionUsable() async throws {
        let queue = TestEnvironment.uniqueName("rmq-406")
        let connection = try await TestBroker.connect()
        try await connection.declareQueue(queue, durable: false, arguments: temporaryQueueArguments)
        let error = await #expect(throws: RabbitMQError.self) {
            try await connection.declareQueue(queue, durable: true, arguments: temporaryQueueArguments)
        }
        #expect(error?.code == .channelClosed)
        #expect(error?.replyCode == 406)
        #expect(error?.isConnectionLevel == false)
        let info = try await connection.declareQueue(queue, passive: true)
        #expect(info.name == queue)
        #expect(try await connection.purgeQueue(queue) == 0)
        try await connection.deleteQueue(queue)
        await connection.close()
    }

    @Test func serverNamedQueueAndExchangeBinding() async throws {
        let exchange = TestEnvironment.uniqueName("rmq-topic")
        let connection = try await TestBroker.connect()
        let publisher = try await TestBroker.publisher()
        try await connection.declareExchange(exchange, type: .topic, durable: false)
        let info = try await connection.declareQueue("", durable: false, exclusive: true, autoDelete: true)
        #expect(!info.name.isEmpty)
        try await connection.bindQueue(info.name, exchange: exchange, routingKey: "order.*")
        try await publisher.publish(exchange: exchange, routingKey: "order.created", body: [1], mandatory: true)
        var iterator = try await connection.consume(queue: info.name, prefetch: 1).makeAsyncIterator()
        let delivery = try await iterator.nextDelivery()
        #expect(delivery.exchange == exchange)
        #expect(delivery.routingKey == "order.created")
        try await delivery.ack()
        try await connection.deleteExchange(exchange)
        await connection.close()
        await publisher.close()
    }

    @Test func wrongPasswordIsAnAuthenticationFailure() async throws {
        var configuration = try TestBroker.configuration()
        configuration.password = "definitely-wrong"
        let error = await #expect(throws: RabbitMQError.self) {
            try await RabbitMQConnection.connect(configuration, logger: TestBroker.logger)
        }
        #expect(error?.code == .authenticationFailed)
        #expect(error?.isRetriable == false)
        #expect(error.map { !"\($0)".contains("definitely-wrong") } ?? false)
    }

    @Test func unknownVhostIsRefused() async throws {
        var configuration = try TestBroker.configuration()
        configuration.vhost = TestEnvironment.uniqueName("no-such-vhost")
        let error = await #expect(throws: RabbitMQError.self) {
            try await RabbitMQConnection.connect(configuration, logger: TestBroker.logger)
        }
        #expect(error?.isRetriable == false)
    }

    @Test func closedPortIsAConnectFailure() async throws {
        var configuration = try TestBroker.configuration()
        configuration.port = 1
        configuration.connectTimeout = .seconds(2)
        let error = await #expect(throws: RabbitMQError.self) {
            try await RabbitMQConnection.connect(configuration, logger: TestBroker.logger)
        }
        #expect(error?.code == .connectFailed)
        #expect(error?.isRetriable == true)
    }

    @Test func operationsAfterCloseThrowAlreadyClosed() async throws {
        let connection = try await TestBroker.connect()
        await connection.close()
        await connection.close()
        #expect(!connection.isOpen)
        let error = await #expect(throws: RabbitMQError.self) {
            try await connection.declareQueue(TestEnvironment.uniqueName("rmq-closed"), durable: false)
        }
        #expect(error?.code == .alreadyClosed)
    }
}

@Suite struct EndpointFailoverTests {
    @Test func anUnreachableNodeIsSkipped() async throws {
        var dead = try TestBroker.configuration()
        dead.port = 1
        let live = try TestBroker.configuration()
        let (connection, node) = try await RabbitMQConnection.connect(
            to: AMQPEndpoints([dead, live]), logger: TestBroker.logger)
        #expect(node == 1)
        #expect(connection.isOpen)
        await connection.close()
        let (publisher, first) = try await RabbitMQPublisher.connect(
            to: AMQPEndpoints([live, dead]), startingAt: 1, logger: TestBroker.logger)
        #expect(first == 0)
        await publisher.close()
    }

    @Test func noReachableNodeSaysSoWithoutAPassword() async throws {
        var first = try TestBroker.configuration()
        first.port = 1
        first.password = "first-secret"
        var second = first
        second.port = 2
        second.password = "second-secret"
        let error = await #expect(throws: RabbitMQError.self) {
            try await RabbitMQConnection.connect(to: AMQPEndpoints([first, second]), logger: TestBroker.logger)
        }
        #expect(error?.code == .connectFailed)
        #expect(error?.context?.contains("none of the 2 nodes") == true)
        #expect(error.map { !"\($0)".contains("secret") } == true)
    }
}
