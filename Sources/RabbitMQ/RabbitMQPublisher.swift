package import Logging

/// Publishes with publisher confirms on its own connection (own thread).
///
/// Any number of ``publish(exchange:routingKey:body:properties:mandatory:)`` calls may be in
/// flight at once; each returns when the broker has confirmed that message (for quorum queues:
/// a majority of replicas has it). Confirms that cover several messages (`multiple`) are handled.
package final class RabbitMQPublisher: Sendable {
    let thread: AMQPConnectionThread

    package let configuration: AMQPConfiguration

    private init(thread: AMQPConnectionThread, configuration: AMQPConfiguration) {
        self.thread = thread
        self.configuration = configuration
    }

    deinit {
        thread.closeInBackground()
    }

    /// Connects, logs in and puts the publishing channel in confirm mode.
    package static func connect(
        _ configuration: AMQPConfiguration, logger: Logger
    ) async throws(RabbitMQError)
        -> RabbitMQPublisher
    {
        let thread = try await AMQPConnectionThread.start(configuration: configuration, logger: logger) {
            engine throws(RabbitMQError) in try engine.preparePublishing()
        }
        return RabbitMQPublisher(thread: thread, configuration: configuration)
    }

    /// False once the connection failed or ``close()`` was called.
    package var isOpen: Bool { thread.isOpen }

    /// The heartbeat interval agreed with the broker (the lower of ours and the broker's; zero: off).
    package var heartbeat: Duration { thread.negotiatedHeartbeat }

    /// Publishes one message and waits for the broker's confirm.
    ///
    /// Throws ``RabbitMQError/Code/publishNacked`` on `basic.nack`, ``RabbitMQError/Code/unroutable``
    /// when `mandatory` and no queue is bound, `channelClosed` (e.g. 404 unknown exchange; the next
    /// publish opens a new channel) or a connection-level error. On any error the message may or
    /// may not have reached a queue: publish again if it must arrive (consumers deduplicate).
    package func publish(
        exchange: String = "",
        routingKey: String,
        body: [UInt8],
        properties: RabbitMQMessageProperties = RabbitMQMessageProperties(),
        mandatory: Bool = false
    ) async throws(RabbitMQError) {
        let request = PublishRequest(
            exchange: exchange, routingKey: routingKey, body: body, properties: properties, mandatory: mandatory)
        let result: Result<Void, RabbitMQError> = await withCheckedContinuation { continuation in
            thread.enqueue(
                AMQPCommand(
                    run: { engine in engine.publish(request) { continuation.resume(returning: $0) } },
                    fail: { continuation.resume(returning: .failure($0)) },
                    closedCode: .alreadyClosed))
        }
        try result.get()
    }

    /// Closes the connection gracefully (outstanding publishes fail with `alreadyClosed`) and waits
    /// for its thread to finish.
    package func close() async {
        await thread.close()
    }
}
