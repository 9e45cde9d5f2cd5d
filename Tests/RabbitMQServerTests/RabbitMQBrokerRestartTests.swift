import RabbitMQ
import TestSupport
import Testing

/// Restarts the *fault* broker: serialized, and the only suite of this target that touches it.
@Suite(.serialized, .exclusiveFaultServers, .timeLimit(.minutes(6)))
struct RabbitMQBrokerRestartTests {
    @Test func brokerRestartSurfacesTypedErrorsAndANewConnectionWorks() async throws {
        let url = TestEnvironment.faultAMQPURL
        let queue = TestEnvironment.uniqueName("rmq-restart")
        let connection = try await TestBroker.connect(url)
        let publisher = try await TestBroker.publisher(url)
        try await connection.declareQueue(queue, durable: true)
        try await publisher.publish(routingKey: queue, body: [1])
        var iterator = try await connection.consume(queue: queue, prefetch: 10).makeAsyncIterator()
        let held = try await iterator.nextDelivery()

        try await RabbitMQBroker.fault.restart()

        let consumerError = await #expect(throws: RabbitMQError.self) {
            while try await iterator.next() != nil {}
        }
        #expect(consumerError?.isConnectionLevel == true)
        #expect(consumerError?.isRetriable == true)
        #expect(!connection.isOpen)
        let ackError = await #expect(throws: RabbitMQError.self) { try await held.ack() }
        #expect(ackError?.code == .staleDelivery)
        let publishError = await #expect(throws: RabbitMQError.self) {
            try await publisher.publish(routingKey: queue, body: [2])
        }
        #expect(publishError?.isConnectionLevel == true)
        #expect(publishError?.isRetriable == true)
        await connection.close()
        await publisher.close()

        // A new connection works: the unacked persistent message survived the restart.
        let newConnection = try await connectWithRetry(url)
        let newPublisher = try await TestBroker.publisher(url)
        try await newPublisher.publish(routingKey: queue, body: [3])
        var newIterator = try await newConnection.consume(queue: queue, prefetch: 10).makeAsyncIterator()
        var bodies: [[UInt8]] = []
        for _ in 0..<2 {
            let delivery = try await newIterator.nextDelivery()
            bodies.append(delivery.body)
            try await delivery.ack()
        }
        #expect(bodies.sorted { $0.lexicographicallyPrecedes($1) } == [[1], [3]])
        try await newConnection.deleteQueue(queue)
        await newConnection.close()
        await newPublisher.close()
    }

    /// The restart script returns once the broker accepts connections; retry briefly anyway in
    /// case another test target restarted it meanwhile.
    private func connectWithRetry(_ url: String) async throws -> RabbitMQConnection {
        var attempt = 0
        while true {
            do {
                return try await TestBroker.connect(url)
            } catch let error as RabbitMQError where error.isRetriable && attempt < 20 {
                attempt += 1
                try await Task.sleep(for: .milliseconds(500))
            }
        }
    }
}
