public import Foundation

/// The AMQP `basic` content properties of a message (published or delivered).
public struct RabbitMQMessageProperties: Sendable, Hashable {
    /// AMQP delivery mode: 1 transient, 2 persistent.
    public struct DeliveryMode: RawRepresentable, Hashable, Sendable {
        public var rawValue: UInt8
        public init(rawValue: UInt8) { self.rawValue = rawValue }
        public static let transient = DeliveryMode(rawValue: 1)
        public static let persistent = DeliveryMode(rawValue: 2)
    }

    public var contentType: String?
    public var contentEncoding: String?
    public var headers: [String: AMQPValue]
    public var deliveryMode: DeliveryMode?
    public var priority: UInt8?
    public var correlationID: String?
    public var replyTo: String?
    /// Per-message TTL in milliseconds, as a decimal string (AMQP's own type).
    public var expiration: String?
    public var messageID: String?
    /// Whole seconds on the wire.
    public var timestamp: Date?
    public var type: String?
    public var userID: String?
    public var appID: String?

    /// Defaults to a persistent message with no other property set.
    public init(
        contentType: String? = nil,
        contentEncoding: String? = nil,
        headers: [String: AMQPValue] = [:],
        deliveryMode: DeliveryMode? = .persistent,
        priority: UInt8? = nil,
        correlationID: String? = nil,
        replyTo: String? = nil,
        expiration: String? = nil,
        messageID: String? = nil,
        timestamp: Date? = nil,
        type: String? = nil,
        userID: String? = nil,
        appID: String? = nil
    ) {
        self.contentType = contentType
        self.contentEncoding = contentEncoding
        self.headers = headers
        self.deliveryMode = deliveryMode
        self.priority = priority
        self.correlationID = correlationID
        self.replyTo = replyTo
        self.expiration = expiration
        self.messageID = messageID
        self.timestamp = timestamp
        self.type = type
        self.userID = userID
        self.appID = appID
    }
}
