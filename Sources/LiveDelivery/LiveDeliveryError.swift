/// Every error of the worker runtime: a code, a message without secrets, SQL or payloads, and
/// whether running the same work again may succeed.
public struct LiveDeliveryError: Error, Sendable, CustomStringConvertible {
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Base: String, Sendable {
            case invalidConfiguration, migration, database, broker, apns, shutdown
        }
        private let base: Base
        private init(_ base: Base) { self.base = base }

        /// The configuration (file, environment, policy, mapping, APNs apps) is wrong.
        public static let invalidConfiguration = Code(.invalidConfiguration)
        /// A migration file is missing, changed after it was applied, or failed.
        public static let migration = Code(.migration)
        /// PostgreSQL failed (see `isRetriable`).
        public static let database = Code(.database)
        /// RabbitMQ failed.
        public static let broker = Code(.broker)
        /// The APNs client could not be built.
        public static let apns = Code(.apns)
        /// The worker is shutting down.
        public static let shutdown = Code(.shutdown)

        public var description: String { base.rawValue }
    }

    public var code: Code
    public var message: String
    /// Problems found while validating configuration, one per line.
    public var problems: [String]
    public var isRetriable: Bool

    public init(_ code: Code, _ message: String, problems: [String] = [], isRetriable: Bool = false) {
        self.code = code
        self.message = message
        self.problems = problems
        self.isRetriable = isRetriable
    }

    public var description: String {
        (["LiveDeliveryError.\(code): \(message)"] + problems.map { "  - \($0)" }).joined(separator: "\n")
    }
}

/// Metadata keys of the worker's logs (values go in metadata, never in the message).
public enum LiveDeliveryLoggingKeys {
    public static let workerID = "worker.id"
    public static let orderID = "order.id"
    public static let eventID = "event.id"
    public static let eventType = "event.type"
    public static let activityKey = "activity.key"
    public static let decision = "decision.code"
    public static let deliveryTag = "amqp.delivery_tag"
    public static let batchSize = "batch.size"
    public static let queue = "amqp.queue"
    /// The broker node a connection is attached to (`host:port`).
    public static let broker = "amqp.node"
    public static let reason = "reason"
    public static let field = "field"
    public static let apnsID = "apns.id"
    public static let apnsStatus = "apns.status"
    public static let apnsReason = "apns.reason"
    public static let bundleID = "apns.bundle_id"
    public static let outcome = "outcome"
    public static let attempt = "attempt"
    public static let delay = "delay"
    public static let error = "error"
    public static let migration = "migration"
    public static let httpPort = "http.port"
    public static let count = "count"
    /// The W3C trace the event's message carried (`traceparent`): its trace id and the caller's span id.
    public static let traceID = "trace.id"
    public static let traceParent = "trace.parent_id"
}
