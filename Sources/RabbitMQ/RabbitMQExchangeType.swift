/// An exchange type. A struct, not an enum: plugins add types (`x-consistent-hash`, …).
package struct RabbitMQExchangeType: RawRepresentable, Hashable, Sendable, ExpressibleByStringLiteral {
    package var rawValue: String
    package init(rawValue: String) { self.rawValue = rawValue }
    package init(stringLiteral value: String) { self.rawValue = value }

    package static let direct = RabbitMQExchangeType(rawValue: "direct")
    package static let fanout = RabbitMQExchangeType(rawValue: "fanout")
    package static let topic = RabbitMQExchangeType(rawValue: "topic")
    package static let headers = RabbitMQExchangeType(rawValue: "headers")
    /// The `rabbitmq_consistent_hash_exchange` plugin's type.
    package static let consistentHash = RabbitMQExchangeType(rawValue: "x-consistent-hash")
}

/// What `queue.declare-ok` reports.
package struct RabbitMQQueueInfo: Sendable, Hashable {
    /// The queue's name (the generated one when declared with an empty name).
    package var name: String
    package var messageCount: Int
    package var consumerCount: Int
}
