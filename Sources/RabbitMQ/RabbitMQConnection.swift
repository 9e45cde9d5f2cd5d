package import Logging

/// A RabbitMQ connection for topology and consuming, owned by one dedicated thread.
///
/// rabbitmq-c is not thread-safe, so every call is handed to that thread, which also keeps
/// servicing heartbeats while the application works on deliveries. There is no automatic
/// reconnect: after a connection-level error (see ``RabbitMQError/isConnectionLevel``) connect
/// again, redeclare and consume again. Deliveries of the old connection can no longer be settled.
package final class RabbitMQConnection: Sendable {
    let thread: AMQPConnectionThread

    package let configuration: AMQPConfiguration

    private init(thread: AMQPConnectionThread, configuration: AMQPConfiguration) {
        self.thread = thread
        self.configuration = configuration
    }

    deinit {
        thread.closeInBackground()
    }

    /// Opens the TCP (or TLS) connection and logs in, advertising `consumer_cancel_notify`.
    package static func connect(
        _ configuration: AMQPConfiguration, logger: Logger
    ) async throws(RabbitMQError)
        -> RabbitMQConnection
    {
        let thread = try await AMQPConnectionThread.start(configuration: configuration, logger: logger)
        return RabbitMQConnection(thread: thread, configuration: configuration)
    }

    /// False once the connection failed or ``close()`` was called.
    package var isOpen: Bool { thread.isOpen }

    /// The heartbeat interval agreed with the broker (the lower of ours and the broker's; zero: off).
    package var heartbeat: Duration { thread.negotiatedHeartbeat }

    package func declareExchange(
        _ name: String,
        type: RabbitMQExchangeType = .direct,
        durable: Bool = true,
        autoDelete: Bool = false,
        internal: Bool = false,
        arguments: [String: AMQPValue] = [:]
    ) async throws(RabbitMQError) {
        try await thread.perform { engine throws(RabbitMQError) in
            try engine.declareExchange(
                name, type: type.rawValue, durable: durable, autoDelete: autoDelete, internal: `internal`,
                arguments: arguments)
        }
    }

    package func deleteExchange(_ name: String, ifUnused: Bool = false) async throws(RabbitMQError) {
        try await thread.perform { engine throws(RabbitMQError) in try engine.deleteExchange(name, ifUnused: ifUnused) }
    }

    /// Declares a queue. Quorum queues and their policies go in `arguments`, e.g.
    /// `["x-queue-type": "quorum", "x-delivery-limit": 5, "x-dead-letter-exchange": "dlx"]`.
    /// With `passive`, only checks that the queue exists. An empty name lets the broker pick one.
    @discardableResult
    package func declareQueue(
        _ name: String,
        durable: Bool = true,
        exclusive: Bool = false,
        autoDelete: Bool = false,
        passive: Bool = false,
        arguments: [String: AMQPValue] = [:]
    ) async throws(RabbitMQError) -> RabbitMQQueueInfo {
        try await thread.perform { engine throws(RabbitMQError) in
            try engine.declareQueue(
                name, passive: passive, durable: durable, exclusive: exclusive, autoDelete: autoDelete,
                arguments: arguments)
        }
    }

    package func bindQueue(
        _ queue: String,
        exchange: String,
        routingKey: String,
        arguments: [String: AMQPValue] = [:]
    ) async throws(RabbitMQError) {
        try await binding(queue, exchange: exchange, routingKey: routingKey, arguments: arguments, bind: true)
    }

    package func unbindQueue(
        _ queue: String,
        exchange: String,
        routingKey: String,
        arguments: [String: AMQPValue] = [:]
    ) async throws(RabbitMQError) {
        try await binding(queue, exchange: exchange, routingKey: routingKey, arguments: arguments, bind: false)
    }

    private func binding(
        _ queue: String, exchange: String, routingKey: String, arguments: [String: AMQPValue], bind: Bool
    ) async throws(RabbitMQError) {
        try await thread.perform { engine throws(RabbitMQError) in
            try engine.bindQueue(queue, exchange: exchange, routingKey: routingKey, arguments: arguments, bind: bind)
        }
    }

    /// Binds exchange to exchange (`exchange.bind`): what `source` routes with `routingKey` goes on to
    /// `destination` as well. Idempotent.
    package func bindExchange(
        _ destination: String, to source: String, routingKey: String
    ) async throws(RabbitMQError) {
        try await thread.perform { engine throws(RabbitMQError) in
            try engine.bindExchange(destination: destination, source: source, routingKey: routingKey)
        }
    }

    /// Deletes a queue; returns how many messages it held.
    @discardableResult
    package func deleteQueue(
        _ name: String, ifUnused: Bool = false, ifEmpty: Bool = false
    ) async throws(RabbitMQError)
        -> Int
    {
        try await thread.perform { engine throws(RabbitMQError) in
            try engine.deleteQueue(name, ifUnused: ifUnused, ifEmpty: ifEmpty)
        }
    }

    /// Removes all ready messages from a queue; returns how many.
    @discardableResult
    package func purgeQueue(_ name: String) async throws(RabbitMQError) -> Int {
        try await thread.perform { engine throws(RabbitMQError) in try engine.purgeQueue(name) }
    }

    /// Starts a manual-acknowledgement consumer on its own channel.
    ///
    /// `prefetch` (`basic.qos`, per consumer, set before `basic.consume`) bounds how many
    /// unsettled deliveries the broker sends, and so the buffer of the returned sequence.
    package func consume(
        queue: String,
        prefetch: UInt16,
        consumerTag: String? = nil,
        exclusive: Bool = false,
        arguments: [String: AMQPValue] = [:]
    ) async throws(RabbitMQError) -> RabbitMQDeliveries {
        let thread = self.thread
        // The application stopped taking deliveries: stop the flow; later deliveries are requeued.
        let buffer = DeliveryBuffer { buffer in
            thread.enqueue(
                AMQPCommand(
                    run: { engine in engine.cancelConsumer(of: buffer) },
                    fail: { _ in },
                    closedCode: .alreadyClosed))
        }
        let started: (channel: UInt16, consumerTag: String)
        do {
            started = try await thread.perform { engine throws(RabbitMQError) in
                try engine.consume(
                    queue: queue, prefetch: prefetch, consumerTag: consumerTag, exclusive: exclusive,
                    arguments: arguments, buffer: buffer)
            }
        } catch {
            buffer.finish(throwing: error)
            throw error
        }
        let channel = started.channel
        return RabbitMQDeliveries(
            queue: queue, consumerTag: started.consumerTag, buffer: buffer, connection: self, channel: channel)
    }

    /// Closes the connection (`connection.close` when it is healthy, which also closes its
    /// channels) and waits until its thread has finished. Consumers' sequences end without error;
    /// unsettled deliveries are requeued by the broker. Safe to call more than once.
    package func close() async {
        await thread.close()
    }
}
