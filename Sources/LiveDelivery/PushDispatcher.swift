import APNs
public import Foundation
public import LiveDeliveryCore
public import Logging
public import Postgres
public import ServiceLifecycle

/// Sends the outbox: claims due rows with `FOR UPDATE SKIP LOCKED` and a lease (safe across
/// processes), sends them concurrently (bounded), and records each outcome in its own
/// transaction under the order's row lock.
///
/// - One row per activity and a lease: at most one push in flight per activity. A row replaced
///   while in flight (its generation changed) is not deleted but released, so the newer state
///   goes next and the device never gets an older state after a newer one.
/// - Retry later: the core rebuilds the push (fresh timestamp, newest content), sent after an
///   exponential backoff with jitter (at least APNs' own delay), at most `maxAttempts` times.
/// - Token gone: the core fails the activity (respecting the 410 timestamp rule).
/// - Configuration fault: the app is paused in `app_pauses` for `pause` (every worker skips it),
///   its rows are kept, and the fault is logged as an error once per pause.
/// - Woken at once by `NOTIFY livedelivery_outbox`, with a poll as fallback.
public final class PushDispatcher: Service {
    let configuration: WorkerConfiguration.Dispatcher
    let workerID: String
    let client: PostgresClient
    public let sender: any PushSending
    let tracker: OrderTracker
    let health: WorkerHealth
    let metrics: WorkerMetrics
    let logger: Logger
    let now: @Sendable () -> Date
    let wakeup = Wakeup()

    public init(
        configuration: WorkerConfiguration.Dispatcher, workerID: String, client: PostgresClient,
        sender: any PushSending, tracking: TrackingConfiguration, health: WorkerHealth, metrics: WorkerMetrics,
        logger: Logger, now: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.configuration = configuration
        self.workerID = workerID
        self.client = client
        self.sender = sender
        self.tracker = OrderTracker(configuration: tracking)
        self.health = health
        self.metrics = metrics
        self.logger = logger
        self.now = now
    }

    public func run() async throws {
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await self.listen() }
            await withGracefulShutdownHandler {
                var backoff = Backoff(base: .milliseconds(100), maximum: .seconds(5))
                while !Task.isShuttingDownGracefully && !Task.isCancelled {
                    do {
                        let claimed = try await dispatchOnce()
                        health.update { $0.database = true }
                        backoff.reset()
                        if claimed < configuration.batchSize { await wakeup.wait(timeout: configuration.poll) }
                    } catch {
                        health.update { $0.database = false }
                        logger.warning(
                            "dispatcher cannot reach the database; retrying",
                            metadata: [LiveDeliveryLoggingKeys.error: "\(error)"])
                        await sleepUnlessShuttingDown(backoff.next())
                    }
                }
            } onGracefulShutdown: {
                self.wakeup.signal()
            }
            group.cancelAll()
        }
        await sender.shutdown()
        logger.info("dispatcher stopped")
    }

    /// LISTEN for new outbox rows; every notification (and every re-LISTEN) wakes the loop.
    private func listen() async {
        for await _ in client.notifications(channel: OrderStore.notifyChannel) {
            wakeup.signal()
        }
    }

    struct Claim: Sendable {
        var orderID: String
        var activityKey: String
        var generation: Int64
        var attempts: Int
        var push: PlannedPush
    }

    /// Claims one batch of due rows, sends them, records the outcomes; returns how many it claimed.
    @discardableResult
    public func dispatchOnce() async throws -> Int {
        let leaseSeconds = configuration.lease.seconds
        let rows = try await client.query(
            """
            UPDATE outbox AS o
            SET lease_owner = \(workerID), lease_until = now() + make_interval(secs => \(leaseSeconds)),
                attempts = o.attempts + 1
            FROM (
                SELECT order_id, activity_key FROM outbox AS d
                WHERE d.not_before <= now() AND (d.lease_until IS NULL OR d.lease_until < now())
                  AND NOT EXISTS (SELECT 1 FROM app_pauses AS p
                                  WHERE p.bundle_id = d.bundle_id AND p.paused_until > now())
                ORDER BY d.not_before
                LIMIT \(configuration.batchSize)
                FOR UPDATE SKIP LOCKED
            ) AS c
            WHERE o.order_id = c.order_id AND o.activity_key = c.activity_key
            RETURNING o.order_id, o.activity_key, o.generation, o.attempts, o.push
            """)
        var claims: [Claim] = []
        for row in rows {
            claims.append(
                Claim(
                    orderID: try row.decode(String.self, "order_id"),
                    activityKey: try row.decode(String.self, "activity_key"),
                    generation: try row.decode(Int64.self, "generation"),
                    attempts: try row.decode(Int.self, "attempts"),
                    push: try row.decode(PostgresJSON.self, "push").decode(PlannedPush.self)))
        }
        guard !claims.isEmpty else { return 0 }
        await withTaskGroup(of: Void.self) { group in
            var running = 0
            for claim in claims {
                if running >= configuration.concurrency {
                    await group.next()
                    running -= 1
                }
                group.addTask { await self.sendAndRecord(claim) }
                running += 1
            }
        }
        return claims.count
    }

    private func sendAndRecord(_ claim: Claim) async {
        let started = ContinuousClock.now
        let outcome = await sender.send(claim.push)
        let latency = ContinuousClock.now - started
        var logger = self.logger
        logger[metadataKey: LiveDeliveryLoggingKeys.orderID] = "\(claim.orderID)"
        logger[metadataKey: LiveDeliveryLoggingKeys.activityKey] = "\(claim.activityKey)"
        logger[metadataKey: LiveDeliveryLoggingKeys.apnsID] = "\(claim.push.apnsID)"
        metrics.push(
            app: claim.push.bundleID, kind: claim.push.kind.rawValue, outcome: Self.outcomeName(outcome),
            reason: outcome.reason?.rawValue ?? "", latency: latency)
        var backoff = Backoff(base: .milliseconds(50), maximum: .seconds(2))
        for attempt in 1...5 {
            do {
                try await record(claim, outcome: outcome, latency: latency, logger: logger)
                return
            } catch {
                logger.warning(
                    "cannot record a push outcome; retrying",
                    metadata: [
                        LiveDeliveryLoggingKeys.error: "\(error)", LiveDeliveryLoggingKeys.attempt: "\(attempt)",
                    ])
                await sleepUnlessShuttingDown(backoff.next())
            }
        }
        // The lease expires and the push is claimed again (the core's timestamps keep it safe).
        logger.error("push outcome not recorded; the push will be sent again after its lease")
    }

    static func outcomeName(_ outcome: APNsOutcome) -> String {
        switch outcome {
        case .delivered: "delivered"
        case .tokenGone: "token_gone"
        case .retryLater: "retry_later"
        case .refreshAuth: "refresh_auth"
        case .configurationFault: "configuration_fault"
        case .payloadFault: "payload_fault"
        }
    }

    private func record(_ claim: Claim, outcome: APNsOutcome, latency: Duration, logger: Logger) async throws {
        let now = self.now()
        let push = claim.push
        try await client.withTransaction { connection in
            let state = try await OrderStore.lockOrder(claim.orderID, on: connection)
            let rows = try await connection.query(
                """
                SELECT generation FROM outbox
                WHERE order_id = \(claim.orderID) AND activity_key = \(claim.activityKey) FOR UPDATE
                """)
            let current = try rows.first.map { try $0.decode(Int64.self, "generation") }
            try await connection.query(
                """
                INSERT INTO push_attempts (order_id, activity_key, kind, bundle_id, priority, generation, apns_id, status,
                                           outcome, reason, latency_ms, worker_id)
                VALUES (\(claim.orderID), \(claim.activityKey), \(push.kind.rawValue), \(push.bundleID), \(push.priority),
                        \(claim.generation), \(push.apnsID)::uuid, \(outcome.status), \(Self.outcomeName(outcome)),
                        \(outcome.reason?.rawValue), \(latency.seconds * 1000), \(workerID))
                """)

            var coreOutcome: PushOutcome?
            var retryDelay: Duration?
            switch outcome {
            case .delivered:
                coreOutcome = .accepted
            case .tokenGone(let reason, let unregisteredAt):
                coreOutcome = .tokenRejected(reason: reason.rawValue, unregisteredAt: unregisteredAt)
                logger.info("token gone", metadata: [LiveDeliveryLoggingKeys.apnsReason: "\(reason)"])
            case .payloadFault(let reason, let status):
                coreOutcome = .dropped(reason: "\(status) \(reason.rawValue)")
                logger.error(
                    "APNs refused the push as malformed; dropped",
                    metadata: [
                        LiveDeliveryLoggingKeys.apnsReason: "\(reason)",
                        LiveDeliveryLoggingKeys.apnsStatus: "\(status)",
                    ])
            case .retryLater(let reason, _, let after):
                if claim.attempts >= configuration.maxAttempts {
                    coreOutcome = .dropped(reason: "retries exhausted: \(reason.rawValue)")
                    logger.warning(
                        "push given up after retries",
                        metadata: [
                            LiveDeliveryLoggingKeys.apnsReason: "\(reason)",
                            LiveDeliveryLoggingKeys.attempt: "\(claim.attempts)",
                        ])
                } else {
                    coreOutcome = .retryLater(reason: reason.rawValue)
                    let backoff = Backoff.delay(
                        attempt: claim.attempts - 1, base: configuration.backoffBase, maximum: configuration.backoffMax)
                    retryDelay = max(backoff, min(after, configuration.backoffMax))
                }
            case .refreshAuth(let reason):
                if claim.attempts >= configuration.maxAttempts {
                    coreOutcome = .dropped(reason: "retries exhausted: \(reason.rawValue)")
                } else {
                    coreOutcome = .retryLater(reason: reason.rawValue)
                    retryDelay = .zero
                }
            case .configurationFault(let reason, let status):
                try await pause(push.bundleID, reason: reason.rawValue, status: status, on: connection)
                logger.error(
                    "APNs configuration fault: sending for this app is paused; its pushes are kept",
                    metadata: [
                        LiveDeliveryLoggingKeys.bundleID: "\(push.bundleID)",
                        LiveDeliveryLoggingKeys.apnsReason: "\(reason)",
                        LiveDeliveryLoggingKeys.apnsStatus: "\(status.map { String($0) } ?? "")",
                        LiveDeliveryLoggingKeys.delay: "\(configuration.pause)",
                    ])
            }

            var change: OrderChange?
            if let coreOutcome, let state {
                var merged = OrderChange(original: state, state: state)
                merged.merge(tracker.record(coreOutcome, for: push, in: state, now: now))
                if let retryDelay {
                    merged.merge(tracker.retry(merged.state, now: now))
                    let notBefore = now.addingTimeInterval(retryDelay.seconds)
                    for key in merged.pushes.keys { merged.notBefore[key] = notBefore }
                }
                change = merged
            }

            // The outbox row: delete when settled and not replaced meanwhile, else release it.
            if let current {
                let resend = retryDelay != nil && change?.pushes[claim.activityKey] != nil
                if current == claim.generation && coreOutcome != nil && !resend {
                    try await connection.query(
                        "DELETE FROM outbox WHERE order_id = \(claim.orderID) AND activity_key = \(claim.activityKey)")
                } else {
                    let replaced = current != claim.generation
                    try await connection.query(
                        """
                        UPDATE outbox SET lease_owner = NULL, lease_until = NULL,
                            attempts = CASE WHEN \(replaced) THEN 0
                                            WHEN \(coreOutcome == nil) THEN greatest(attempts - 1, 0)
                                            ELSE attempts END
                        WHERE order_id = \(claim.orderID) AND activity_key = \(claim.activityKey)
                        """)
                }
            }
            guard let change else { return }
            try await OrderStore.write(change, kind: "outcome", on: connection)
        }
    }

    private func pause(_ bundleID: String, reason: String, status: Int?, on connection: PostgresConnection)
        async throws
    {
        try await connection.query(
            """
            INSERT INTO app_pauses (bundle_id, reason, status, paused_by, paused_until)
            VALUES (\(bundleID), \(reason), \(status), \(workerID),
                    now() + make_interval(secs => \(configuration.pause.seconds)))
            ON CONFLICT (bundle_id) DO UPDATE SET
                reason = EXCLUDED.reason, status = EXCLUDED.status, paused_by = EXCLUDED.paused_by,
                paused_at = now(), paused_until = EXCLUDED.paused_until
            """)
        metrics.paused(app: bundleID, reason: reason)
        health.update { snapshot in
            if !snapshot.pausedApps.contains(bundleID) { snapshot.pausedApps.append(bundleID) }
        }
    }
}
