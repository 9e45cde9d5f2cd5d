/// One message delivered to a consumer. Acknowledge it exactly once with ``ack(multiple:)``,
/// ``nack(requeue:multiple:)`` or ``reject(requeue:)``; the connection's thread sends the frame.
///
/// A delivery belongs to the channel (and connection) that received it. Once that channel is gone
/// the broker has requeued the message, and acknowledging throws ``RabbitMQError/Code/staleDelivery``;
/// a tag is never sent on another channel or connection.
package struct RabbitMQDelivery: Sendable {
    package let body: [UInt8]
    package let deliveryTag: UInt64
    /// `false` guarantees the message was never delivered before.
    package let redelivered: Bool
    package let exchange: String
    package let routingKey: String
    package let consumerTag: String
    package let properties: RabbitMQMessageProperties

    let acknowledger: AMQPAcknowledger

    package var messageID: String? { properties.messageID }
    package var headers: [String: AMQPValue] { properties.headers }

    /// Earlier delivery attempts of this message: quorum queues' `x-delivery-count` header
    /// (absent, so 0, on the first delivery).
    package var deliveryCount: Int { properties.headers["x-delivery-count"]?.intValue ?? 0 }

    /// `x-first-death-reason` of a dead-lettered message (`rejected`, `expired`, `maxlen`, `delivery_limit`).
    package var firstDeathReason: String? { properties.headers["x-first-death-reason"]?.stringValue }

    /// `x-first-death-queue` of a dead-lettered message: the queue it was first dead-lettered from.
    package var firstDeathQueue: String? { properties.headers["x-first-death-queue"]?.stringValue }

    /// Acknowledges this delivery; with `multiple`, also every earlier unacknowledged delivery of
    /// the same consumer. Returns once the frame is written.
    package func ack(multiple: Bool = false) async throws(RabbitMQError) {
        try await acknowledger.settle(tag: deliveryTag, .ack(multiple: multiple))
    }

    /// Negatively acknowledges; `requeue: false` dead-letters (or drops) the message.
    package func nack(requeue: Bool, multiple: Bool = false) async throws(RabbitMQError) {
        try await acknowledger.settle(tag: deliveryTag, .nack(multiple: multiple, requeue: requeue))
    }

    /// Rejects this one delivery (`basic.reject`).
    package func reject(requeue: Bool) async throws(RabbitMQError) {
        try await acknowledger.settle(tag: deliveryTag, .reject(requeue: requeue))
    }
}

/// How a delivery is settled.
enum AMQPSettlement: Sendable, Hashable {
    case ack(multiple: Bool)
    case nack(multiple: Bool, requeue: Bool)
    case reject(requeue: Bool)
}

/// The route from a delivery back to the thread and channel that received it.
struct AMQPAcknowledger: Sendable {
    let thread: AMQPConnectionThread
    let channel: UInt16

    func settle(tag: UInt64, _ settlement: AMQPSettlement) async throws(RabbitMQError) {
        let channel = channel
        try await thread.perform(ifClosed: .staleDelivery) { engine throws(RabbitMQError) in
            try engine.settle(channel: channel, tag: tag, settlement)
        }
    }
}
