package import Foundation
import LiveDelivery
package import LiveDeliveryCore
package import Logging
package import Postgres

/// Pushes given up for good (`report_failed_pushes`): list, show, and retry.
///
/// Retry does not resend the old payload (its timestamp and content may be stale). It re-plans the
/// newest state of the order: under the order's row lock it runs the core's sweep, which plans an
/// update (or end) for every activity whose newest content differs from what APNs accepted, and
/// writes it through the worker's one write path (outbox, timeline with kind `sweep` and a first
/// decision `operator_retry`). The dispatcher then sends it as usual. An activity that is final
/// (token gone, start dropped) is not restarted: nothing is planned for it.
package struct FailedPushStore: Sendable {
    package struct RetryResult: Sendable, Hashable {
        package var orderID: String
        package var activityKey: String
        /// The kinds of the pushes planned for the activity (empty: nothing to re-plan).
        package var planned: [String]
        /// The activity's state after the retry.
        package var activityState: String?
    }

    package static let retryDecision = Decision.Code(rawValue: "operator_retry")

    package let client: PostgresClient
    let tracker: OrderTracker?

    /// `tracking` (policy and mapping) is needed by ``retry(_:now:logger:)`` only.
    package init(client: PostgresClient, tracking: TrackingConfiguration? = nil) {
        self.client = client
        self.tracker = tracking.map { OrderTracker(configuration: $0) }
    }

    /// Rows of `report_failed_pushes`, newest first, through its window function: only failed attempts
    /// are read, through their own index, in the partitions from `since` on.
    package func list(since: Date? = nil, limit: Int? = 100, unrecoveredOnly: Bool = false) async throws -> ReportTable
    {
        let rows = try await client.query(
            """
            SELECT * FROM report_failed_pushes(coalesce(\(since)::timestamptz, '-infinity'), 'infinity')
            WHERE (NOT \(unrecoveredOnly) OR recovered_at IS NULL)
            ORDER BY id DESC
            LIMIT \(limit)
            """)
        return ReportTable(rows)
    }

    /// The failed push (one row) and every attempt to the same activity, oldest first; nil when
    /// `id` is not a failed push.
    package func show(_ id: Int64) async throws -> (push: ReportTable, attempts: ReportTable)? {
        let push = ReportTable(try await client.query("SELECT * FROM report_failed_pushes WHERE id = \(id)"))
        guard !push.rows.isEmpty else { return nil }
        let attempts = try await client.query(
            """
            SELECT a.id, a.attempted_at, a.kind, a.priority, a.status, a.outcome, a.reason,
                   round(a.latency_ms::numeric, 1) AS latency_ms, a.generation, a.apns_id, a.worker_id
            FROM push_attempts AS a
            JOIN push_attempts AS f ON f.order_id = a.order_id AND f.activity_key = a.activity_key
            WHERE f.id = \(id)
            ORDER BY a.id
            """)
        return (push, ReportTable(attempts))
    }

    /// Re-plans the newest state for the failed push's activity; nil when `id` is not a failed push.
    package func retry(_ id: Int64, now: Date = Date(), logger: Logger) async throws -> RetryResult? {
        guard let tracker else {
            throw LiveDeliveryError(.invalidConfiguration, "failed-pushes retry needs the policy and content mapping")
        }
        return try await client.withTransaction { connection -> RetryResult? in
            let rows = try await connection.query(
                "SELECT order_id, activity_key FROM report_failed_pushes WHERE id = \(id)")
            guard let row = rows.first else { return nil }
            let orderID = try row.decode(String.self, "order_id")
            let activityKey = try row.decode(String.self, "activity_key")
            let decision = Decision(
                Self.retryDecision, activity: activityKey,
                "an operator retried failed push \(id): the newest state is planned again if it was not delivered")
            guard
                let (state, pushes) = try await Sweeper.sweepNow(
                    orderID, decision: decision, tracker: tracker, now: now, on: connection)
            else {
                return RetryResult(orderID: orderID, activityKey: activityKey, planned: [], activityState: nil)
            }
            let planned = pushes.filter { $0.activityKey == activityKey }.map(\.kind.rawValue)
            logger.info(
                "failed push retried",
                metadata: [
                    LiveDeliveryLoggingKeys.orderID: "\(orderID)",
                    LiveDeliveryLoggingKeys.activityKey: "\(activityKey)",
                    LiveDeliveryLoggingKeys.count: "\(planned.count)",
                ])
            return RetryResult(
                orderID: orderID, activityKey: activityKey, planned: planned,
                activityState: state.activities.first { $0.key == activityKey }?.phase.rawValue)
        }
    }
}
