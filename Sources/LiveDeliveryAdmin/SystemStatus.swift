import Configuration
package import Foundation
import LiveDelivery
package import Logging
package import Postgres
package import RabbitMQ

/// What `livedelivery status` shows an on-call engineer: the database's side (schema, pending
/// pushes, paused apps, workers seen recently) and the broker's (queue depths and consumers).
///
/// The two halves are read independently: a broker that cannot be reached leaves ``broker`` nil
/// and sets ``brokerError``, and the database half is still shown.
package struct SystemStatus: Sendable {
    package struct PendingPushes: Sendable, Hashable {
        package var app: String
        /// Rows in the outbox for the app, due or not.
        package var pending: Int
        /// Seconds since the oldest row that is due and not leased became due; nil when none is.
        package var oldestDueSeconds: Double?
    }

    package struct PausedApp: Sendable, Hashable {
        package var app: String
        package var reason: String
        package var status: Int?
        package var pausedUntil: Date
    }

    package struct RecentWorker: Sendable, Hashable {
        package var workerID: String
        package var lastAttemptAt: Date
    }

    package struct Queue: Sendable, Hashable {
        package var name: String
        package var messages: Int
        package var consumers: Int
    }

    /// How far back a worker counts as "seen": it sent a push in this window.
    package static let recentWorkerWindow: TimeInterval = 300

    /// The newest migration applied (0: never migrated).
    package var schemaVersion: Int
    /// The migration this release needs (``Migrator/schemaVersion``).
    package var requiredSchemaVersion: Int
    package var pendingPushes: [PendingPushes]
    package var pausedApps: [PausedApp]
    /// Workers that recorded a push attempt in the last ``recentWorkerWindow`` seconds: a worker
    /// that is running but has sent nothing is not counted.
    package var recentWorkers: [RecentWorker]
    /// The events queue and its dead-letter queue; nil when the broker was not reached.
    package var broker: (events: Queue, deadLetters: Queue)?
    /// Why the broker was not reached (no URL or secret in it).
    package var brokerError: String?

    /// Reads the database half; the broker half is filled by ``readBroker(endpoints:queue:logger:)``.
    package static func read(client: PostgresClient) async throws -> SystemStatus {
        let version = try await Migrator.appliedVersion(client)
        guard version > 0 else {
            // A database never migrated has none of the tables below; the version says what to do.
            return SystemStatus(
                schemaVersion: 0, requiredSchemaVersion: Migrator.schemaVersion, pendingPushes: [], pausedApps: [],
                recentWorkers: [], broker: nil, brokerError: nil)
        }
        let pending = try await client.query(
            """
            SELECT bundle_id, count(*) AS pending,
                   extract(epoch FROM now() - min(not_before) FILTER (
                       WHERE not_before <= now() AND (lease_until IS NULL OR lease_until < now())))::float8 AS oldest_due
            FROM outbox GROUP BY bundle_id ORDER BY bundle_id
            """
        ).map { row in
            PendingPushes(
                app: try row.decode(String.self, "bundle_id"), pending: try row.decode(Int.self, "pending"),
                oldestDueSeconds: try row.decode(Double?.self, "oldest_due"))
        }
        let paused = try await client.query(
            """
            SELECT bundle_id, reason, status, paused_until FROM app_pauses
            WHERE paused_until > now() ORDER BY bundle_id
            """
        ).map { row in
            PausedApp(
                app: try row.decode(String.self, "bundle_id"), reason: try row.decode(String.self, "reason"),
                status: try row.decode(Int?.self, "status"), pausedUntil: try row.decode(Date.self, "paused_until"))
        }
        let window = recentWorkerWindow
        let workers = try await client.query(
            """
            SELECT worker_id, max(attempted_at) AS last_attempt_at FROM push_attempts
            WHERE attempted_at > now() - make_interval(secs => \(window))
            GROUP BY worker_id ORDER BY worker_id
            """
        ).map { row in
            RecentWorker(
                workerID: try row.decode(String.self, "worker_id"),
                lastAttemptAt: try row.decode(Date.self, "last_attempt_at"))
        }
        return SystemStatus(
            schemaVersion: version, requiredSchemaVersion: Migrator.schemaVersion, pendingPushes: pending,
            pausedApps: paused, recentWorkers: workers, broker: nil, brokerError: nil)
    }

    /// Fills the broker half with passive declares of `queue` and `<queue>.dead-letter` (nothing is
    /// created); on failure records why and leaves ``broker`` nil.
    package mutating func readBroker(endpoints: AMQPEndpoints, queue: String, logger: Logger) async {
        let connection: RabbitMQConnection
        do {
            (connection, _) = try await RabbitMQConnection.connect(to: endpoints, logger: logger)
        } catch {
            brokerError = "RabbitMQ unreachable: \(error.code)"
            return
        }
        do {
            let events = try await connection.declareQueue(queue, passive: true)
            let deadLetters = try await connection.declareQueue(queue + ".dead-letter", passive: true)
            broker = (
                Queue(name: queue, messages: events.messageCount, consumers: events.consumerCount),
                Queue(name: deadLetters.name, messages: deadLetters.messageCount, consumers: deadLetters.consumerCount)
            )
        } catch {
            // 404 from a passive declare: `livedelivery migrate` (or a worker) has not declared it.
            brokerError =
                error.replyCode == 404
                ? "queue \(queue) or its dead-letter queue does not exist; run `livedelivery migrate`"
                : "RabbitMQ: \(error.code)"
        }
        await connection.close()
    }

    /// Whether the broker half is missing because the broker could not be reached at all.
    package var brokerUnreachable: Bool { broker == nil && brokerError?.hasPrefix("RabbitMQ unreachable") == true }

    /// The status as one JSON object (`livedelivery status --format json`).
    package var json: AdminJSON {
        func time(_ date: Date) -> AdminJSON { .string(ReportTable.rfc3339(date)) }
        func queue(_ queue: Queue?) -> AdminJSON {
            guard let queue else { return .null }
            return .object([
                .init("name", .string(queue.name)), .init("messages", .integer(Int64(queue.messages))),
                .init("consumers", .integer(Int64(queue.consumers))),
            ])
        }
        return .object([
            .init("schema_version", .integer(Int64(schemaVersion))),
            .init("required_schema_version", .integer(Int64(requiredSchemaVersion))),
            .init("events_queue", queue(broker?.events)),
            .init("dead_letter_queue", queue(broker?.deadLetters)),
            .init("broker_error", brokerError.map(AdminJSON.string) ?? .null),
            .init(
                "pending_pushes",
                .array(
                    pendingPushes.map {
                        .object([
                            .init("app", .string($0.app)), .init("pending", .integer(Int64($0.pending))),
                            .init("oldest_due_seconds", $0.oldestDueSeconds.map(AdminJSON.number) ?? .null),
                        ])
                    })),
            .init(
                "paused_apps",
                .array(
                    pausedApps.map {
                        .object([
                            .init("app", .string($0.app)), .init("reason", .string($0.reason)),
                            .init("status", $0.status.map { .integer(Int64($0)) } ?? .null),
                            .init("paused_until", time($0.pausedUntil)),
                        ])
                    })),
            .init("recent_worker_window_seconds", .integer(Int64(Self.recentWorkerWindow))),
            .init(
                "recent_workers",
                .array(
                    recentWorkers.map {
                        .object([
                            .init("worker_id", .string($0.workerID)), .init("last_attempt_at", time($0.lastAttemptAt)),
                        ])
                    })),
        ])
    }
}

extension AdminContext {
    /// `amqp.queue` (default `livedelivery.events`), the events queue the workers consume; its
    /// dead-letter queue is `<queue>.dead-letter`.
    package func eventsQueue() -> String {
        config.string(forKey: "amqp.queue", default: "livedelivery.events")
    }
}
