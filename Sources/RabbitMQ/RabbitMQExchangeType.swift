/// An exchange type. A struct, not an enum: plugins add types (`x-consistent-hash`, …).
public struct RabbitMQExchangeType: RawRepresentable, Hashable, Sendable, ExpressibleByStringLiteral {
    public var rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public init(stringLiteral value: String) { self.rawValue = value }

    public static let direct = RabbitMQExchangeType(rawValue: "direct")
    public static let fanout = RabbitMQExchangeType(rawValue: "fanout")
    public static let topic = RabbitMQExchangeType(rawValue: "topic")
    public static let headers = RabbitMQExchangeType(rawValue: "headers")
    /// The `rabbitmq_consistent_hash_exchange` plugin's type.
    public static let consistentHash = RabbitMQExchangeType(rawValue: "x-consistent-hash")
}

/// What `queue.declare-ok` reports.
public struct RabbitMQQueueInfo: Sendable, Hashable {
    /// The queue's name (the generated one when declared with an empty name).
    public var name: String
    public var messageCount: Int
    public var consumerCount: Int
}
