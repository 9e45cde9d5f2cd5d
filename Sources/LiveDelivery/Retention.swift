public import Logging
public import Postgres
public import ServiceLifecycle

/// Deletes history older than `retention.days`: processed event ids (`inbox`), APNs answers
/// (`push_attempts`) and decisions (`timeline`). Those three grow with every event and push;
/// orders, activities and the outbox do not, and dead letters have `dead-letters purge`.
///
/// Every `interval` one worker (a transaction-level advisory lock, so several workers never do the
/// same work twice) deletes in batches of `batchSize` rows, each batch its own short transaction,
/// oldest rows first, until a batch comes back short.
///
/// An event redelivered after its inbox row is gone is not a duplicate for the inbox any more;
/// the order's state still ignores it (newest wins by sequence and time).
public final class Retention: Service {
    let configuration: WorkerConfiguration.Retention
    let client: PostgresClient
    let logger: Logger

    public init(configuration: WorkerConfiguration.Retention, client: PostgresClient, logger: Logger) {
        self.configuration = configuration
        self.client = client
        self.logger = logger
    }

    public func run() async throws {
        guard configuration.days > 0 else {
            // Keep running (a service that returns would stop the worker) until shutdown.
            try? await gracefulShutdown()
            return
        }
        while !Task.isShuttingDownGracefully && !Task.isCancelled {
            do {
                let deleted = try await runOnce()
                if deleted.values.reduce(0, +) > 0 {
                    logger.info(
                        "history older than the retention deleted",
                        metadata: deleted.reduce(into: Logger.Metadata()) { $0[$1.key] = "\($1.value)" })
                }
            } catch {
                logger.warning(
                    "retention could not delete old history; retrying later",
                    metadata: [LiveDeliveryLoggingKeys.error: "\(error)"])
            }
            await sleepUnlessShuttingDown(configuration.interval)
        }
    }

    /// One round: deletes what is older than the retention, in batches; returns rows deleted per
    /// table (nothing when another worker holds the round).
    @discardableResult
    public func runOnce() async throws -> [String: Int] {
        let seconds = Double(configuration.days) * 86_400
        let batch = configuration.batchSize
        var deleted: [String: Int] = ["inbox": 0, "push_attempts": 0, "timeline": 0]
        for table in ["inbox", "push_attempts", "timeline"] {
            while !Task.isShuttingDownGracefully {
                let count: Int? = try await client.withTransaction { connection in
                    let held = try await connection.query(
                        "SELECT pg_try_advisory_xact_lock(hashtextextended('livedelivery:retention', 0)) AS held")
                    guard try held[0].decode(Bool.self, "held") else { return nil }
                    let rows: PostgresRows
                    switch table {
                    case "inbox":
                        rows = try await connection.query(
                            """
                            DELETE FROM inbox WHERE event_id IN (
                                SELECT event_id FROM inbox
                                WHERE processed_at < now() - make_interval(secs => \(seconds))
                                ORDER BY processed_at LIMIT \(batch))
                            """)
                    case "push_attempts":
                        rows = try await connection.query(
                            """
                            DELETE FROM push_attempts WHERE id IN (
                                SELECT id FROM push_attempts
                                WHERE attempted_at < now() - make_interval(secs => \(seconds))
                                ORDER BY attempted_at LIMIT \(batch))
                            """)
                    default:
                        rows = try await connection.query(
                            """
                            DELETE FROM timeline WHERE id IN (
                                SELECT id FROM timeline
                                WHERE at < now() - make_interval(secs => \(seconds))
                                ORDER BY id LIMIT \(batch))
                            """)
                    }
                    return rows.affectedRows
                }
                guard let count else { return [:] }
                deleted[table, default: 0] += count
                if count < batch { break }
            }
        }
        return deleted
    }
}
