package import Foundation
package import Logging
package import Postgres
import ServiceLifecycle

/// Keeps the day partitions of the history tables (`push_attempts`, `timeline`, `inbox`; sql/112):
/// creates them ahead of time, and drops those older than `retention.days`.
///
/// Every `interval` one worker (a transaction-level advisory lock, so several workers never do the
/// same work twice) runs a round in one short transaction: today's partitions and
/// ``HistoryPartitions/aheadDays`` more are created if missing, then (unless `retention.days` is 0)
/// every day partition that ended more than `retention.days` ago is dropped, and the default
/// partitions' rows that old are deleted. Each round also rolls up the push outcomes of the hours that
/// closed (sql/114), so rounds run every five minutes by default. Dropping a day costs a few kilobytes of WAL whatever it
/// held, and leaves nothing to vacuum.
///
/// An event redelivered after its inbox row is gone is not a duplicate for the inbox any more;
/// the order's state still ignores it (newest wins by sequence and time).
package final class Retention: Service {
    let configuration: WorkerConfiguration.Retention
    let client: PostgresClient
    let logger: Logger
    let now: @Sendable () -> Date

    package init(
        configuration: WorkerConfiguration.Retention, client: PostgresClient, logger: Logger,
        now: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.configuration = configuration
        self.client = client
        self.logger = logger
        self.now = now
    }

    /// What one round did.
    package struct Round: Sendable, Equatable {
        /// Partitions created (`push_attempts_p20261127`, …).
        package var created: [String] = []
        /// Day partitions dropped.
        package var dropped: [String] = []
        /// Rows deleted from each table's default partition.
        package var deleted: [String: Int] = [:]
        /// Hours of push outcomes rolled up (sql/114).
        package var rolledUp = 0

        package init(created: [String] = [], dropped: [String] = [], deleted: [String: Int] = [:], rolledUp: Int = 0) {
            self.created = created
            self.dropped = dropped
            self.deleted = deleted
            self.rolledUp = rolledUp
        }
    }

    package func run() async throws {
        while !Task.isShuttingDownGracefully && !Task.isCancelled {
            do {
                if let round = try await runOnce(),
                    !round.created.isEmpty || !round.dropped.isEmpty
                        || round.deleted.values.contains(where: { $0 > 0 })
                {
                    var metadata: Logger.Metadata = [
                        "partitions.created": "\(round.created.joined(separator: ","))",
                        "partitions.dropped": "\(round.dropped.joined(separator: ","))",
                    ]
                    for (table, rows) in round.deleted where rows > 0 {
                        metadata["\(table)_default.deleted"] = "\(rows)"
                    }
                    logger.info("history partitions kept", metadata: metadata)
                }
            } catch {
                logger.warning(
                    "history partitions could not be kept; retrying later",
                    metadata: [LiveDeliveryLoggingKeys.error: "\(error)"])
            }
            await sleepUnlessShuttingDown(configuration.interval)
        }
    }

    /// One round at `now` (the service's clock unless given); nil when another worker holds the round.
    @discardableResult
    package func runOnce(now: Date? = nil) async throws -> Round? {
        let now = now ?? self.now()
        return try await client.withTransaction { connection -> Round? in
            guard try await HistoryPartitions.takeRound(on: connection) else { return nil }
            var round = Round()
            round.created = try await HistoryPartitions.upkeep(now: now, on: connection)
            round.rolledUp = try await HistoryPartitions.rollUp(now: now, on: connection)
            guard configuration.days > 0 else { return round }
            for expired in try await HistoryPartitions.dropExpired(
                now: now, keepDays: configuration.days, on: connection)
            {
                round.dropped += expired.dropped
                round.deleted[expired.table] = expired.defaultRowsDeleted
            }
            return round
        }
    }
}
