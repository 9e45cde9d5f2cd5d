package import Foundation

/// The AMQP `basic` content properties of a message (published or delivered).
package struct RabbitMQMessageProperties: Sendable, Hashable {
    /// AMQP delivery mode: 1 transient, 2 persistent.
    package struct DeliveryMode: RawRepresentable, Hashable, Sendable {
        package var rawValue: UInt8
        package init(rawValue: UInt8) { self.rawValue = rawValue }
        package static let transient = DeliveryMode(rawValue: 1)
        package static let persistent = DeliveryMode(rawValue: 2)
    }

    package var contentType: String?
    package var contentEncoding: String?
    package var headers: [String: AMQPValue]
    package var deliveryMode: DeliveryMode?
    package var priority: UInt8?
    package var correlationID: String?
    package var replyTo: String?
    /// Per-message TTL in milliseconds, as a decimal string (AMQP's own type).
    package var expiration: String?
    package var messageID: String?
    /// Whole seconds on the wire.
    package var timestamp: Date?
    package var type: String?
    package var userID: String?
    package var appID: String?

    /// Defaults to a persistent message with no other property set.
    package init(
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
