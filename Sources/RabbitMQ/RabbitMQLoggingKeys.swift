/// Logger metadata keys used by the RabbitMQ module (dot-hierarchical, values never in messages).
enum RabbitMQLoggingKeys {
    static let connectionName = "amqp.connection_name"
    static let host = "amqp.host"
    static let port = "amqp.port"
    static let vhost = "amqp.vhost"
    static let heartbeat = "amqp.heartbeat_s"
    static let channel = "amqp.channel"
    static let queue = "amqp.queue"
    static let exchange = "amqp.exchange"
    static let consumerTag = "amqp.consumer_tag"
    static let deliveryTag = "amqp.delivery_tag"
    static let error = "amqp.error"
    static let replyCode = "amqp.reply_code"
    static let outstanding = "amqp.outstanding"
}
