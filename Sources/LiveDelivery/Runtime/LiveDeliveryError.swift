/// Every error of the worker runtime: a code, a message without secrets, SQL or payloads, and
/// whether running the same work again may succeed.
package struct LiveDeliveryError: Error, Sendable, CustomStringConvertible {
    package struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Base: String, Sendable {
            case invalidConfiguration, migration, database, broker, apns, shutdown
        }
        private let base: Base
        private init(_ base: Base) { self.base = base }

        /// The configuration (file, environment, policy, mapping, APNs apps) is wrong.
        package static let invalidConfiguration = Code(.invalidConfiguration)
        /// A migration file is missing, changed after it was applied, or failed.
        package static let migration = Code(.migration)
        /// PostgreSQL failed (see `isRetriable`).
        package static let database = Code(.database)
        /// RabbitMQ failed.
        package static let broker = Code(.broker)
        /// The APNs client could not be built.
        package static let apns = Code(.apns)
        /// The worker is shutting down.
        package static let shutdown = Code(.shutdown)

        package var description: String { base.rawValue }
    }

    package var code: Code
    package var message: String
    /// Problems found while validating configuration, one per line.
    package var problems: [String]
    package var isRetriable: Bool

    package init(_ code: Code, _ message: String, problems: [String] = [], isRetriable: Bool = false) {
        self.code = code
        self.message = message
        self.problems = problems
        self.isRetriable = isRetriable
    }

    package var description: String {
        (["LiveDeliveryError.\(code): \(message)"] + problems.map { "  - \($0)" }).joined(separator: "\n")
    }
}

/// Metadata keys of the worker's logs (values go in metadata, never in the message).
package enum LiveDeliveryLoggingKeys {
    package static let workerID = "worker.id"
    package static let orderID = "order.id"
    package static let eventID = "event.id"
    package static let eventType = "event.type"
    package static let activityKey = "activity.key"
    package static let decision = "decision.code"
    package static let deliveryTag = "amqp.delivery_tag"
    package static let batchSize = "batch.size"
    package static let queue = "amqp.queue"
    /// The broker node a connection is attached to (`host:port`).
    package static let broker = "amqp.node"
    package static let reason = "reason"
    package static let field = "field"
    package static let apnsID = "apns.id"
    package static let apnsStatus = "apns.status"
    package static let apnsReason = "apns.reason"
    package static let bundleID = "apns.bundle_id"
    package static let outcome = "outcome"
    package static let attempt = "attempt"
    package static let delay = "delay"
    package static let error = "error"
    package static let migration = "migration"
    package static let httpPort = "http.port"
    package static let count = "count"
    /// The cell an event is forwarded to (the one its order belongs to).
    package static let forwardedTo = "cell.to"
    /// The W3C trace the event's message carried (`traceparent`): its trace id and the caller's span id.
    package static let traceID = "trace.id"
    package static let traceParent = "trace.parent_id"
}
