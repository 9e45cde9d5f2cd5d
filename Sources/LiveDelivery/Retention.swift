package import Logging
package import Postgres
import ServiceLifecycle

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
package final class Retention: Service {
    let configuration: WorkerConfiguration.Retention
    let client: PostgresClient
    let logger: Logger

    package init(configuration: WorkerConfiguration.Retention, client: PostgresClient, logger: Logger) {
        self.configuration = configuration
        self.client = client
        self.logger = logger
    }

    package func run() async throws {
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

    /// The tables kept for `retention.days`: the key a batch deletes by, the time compared, and the
    /// order batches go in (each through an index). `timeline` has no index on its time: its ids
    /// grow with it, so a batch takes the oldest ids and deletes those old enough, and a batch with
    /// a row too young ends the round.
    private static let tables: [(name: String, key: String, time: String, order: String)] = [
        ("inbox", "event_id", "processed_at", "processed_at"),
        ("push_attempts", "id", "attempted_at", "attempted_at"),
        ("timeline", "id", "at", "id"),
    ]

    /// One round: deletes what is older than the retention, in batches; returns rows deleted per
    /// table (nothing when another worker holds the round).
    @discardableResult
    package func runOnce() async throws -> [String: Int] {
        let seconds = Double(configuration.days) * 86_400
        let batch = configuration.batchSize
        var deleted = Dictionary(uniqueKeysWithValues: Self.tables.map { ($0.name, 0) })
        for table in Self.tables {
            while !Task.isShuttingDownGracefully {
                let count: Int? = try await client.withTransaction { connection in
                    let held = try await connection.query(
                        "SELECT pg_try_advisory_xact_lock(hashtextextended('livedelivery:retention', 0)) AS held")
                    guard try held[0].decode(Bool.self, "held") else { return nil }
                    // The names are this type's constants, not input.
                    let query: PostgresQuery =
                        table.order == table.time
                        ? """
                        DELETE FROM \(unsafeRaw: table.name) WHERE \(unsafeRaw: table.key) IN (
                            SELECT \(unsafeRaw: table.key) FROM \(unsafeRaw: table.name)
                            WHERE \(unsafeRaw: table.time) < now() - make_interval(secs => \(seconds))
                            ORDER BY \(unsafeRaw: table.order) LIMIT \(literal: batch))
                        """
                        // The oldest rows by the order column, of those the ones old enough. Filtering the
                        // order column's index by time walked the whole table whenever no row was old
                        // enough: 560k timeline rows, 105 ms, on every round.
                        : """
                        DELETE FROM \(unsafeRaw: table.name) WHERE \(unsafeRaw: table.key) IN (
                            SELECT oldest.\(unsafeRaw: table.key) FROM (
                                SELECT \(unsafeRaw: table.key), \(unsafeRaw: table.time) FROM \(unsafeRaw: table.name)
                                ORDER BY \(unsafeRaw: table.order) LIMIT \(literal: batch)) AS oldest
                            WHERE oldest.\(unsafeRaw: table.time) < now() - make_interval(secs => \(seconds)))
                        """
                    return try await connection.query(query).affectedRows
                }
                guard let count else { return [:] }
                deleted[table.name, default: 0] += count
                if count < batch { break }
            }
        }
        return deleted
    }
}
