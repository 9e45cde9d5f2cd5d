package import Foundation
package import LiveDeliveryCore
package import Logging
package import Postgres
import ServiceLifecycle

/// What one sweep pass did.
package struct SweepSummary: Sendable, Hashable {
    /// One sweeper decision about one activity.
    package struct Action: Sendable, Hashable {
        package var orderID: String
        package var activityKey: String
        /// `sweep_lifetime`, `sweep_idle`, `sweep_never_adopted`, `sweep_terminal_not_ended`.
        package var reason: String
    }

    /// Orders looked at (due and not locked by another worker).
    package var orders = 0
    package var actions: [Action] = []
    package init() {}

    /// How many actions per reason.
    package var reasonCounts: [String: Int] { actions.reduce(into: [:]) { $0[$1.reason, default: 0] += 1 } }

    mutating func add(_ other: SweepSummary) {
        orders += other.orders
        actions += other.actions
    }
}

/// Time-based decisions: every `interval`, locks due orders (`next_sweep_at <= now()`, `FOR UPDATE
/// SKIP LOCKED`, so workers share the work) and runs the core's sweep through the same write path.
/// Each decision is counted (`livedelivery_sweeps_total{reason}`) and written to the timeline
/// (kind `sweep`). Starts waiting for the per-device limit are planned again here. An order whose
/// column was left earlier than its state's own time (see `OrderStore.SweepColumn`) is not swept; its
/// column is moved to that time.
package final class Sweeper: Service {
    let configuration: WorkerConfiguration.Sweeper
    let pushToStart: WorkerConfiguration.PushToStart
    let client: PostgresClient
    let tracker: OrderTracker
    let metrics: WorkerMetrics
    let logger: Logger
    let now: @Sendable () -> Date
    /// The dispatcher's lease: a push handed over in memory with no answer recorded after it is sent again.
    let lease: Duration

    package init(
        configuration: WorkerConfiguration.Sweeper, client: PostgresClient, tracking: TrackingConfiguration,
        metrics: WorkerMetrics, logger: Logger, pushToStart: WorkerConfiguration.PushToStart = .init(),
        lease: Duration = .seconds(60), now: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.lease = lease
        self.configuration = configuration
        self.pushToStart = pushToStart
        self.client = client
        self.tracker = OrderTracker(configuration: tracking)
        self.metrics = metrics
        self.logger = logger
        self.now = now
    }

    package func run() async throws {
        while !Task.isShuttingDownGracefully && !Task.isCancelled {
            // A failure of either part leaves the other to run.
            do {
                try await resendLostPushes()
            } catch {
                logger.warning(
                    "sweeper cannot look for pushes handed over without an answer",
                    metadata: [LiveDeliveryLoggingKeys.error: "\(error)"])
            }
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
    package func sweepOnce() async throws -> Int {
        try await sweepBatch().orders
    }

    /// Sweeps batches until nothing is due now (or `maxBatches` were swept); what `livedelivery
    /// sweep --once` runs.
    package func sweepAll(maxBatches: Int = 1000) async throws -> SweepSummary {
        var summary = SweepSummary()
        for _ in 0..<maxBatches {
            let batch = try await sweepBatch()
            summary.add(batch)
            if batch.orders < configuration.batchSize { break }
        }
        return summary
    }

    /// Sweeps one batch of due orders; returns what it did.
    package func sweepBatch() async throws -> SweepSummary {
        let now = self.now()
        return try await client.withTransaction { connection in
            let due = try await OrderStore.lockDue(now: now, limit: configuration.batchSize, on: connection)
            // The users' advisory locks (as the consumer takes them), without waiting: an order
            // whose user is busy elsewhere is swept next time. Under them the start limit holds.
            let lockedUsers = try await UserLocks.tryLock(due.states.compactMap { $0.record?.userID }, on: connection)
            let states = due.states.filter { state in state.record.map { lockedUsers.contains($0.userID) } ?? true }
            let users = Set(states.flatMap { TrackingContext.users(of: $0, userID: $0.record?.userID) }).sorted()
            let (tokens, settings) = try await OrderStore.tokensAndSettings(users: users, on: connection)
            var startLimit = try await StartLimit.load(
                devices: tokens.values.flatMap { $0.map(\.deviceID) }, configuration: pushToStart, now: now,
                on: connection)
            var summary = SweepSummary()
            summary.orders = states.count + due.deferred
            for state in states {
                let context = TrackingContext(
                    order: state, userID: state.record?.userID, tokens: tokens, settings: settings,
                    startRefusedDevices: startLimit.refused)
                let step = tracker.sweep(state, context: context, now: now)
                startLimit.count(step.effects, pendingStarts: StartLimit.pendingStarts(state), after: step.state)
                let change = sweepChange(state, step, now: now)
                summary.actions += report(change)
                try await OrderStore.write(
                    change, kind: "sweep", hold: lease, sweepColumn: .exact, now: now, on: connection)
            }
            return summary
        }
    }

    /// Sends again the pushes handed to a dispatcher in memory whose answers were not recorded within the lease
    /// (their worker stopped): one round of ``HandedPushes``, skipped while another worker's round runs. A push
    /// still its activity's pending one is built again (``OrderTracker/resend(_:updating:now:)``) and written to
    /// the outbox for any dispatcher to claim. Returns how many were.
    @discardableResult
    package func resendLostPushes(limit: Int = 10_000) async throws -> Int {
        let now = self.now()
        let (written, lost) = try await client.withTransaction { connection in
            guard let slice = try await HandedPushes.slice(leaseSeconds: lease.seconds, limit: limit, on: connection)
            else { return ([OrderChange](), 0) }
            var changes: [OrderChange] = []
            var resent = Set<Outbox.Key>()
            if !slice.unanswered.isEmpty {
                var lost: [String: Set<String>] = [:]
                for push in slice.unanswered { lost[push.orderID, default: []].insert(push.apnsID.lowercased()) }
                let states = try await OrderStore.lockExisting(Array(lost.keys), on: connection)
                for (orderID, ids) in lost.sorted(by: { $0.key < $1.key }) {
                    guard let state = states[orderID] ?? nil else { continue }
                    var change = OrderChange(original: state, state: state)
                    for activity in state.activities {
                        guard let pending = activity.pending, ids.contains(pending.apnsID.lowercased()) else {
                            continue
                        }
                        change.merge(tracker.resend(activity.key, updating: &change.state, now: now))
                        resent.insert(Outbox.Key(orderID: orderID, activityKey: activity.key))
                    }
                    if change.changed { changes.append(change) }
                }
                // The pushes sent again are not held for an answer: none is coming.
                try await OrderStore.write(changes, kind: "sweep", answered: resent, now: now, on: connection)
            }
            try await HandedPushes.checked(until: slice.until, on: connection)
            return (changes, slice.unanswered.count)
        }
        for change in written {
            for push in change.orderedPushes {
                metrics.sweep(reason: "handed_push_resent")
                logger.warning(
                    "a push handed to a worker that stopped before its answer was recorded is sent again",
                    metadata: [
                        LiveDeliveryLoggingKeys.orderID: "\(change.state.orderID)",
                        LiveDeliveryLoggingKeys.activityKey: "\(push.activityKey)",
                        LiveDeliveryLoggingKeys.apnsID: "\(push.apnsID)",
                    ])
            }
        }
        if lost > 0 && written.isEmpty {
            logger.debug(
                "pushes without a recorded answer were replaced meanwhile",
                metadata: [
                    LiveDeliveryLoggingKeys.count: "\(lost)"
                ])
        }
        return written.reduce(0) { $0 + $1.orderedPushes.count }
    }

    /// Locks one order and sweeps it now, with `decision` first among the decisions its timeline row
    /// records (an operator's action, such as retrying a failed push); returns the state written and the
    /// pushes planned, nil when the order does not exist.
    package static func sweepNow(
        _ orderID: String, decision: Decision, tracker: OrderTracker, now: Date, on connection: PostgresConnection
    ) async throws -> (state: OrderState, pushes: [PlannedPush])? {
        guard let state = try await OrderStore.lockOrder(orderID, on: connection) else { return nil }
        let users = TrackingContext.users(of: state, userID: state.record?.userID)
        let (tokens, settings) = try await OrderStore.tokensAndSettings(users: users, on: connection)
        let context = TrackingContext(order: state, userID: state.record?.userID, tokens: tokens, settings: settings)
        var change = OrderChange(original: state, state: state)
        change.decisions.append(decision)
        change.merge(tracker.sweep(state, context: context, now: now))
        try await OrderStore.write(change, kind: "sweep", now: now, on: connection)
        return (change.state, change.orderedPushes)
    }

    /// The order's change by a sweep. An order with nothing more to do now is looked at again after the
    /// interval (never a hot loop).
    private func sweepChange(_ state: OrderState, _ step: Step, now: Date) -> OrderChange {
        var change = OrderChange(original: state, state: state)
        change.merge(step)
        if change.state.nextSweepAt == state.nextSweepAt, change.state.nextSweepAt.map({ $0 <= now }) == true {
            change.state.nextSweepAt = now.addingTimeInterval(max(configuration.interval.seconds, 60))
        }
        return change
    }

    /// Counts and logs the sweep's own decisions; returns them.
    private func report(_ change: OrderChange) -> [SweepSummary.Action] {
        var actions: [SweepSummary.Action] = []
        for decision in change.decisions where decision.code.rawValue.hasPrefix("sweep_") {
            metrics.sweep(reason: decision.code.rawValue)
            actions.append(
                .init(
                    orderID: change.state.orderID, activityKey: decision.activityKey ?? "",
                    reason: decision.code.rawValue))
            logger.info(
                "sweep",
                metadata: [
                    LiveDeliveryLoggingKeys.orderID: "\(change.state.orderID)",
                    LiveDeliveryLoggingKeys.activityKey: "\(decision.activityKey ?? "")",
                    LiveDeliveryLoggingKeys.decision: "\(decision.code)",
                ])
        }
        return actions
    }
}
