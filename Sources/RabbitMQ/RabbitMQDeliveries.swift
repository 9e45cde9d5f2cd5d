/// The deliveries of one consumer, in arrival order.
///
/// Iteration ends without error after ``cancel()`` or ``RabbitMQConnection/close()``, and ends by
/// throwing a ``RabbitMQError`` when the channel or connection fails (`channelClosed`,
/// `connectionClosed`, `socketError`, `heartbeatTimeout`, …) or the broker cancels the consumer
/// (`consumerCancelled`). The buffer is bounded by the prefetch count. Iterate it once, or take batches
/// with ``nextBatch(max:)``: either way there is one buffer between the socket and the application.
///
/// Ending the iteration early (breaking out of the loop), or cancelling the task that iterates or takes,
/// cancels the consumer on the broker; deliveries that arrive afterwards are requeued.
package struct RabbitMQDeliveries: AsyncSequence, Sendable {
    package typealias Element = RabbitMQDelivery
    package typealias Failure = RabbitMQError

    package let queue: String
    package let consumerTag: String
    let buffer: DeliveryBuffer
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

    /// Up to `max` deliveries: all that are buffered, up to `max`, or the first to arrive when none is. `nil`
    /// once the consumer has ended (after ``cancel()`` or a graceful close) and every delivery was taken;
    /// throws the channel's or connection's error after the buffered deliveries. Take from one task at a time.
    package func nextBatch(max: Int) async throws(RabbitMQError) -> [RabbitMQDelivery]? {
        try await buffer.take(max: max)
    }

    package func makeAsyncIterator() -> AsyncIterator { AsyncIterator(iteration: Iteration(buffer)) }

    package struct AsyncIterator: AsyncIteratorProtocol {
        let iteration: Iteration

        package mutating func next() async throws(RabbitMQError) -> RabbitMQDelivery? {
            try await iteration.buffer.take(max: 1)?.first
        }
    }

    /// Ends the consumer when the loop that iterates ends early (a `break`): the iterator, and this with it,
    /// goes away.
    package final class Iteration: Sendable {
        let buffer: DeliveryBuffer

        init(_ buffer: DeliveryBuffer) { self.buffer = buffer }

        deinit { buffer.abandon() }
    }
}
