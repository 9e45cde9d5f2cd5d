public import Foundation
public import LiveDeliveryCore
public import Logging
public import Postgres
public import ServiceLifecycle

/// Time-based decisions: every `interval`, locks due orders (`next_sweep_at <= now()`, `FOR UPDATE
/// SKIP LOCKED`, so workers share the work) and runs the core's sweep through the same write path.
public final class Sweeper: Service {
    let configuration: WorkerConfiguration.Sweeper
    let client: PostgresClient
    let tracker: OrderTracker
    let metrics: WorkerMetrics
    let logger: Logger
    let now: @Sendable () -> Date

    public init(
        configuration: WorkerConfiguration.Sweeper, client: PostgresClient, tracking: TrackingConfiguration,
        metrics: WorkerMetrics, logger: Logger, now: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.configuration = configuration
        self.client = client
        self.tracker = OrderTracker(configuration: tracking)
        self.metrics = metrics
        self.logger = logger
        self.now = now
    }

    public func run() async throws {
        while !Task.isShuttingDownGracefully && !Task.isCancelled {
            do {
                let swept = try await sweepOnce()
                if swept >= configuration.batchSize { continue }
            } catch {
                logger.warning(
                    "sweeper cannot reach the database", metadata: [LiveDeliveryLoggingKeys.error: "\(error)"])
            }
            await sleepUnlessShuttingDown(configuration.interval)
        }
        logger.info("sweeper stopped")
    }

    /// Sweeps one batch of due orders; returns how many.
    @discardableResult
    public func sweepOnce() async throws -> Int {
        let now = self.now()
        return try await client.withTransaction { connection in
            let rows = try await connection.query(
                """
                SELECT order_id, user_id, state FROM orders
                WHERE next_sweep_at <= \(now) AND state IS NOT NULL
                ORDER BY next_sweep_at
                LIMIT \(configuration.batchSize)
                FOR UPDATE SKIP LOCKED
                """)
            var states: [OrderState] = []
            var users: [String] = []
            for row in rows {
                guard let state = try OrderStore.decodeState(try row.decode(PostgresJSON?.self, "state")) else {
                    continue
                }
                states.append(state)
                if let user = try row.decode(String?.self, "user_id") { users.append(user) }
            }
            let tokens = try await OrderStore.pushToStartTokens(users: users, on: connection)
            for state in states {
                let context = TrackingContext(pushToStartTokens: state.record.flatMap { tokens[$0.userID] } ?? [])
                var change = OrderChange(original: state, state: state)
                change.merge(tracker.sweep(state, context: context, now: now))
                if change.state.nextSweepAt == state.nextSweepAt, change.state.nextSweepAt.map({ $0 <= now }) == true {
                    // Nothing more to do now: look again after the interval (never a hot loop).
                    change.state.nextSweepAt = now.addingTimeInterval(max(configuration.interval.seconds, 60))
                }
                for decision in change.decisions where decision.code.rawValue.hasPrefix("sweep_") {
                    metrics.sweep(reason: decision.code.rawValue)
                    logger.info(
                        "sweep",
                        metadata: [
                            LiveDeliveryLoggingKeys.orderID: "\(state.orderID)",
                            LiveDeliveryLoggingKeys.activityKey: "\(decision.activityKey ?? "")",
                            LiveDeliveryLoggingKeys.decision: "\(decision.code)",
                        ])
                }
                try await OrderStore.write(change, kind: "sweep", on: connection)
            }
            return states.count
        }
    }
}
