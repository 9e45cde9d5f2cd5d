import APNs
package import Foundation
package import LiveDeliveryCore
package import Logging
package import Postgres
import ServiceLifecycle
import Tracing

/// Sends the outbox: claims due rows with `FOR UPDATE SKIP LOCKED` and a lease (safe across
/// processes), sends them concurrently (bounded), and records the outcomes set-based: every
/// answer that arrived while the previous recording ran goes into one transaction (group
/// commit), so the database cost of a push falls as the load rises.
///
/// - One row per activity and a lease: at most one push in flight per activity. A row replaced
///   while in flight (its generation changed) is not deleted but released, so the newer state
///   goes next and the device never gets an older state after a newer one.
/// - Retry later: the core rebuilds the push (fresh timestamp, newest content), sent after an
///   exponential backoff with jitter (at least APNs' own delay), at most `maxAttempts` times.
/// - Token gone: the core fails the activity (respecting the 410 timestamp rule).
/// - Configuration fault: the app is paused in `app_pauses` for `pause` (every worker skips it),
///   its rows are kept, and the fault is logged as an error once per pause.
/// - Woken at once by `NOTIFY livedelivery_outbox`, with a poll as fallback; the new pushes of
///   this process's own consumer come in memory, without an outbox row, while there are free slots.
///   ``PushCapacity`` owns the slots, the hand-off and the wake-ups between the loops.
package final class PushDispatcher: Service {
    let configuration: WorkerConfiguration.Dispatcher
    let workerID: String
    let client: PostgresClient
    package let sender: any PushSending
    let tracker: OrderTracker
    let health: WorkerHealth
    let metrics: WorkerMetrics
    let logger: Logger
    let now: @Sendable () -> Date
    /// The pushes in flight and their limit, the consumer's hand-off, the answers awaiting their
    /// recording, and the wake-ups between the loops.
    let capacity: PushCapacity

    /// Pushes sent or awaiting their recording (the `livedelivery_pushes_in_flight` gauge).
    package var pushesInFlight: Int { capacity.inFlight }
    /// States this process wrote (the consumer's, moments before a push is recorded).
    let states: OrderStateCache
    /// An APNs request's span continues the trace of the event that planned the push.
    let tracer: any Tracer

    package convenience init(
        configuration: WorkerConfiguration.Dispatcher, workerID: String, client: PostgresClient,
        sender: any PushSending, tracking: TrackingConfiguration, health: WorkerHealth, metrics: WorkerMetrics,
        logger: Logger, now: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.init(
            configuration: configuration, workerID: workerID, client: client, sender: sender, tracking: tracking,
            health: health, metrics: metrics, logger: logger, states: OrderStateCache(),
            tracer: InstrumentationSystem.tracer, now: now)
    }

    init(
        configuration: WorkerConfiguration.Dispatcher, workerID: String, client: PostgresClient,
        sender: any PushSending, tracking: TrackingConfiguration, health: WorkerHealth, metrics: WorkerMetrics,
        logger: Logger, states: OrderStateCache, tracer: any Tracer, now: @escaping @Sendable () -> Date
    ) {
        self.tracer = tracer
        self.states = states
        self.configuration = configuration
        self.workerID = workerID
        self.client = client
        self.sender = sender
        self.tracker = OrderTracker(configuration: tracking)
        self.health = health
        self.metrics = metrics
        self.logger = logger
        self.now = now
        self.capacity = PushCapacity(
            leaseSeconds: configuration.lease.seconds, limit: configuration.concurrency,
            batchSize: configuration.batchSize, poll: configuration.poll, roomWait: configuration.handoffWait)
    }

    /// Claims while fewer than `concurrency` pushes are in flight (sent or awaiting their
    /// recording), sends each claim at once, and lets one recorder task write the answers in
    /// groups. On graceful shutdown it stops claiming, waits for the answers in flight and
    /// records them.
    package func run() async throws {
        let capacity = self.capacity
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await self.listen() }
            async let recorded: Void = recordAnswers()
            await withGracefulShutdownHandler {
                await withDiscardingTaskGroup { sends in
                    await claimLoop(sends: &sends)
                }
            } onGracefulShutdown: {
                capacity.shutdown()
            }
            capacity.finish()
            await recorded
            group.cancelAll()
        }
        await sender.shutdown()
        logger.info("dispatcher stopped")
    }

    /// Sends what the consumer hands over, claims due rows while there is room, and waits otherwise
    /// (``PushCapacity`` decides which).
    private func claimLoop(sends: inout DiscardingTaskGroup) async {
        var backoff = Backoff(base: .milliseconds(100), maximum: .seconds(5))
        // Each push is sent at once; its answer goes to the recorder.
        func start(_ claims: [Outbox.Claim], _ sends: inout DiscardingTaskGroup) {
            for claim in claims {
                sends.addTask { self.capacity.answered(await self.send(claim)) }
            }
        }
        capacity.open()
        // Handed over after the last pass: sent all the same (their slots are counted).
        defer { start(capacity.close(), &sends) }
        while !Task.isShuttingDownGracefully && !Task.isCancelled {
            switch capacity.next() {
            case .send(let handed):
                start(handed, &sends)
            case .wait(let until):
                await capacity.waitForWork(until: until)
            case .claim(let limit, let expired):
                do {
                    let claims = try await claim(limit: limit, expired: expired)
                    health.update { $0.database = true }
                    backoff.reset()
                    capacity.claimed(claims.count, limit: limit)
                    start(claims, &sends)
                } catch {
                    health.update { $0.database = false }
                    metrics.databaseUnavailable(component: "dispatcher")
                    capacity.claimFailed()
                    logger.warning(
                        "dispatcher cannot reach the database; retrying",
                        metadata: [LiveDeliveryLoggingKeys.error: "\(error)"])
                    await sleepUnlessShuttingDown(backoff.next())
                }
            }
        }
    }

    /// Writes the answers that have arrived, all at once, until the claim loop has finished and
    /// nothing is left.
    private func recordAnswers() async {
        while let sent = await capacity.answers(limit: configuration.batchSize) {
            if FaultPoints.killBeforeRecording != nil {
                FaultPoints.beforeRecording(
                    accepted: sent.count { if case .delivered = $0.outcome { true } else { false } })
            }
            let released = await recordWithRetries(sent)
            capacity.recorded(sent.count, released: released)
        }
    }

    /// LISTEN for new outbox rows; every notification (and every re-LISTEN) asks for a claim.
    private func listen() async {
        for await _ in client.notifications(channel: Outbox.notifyChannel) {
            capacity.wantClaim()
        }
    }

    /// A push and APNs' answer.
    struct Sent: Sendable {
        var claim: Outbox.Claim
        var outcome: APNsOutcome
        var latency: Duration
        /// The request's span, when the push's event carried a trace: its recording is a child of it.
        var trace: ServiceContext? = nil
    }

    /// Claims one batch of due rows, sends them, records the outcomes in one transaction; returns
    /// how many it claimed. (The service itself pipelines these steps; tests drive this one.)
    @discardableResult
    package func dispatchOnce() async throws -> Int {
        let claims = try await claim(limit: configuration.batchSize)
        guard !claims.isEmpty else { return 0 }
        await dispatch(claims)
        return claims.count
    }

    /// Sends these claims (or pushes handed over) and records the answers in one transaction.
    func dispatch(_ claims: [Outbox.Claim]) async {
        let sent = await withTaskGroup(of: Sent.self, returning: [Sent].self) { group in
            var running = 0
            var sent: [Sent] = []
            for claim in claims {
                if running >= configuration.concurrency, let next = await group.next() {
                    sent.append(next)
                    running -= 1
                }
                group.addTask { await self.send(claim) }
                running += 1
            }
            for await next in group { sent.append(next) }
            return sent
        }
        _ = await recordWithRetries(sent)
    }

    /// Leases up to `limit` due rows of apps not paused: free rows oldest first, then (when
    /// `expired`) rows whose lease expired because their worker died.
    private func claim(limit: Int, expired includeExpired: Bool = true) async throws -> [Outbox.Claim] {
        var claims = try await lease(.free, limit: limit)
        if includeExpired && claims.count < limit {
            claims += try await lease(.expired, limit: limit - claims.count)
        }
        return claims
    }

    /// Leases up to `limit` due rows of the `lease` kind.
    ///
    /// A row whose push cannot be read (written by a newer version of the worker, say, or edited by
    /// hand) is not sent and not deleted: it is logged as an error, counted, and stays leased, so it
    /// comes back once per lease period until someone fixes it or a newer event replaces it. The rest
    /// of the batch goes out: one bad row used to fail every claim it was part of.
    private func lease(_ lease: Outbox.Lease, limit: Int) async throws -> [Outbox.Claim] {
        let rows = try await client.query(
            Outbox.leaseQuery(lease, workerID: workerID, seconds: configuration.lease.seconds, limit: limit))
        var claims: [Outbox.Claim] = []
        for row in rows {
            do {
                claims.append(try Outbox.claim(row))
            } catch {
                metrics.unreadableOutboxRow()
                logger.error(
                    "an outbox row cannot be read; it is not sent and is tried again after its lease",
                    metadata: [
                        LiveDeliveryLoggingKeys.orderID: "\((try? row.decode(String.self, "order_id")) ?? "?")",
                        LiveDeliveryLoggingKeys.activityKey: "\((try? row.decode(String.self, "activity_key")) ?? "?")",
                        LiveDeliveryLoggingKeys.error: "\(error)",
                    ])
            }
        }
        return claims
    }

    private func send(_ claim: Outbox.Claim) async -> Sent {
        let push = claim.push
        // The event's trace, when its message carried one: a span of the request, and its log line.
        var span: (any Span)?
        if let trace = push.traceParent.flatMap(TraceParent.init) {
            var context = ServiceContext.topLevel
            tracer.extract(TraceCarrier(trace: trace), into: &context, using: TraceCarrierExtractor())
            let request = tracer.startSpan("livedelivery.push", context: context, ofKind: .client)
            request.attributes["apns.id"] = push.apnsID
            request.attributes["apns.topic"] = push.bundleID
            request.attributes["apns.push_type"] = push.kind.rawValue
            request.attributes["apns.priority"] = push.priority
            request.attributes["livedelivery.order.id"] = push.orderID
            request.attributes["livedelivery.push.attempt"] = claim.attempts
            request.attributes["w3c.traceparent"] = trace.header
            span = request
        }
        let started = ContinuousClock.now
        let outcome = await sender.send(push)
        let latency = ContinuousClock.now - started
        let outcomeName = PushAttempts.outcomeName(outcome)
        metrics.push(
            app: push.bundleID, kind: push.kind.rawValue, outcome: outcomeName, reason: outcome.reason?.rawValue ?? "",
            latency: latency)
        if let span {
            span.attributes["apns.outcome"] = outcomeName
            if let reason = outcome.reason { span.attributes["apns.reason"] = reason.rawValue }
            if case .delivered = outcome {
                span.setStatus(SpanStatus(code: .ok))
            } else {
                span.setStatus(SpanStatus(code: .error, message: outcome.reason?.rawValue ?? outcomeName))
            }
            span.end()
        }
        if logger.logLevel <= .debug {
            var metadata: Logger.Metadata = [
                LiveDeliveryLoggingKeys.orderID: "\(push.orderID)", LiveDeliveryLoggingKeys.apnsID: "\(push.apnsID)",
                LiveDeliveryLoggingKeys.outcome: "\(outcomeName)",
            ]
            metadata.addTrace(push.traceParent)
            logger.debug("APNs request", metadata: metadata)
        }
        return Sent(claim: claim, outcome: outcome, latency: latency, trace: span?.context)
    }

    /// Records the answers; returns whether a row was released for sending again. After the
    /// retries the leases expire and the pushes are claimed again (the core's timestamps keep
    /// that safe).
    private func recordWithRetries(_ sent: [Sent]) async -> Bool {
        // A span per traced push, in its request's span: until its answer is recorded (or given up on).
        let spans = sent.compactMap { answer in
            answer.trace.map {
                let span = tracer.startSpan("livedelivery.record", context: $0, ofKind: .internal)
                span.attributes["livedelivery.record.group"] = sent.count
                return span
            }
        }
        defer { for span in spans { span.end() } }
        return await recordWithRetries(sent, spans: spans)
    }

    private func recordWithRetries(_ sent: [Sent], spans: [any Span]) async -> Bool {
        var backoff = Backoff(base: .milliseconds(50), maximum: .seconds(2))
        var attempt = 1
        while attempt <= 5 {
            do {
                return try await record(sent)
            } catch let error as PostgresError where error.stalePlan {
                // A migration changed a column under a prepared statement, which is prepared again on the
                // retry: at once, and not counted (each such failure forgets one plan, so this ends).
                logger.info(
                    "push outcomes not recorded on a stale plan; retrying",
                    metadata: [LiveDeliveryLoggingKeys.error: "\(error)"])
            } catch {
                logger.warning(
                    "cannot record push outcomes; retrying",
                    metadata: [
                        LiveDeliveryLoggingKeys.error: "\(error)", LiveDeliveryLoggingKeys.attempt: "\(attempt)",
                        LiveDeliveryLoggingKeys.count: "\(sent.count)",
                    ])
                await sleepUnlessShuttingDown(backoff.next())
                attempt += 1
            }
        }
        logger.error(
            "push outcomes not recorded; the pushes will be sent again after their lease",
            metadata: [LiveDeliveryLoggingKeys.count: "\(sent.count)"])
        for span in spans { span.setStatus(SpanStatus(code: .error, message: "the outcome was not recorded")) }
        return false
    }

    /// Records a group of answers in one transaction with a fixed number of statements: the
    /// orders locked in sorted order, every attempt, the core's outcome per push (several pushes
    /// of one order applied in turn to the same state), the outbox rows deleted or released, and
    /// the orders written set-based. Returns whether a row was released for sending again.
    private func record(_ sent: [Sent]) async throws -> Bool {
        let now = self.now()
        let sent = sent.sorted { ($0.claim.orderID, $0.claim.activityKey) < ($1.claim.orderID, $1.claim.activityKey) }
        let (released, written, ages) = try await client.withTransaction { connection in
            // One round trip: the orders' locks (and states), the outbox rows' locks, and every attempt.
            let orders = OrderStore.ExistingLock(sent.map(\.claim.orderID), cache: states)
            let locked = try await connection.pipeline(Self.recordingReads(sent, orders: orders, workerID: workerID))
            let stored = try orders.states(from: locked[0], accepted: locked[1]).compactMapValues { $0 }
            let versions = try orders.versions(from: locked[0])
            let outbox = try Outbox.locked(from: locked[2])

            let plan = AnswersPlan(
                sent, stored: stored, versions: versions, outbox: outbox, tracker: tracker,
                rules: PushSettlement.Rules(configuration), jitter: { Double.random(in: 0.5...1.0) }, now: now)
            for (bundleID, pause) in plan.pauses {
                try await self.pause(bundleID, reason: pause.reason, status: pause.status, on: connection)
            }
            for note in plan.notes {
                logger.log(level: note.level, "\(note.message)", metadata: note.metadata.mapValues { "\($0)" })
            }
            let written = try await OrderStore.write(
                Array(plan.changes.values), kind: "outcome", delivered: plan.delivered, answered: plan.answered,
                hold: configuration.lease, leading: try plan.outboxWrites(), now: now, on: connection)
            return (!plan.released.isEmpty, written, plan.ages)
        }
        states.store(written)
        for age in ages { metrics.eventAgeAtPush(app: age.app, seconds: age.seconds) }
        return released
    }

    /// The statements that open the recording of answers, in one round trip: the orders' locks (and
    /// states), the outbox rows' locks, and every attempt.
    static func recordingReads(_ sent: [Sent], orders: OrderStore.ExistingLock, workerID: String) -> [PostgresQuery] {
        let attempts = sent.map { PushAttempts.Row($0.claim, outcome: $0.outcome, latency: $0.latency) }
        return orders.queries + [
            Outbox.lockQuery(sent.map { Outbox.Key(orderID: $0.claim.orderID, activityKey: $0.claim.activityKey) }),
            PushAttempts.insertQuery(attempts, workerID: workerID),
        ]
    }

    private func pause(
        _ bundleID: String, reason: String, status: Int?, on connection: PostgresConnection
    )
        async throws
    {
        try await connection.query(
            AppPauses.pauseQuery(bundleID, reason: reason, status: status, by: workerID, for: configuration.pause))
        metrics.paused(app: bundleID, reason: reason)
        health.update { snapshot in
            if !snapshot.pausedApps.contains(bundleID) { snapshot.pausedApps.append(bundleID) }
        }
    }
}
