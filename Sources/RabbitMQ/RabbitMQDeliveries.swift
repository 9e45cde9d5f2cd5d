/// The deliveries of one consumer, in arrival order.
///
/// Iteration ends without error after ``cancel()`` or ``RabbitMQConnection/close()``, and ends by
/// throwing a ``RabbitMQError`` when the channel or connection fails (`channelClosed`,
/// `connectionClosed`, `socketError`, `heartbeatTimeout`, …) or the broker cancels the consumer
/// (`consumerCancelled`). The buffer is bounded by the prefetch count. Iterate it once.
///
/// Ending the iteration early (breaking out of the loop or cancelling the task) cancels the
/// consumer on the broker; deliveries that arrive afterwards are requeued.
package struct RabbitMQDeliveries: AsyncSequence, Sendable {
    package typealias Element = RabbitMQDelivery
    package typealias Failure = RabbitMQError

    package let queue: String
    package let consumerTag: String
    let stream: AsyncThrowingStream<RabbitMQDelivery, any Error>
    /// Keeps the connection (and its thread) alive while the sequence is used.
    let connection: RabbitMQConnection
    let channel: UInt16

    /// Stops the flow of new deliveries (`basic.cancel`). Deliveries already received can still be
    /// acknowledged; iteration ends after the buffered ones.
    package func cancel() async throws(RabbitMQError) {
        let channel = channel
        try await connection.thread.perform { engine throws(RabbitMQError) in
            try engine.cancelConsumer(channel: channel)
        }
    }

    package func makeAsyncIterator() -> AsyncIterator { AsyncIterator(base: stream.makeAsyncIterator()) }

    package struct AsyncIterator: AsyncIteratorProtocol {
        var base: AsyncThrowingStream<RabbitMQDelivery, any Error>.AsyncIterator

        package mutating func next() async throws(RabbitMQError) -> RabbitMQDelivery? {
            try await next(isolation: #isolation)
        }

        package mutating func next(
            isolation actor: isolated (any Actor)?
        ) async throws(RabbitMQError)
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
