/// The deliveries of one consumer, in arrival order.
///
/// Iteration ends without error after ``cancel()`` or ``RabbitMQConnection/close()``, and ends by
/// throwing a ``RabbitMQError`` when the channel or connection fails (`channelClosed`,
/// `connectionClosed`, `socketError`, `heartbeatTimeout`, …) or the broker cancels the consumer
/// (`consumerCancelled`). The buffer is bounded by the prefetch count. Iterate it once.
///
/// Ending the iteration early (breaking out of the loop or cancelling the task) cancels the
/// consumer on the broker; deliveries that arrive afterwards are requeued.
public struct RabbitMQDeliveries: AsyncSequence, Sendable {
    public typealias Element = RabbitMQDelivery
    public typealias Failure = RabbitMQError

    public let queue: String
    public let consumerTag: String
    let stream: AsyncThrowingStream<RabbitMQDelivery, any Error>
    /// Keeps the connection (and its thread) alive while the sequence is used.
    let connection: RabbitMQConnection
    let channel: UInt16

    /// Stops the flow of new deliveries (`basic.cancel`). Deliveries already received can still be
    /// acknowledged; iteration ends after the buffered ones.
    public func cancel() async throws(RabbitMQError) {
        let channel = channel
        try await connection.thread.perform { engine throws(RabbitMQError) in try engine.cancelConsumer(channel: channel) }
    }

    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(base: stream.makeAsyncIterator()) }

    public struct AsyncIterator: AsyncIteratorProtocol {
        var base: AsyncThrowingStream<RabbitMQDelivery, any Error>.AsyncIterator

        public mutating func next() async throws(RabbitMQError) -> RabbitMQDelivery? {
            try await next(isolation: #isolation)
        }

        public mutating func next(isolation actor: isolated (any Actor)?) async throws(RabbitMQError)
            -> RabbitMQDelivery?
        {
            do {
                return try await base.next(isolation: actor)
            } catch let error as RabbitMQError {
                throw error
            } catch {
                throw RabbitMQError(code: .protocolError, context: "unexpected consumer error")
            }
        }
    }
}
