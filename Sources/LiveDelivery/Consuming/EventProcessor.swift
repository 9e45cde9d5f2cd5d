package import Foundation
package import LiveDeliveryCore
package import Logging
package import Postgres
import Tracing

/// One message as it came from the broker (or a test).
package struct InboundMessage: Sendable {
    package var body: [UInt8]
    package var routingKey: String
    package var messageID: String?
    /// The message's string headers: the tracer reads its trace from them (``TraceCarrier``).
    package var headers: [String: String]
    /// The W3C `traceparent` header, when the message carried a well-formed one.
    package var trace: TraceParent? { headers["traceparent"].flatMap(TraceParent.init) }
    /// The first 55 characters of a well-formed `traceparent` header: what is stored with a planned push.
    package var traceParent: String? { trace?.header }

    package init(body: [UInt8], routingKey: String, messageID: String? = nil, headers: [String: String] = [:]) {
        self.body = body
        self.routingKey = routingKey
        self.messageID = messageID
        self.headers = headers
    }
}

/// What one batch did.
package struct BatchOutcome: Sendable, Hashable {
    /// Events applied for the first time.
    package var applied = 0
    /// Events already processed (redeliveries, duplicates within the batch or across batches).
    package var duplicates = 0
    /// Messages refused and recorded in dead_letters.
    package var rejected = 0
    /// Outbox rows written (new or replaced).
    package var pushesPlanned = 0
    /// The transactions the batch was applied in: one, or more when its events name more users than one
    /// transaction locks (``EventProcessor/maxLockedUsers``).
    package var transactions = 0
    package init() {}

    mutating func add(_ other: BatchOutcome) {
        applied += other.applied
        duplicates += other.duplicates
        rejected += other.rejected
        pushesPlanned += other.pushesPlanned
        transactions += other.transactions
    }
}

/// Applies batches of inbound messages in one transaction each: inbox de-duplication, row locks on
/// the affected orders (in a stable order), the core's transitions, and the state, activity,
/// outbox, timeline and dead-letter rows. Nothing of a transaction is written unless everything is.
///
/// A batch whose events name more than ``maxLockedUsers`` users is applied in consecutive parts, each
/// its own transaction, in arrival order: what one batch locks stays bounded whatever its publishers name.
package final class EventProcessor: Sendable {
    /// The most users one transaction locks (one transaction-level advisory lock per user an event names,
    /// an order's followers included). The locks share the server's lock table (about 64 ×
    /// `max_connections` entries, for every database on the server); a full batch of `order.followers`
    /// events would otherwise take 250 × 20 of them.
    package static let maxLockedUsers = 1000

    let client: PostgresClient
    let tracker: OrderTracker
    let metrics: WorkerMetrics
    let logger: Logger
    let pushToStart: WorkerConfiguration.PushToStart
    let now: @Sendable () -> Date
    /// States this process wrote, shared with the dispatcher (which records the pushes next).
    let states: OrderStateCache
    /// This process's dispatcher, which takes the new pushes it has room for straight from the
    /// transaction that plans them; without one, every push is claimed from the outbox.
    let capacity: PushCapacity?
    /// Each event's span continues the trace its message carried.
    let tracer: any Tracer
    /// The apps of the apps file, as `bundle-id environment`: an event naming another is refused on
    /// arrival (`unknown_app`), so a publisher cannot make up apps (metric labels, pauses). nil: any.
    let apps: Set<String>?
    /// The worker's cell, if any: an order's event must then carry the `order_id` header it was routed by.
    let cell: String?
    /// The deployment's cells (`cell.all`), if listed: an order's event is applied only in the cell they give it.
    let cells: CellAssignment?
    /// For a cell added to a deployment (`cell.takeOverFrom`): where an order it does not know was before.
    let cellHandover: CellHandover?

    package convenience init(
        client: PostgresClient, tracking: TrackingConfiguration, metrics: WorkerMetrics, logger: Logger,
        pushToStart: WorkerConfiguration.PushToStart = .init(), now: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.init(
            client: client, tracking: tracking, metrics: metrics, logger: logger, pushToStart: pushToStart,
            states: OrderStateCache(), capacity: nil, tracer: InstrumentationSystem.tracer, apps: nil, now: now)
    }

    init(
        client: PostgresClient, tracking: TrackingConfiguration, metrics: WorkerMetrics, logger: Logger,
        pushToStart: WorkerConfiguration.PushToStart, states: OrderStateCache, capacity: PushCapacity?,
        tracer: any Tracer, apps: Set<String>?, cell: String? = nil, cells: CellAssignment? = nil,
        cellHandover: CellHandover? = nil, now: @escaping @Sendable () -> Date
    ) {
        self.cell = cell
        self.cells = cells
        self.cellHandover = cellHandover
        self.tracer = tracer
        self.apps = apps
        self.client = client
        self.states = states
        self.capacity = capacity
        self.pushToStart = pushToStart
        self.tracker = OrderTracker(configuration: tracking)
        self.metrics = metrics
        self.logger = logger
        self.now = now
    }

    private enum Decoded {
        case event(InboundEvent, index: Int)
        case rejected(EventRejection, index: Int)

        var namedUsers: [String] {
            if case .event(let event, _) = self { return event.namedUsers }
            return []
        }
    }

    /// The batch's items cut into consecutive parts whose named users (each item's) number at most
    /// `bound` distinct ones: each item whole in one part (an item alone over the bound makes a part of its
    /// own), a part as long as it stays under.
    static func parts(namedUsers: [[String]], bound: Int) -> [Range<Int>] {
        var parts: [Range<Int>] = []
        var start = 0
        var users = Set<String>()
        for (index, named) in namedUsers.enumerated() {
            let added = named.filter { !users.contains($0) }
            if index > start, Set(added).count + users.count > bound {
                parts.append(start..<index)
                start = index
                users = []
            }
            users.formUnion(named)
        }
        if start < namedUsers.count { parts.append(start..<namedUsers.count) }
        return parts
    }

    /// Applies the batch; retries the transaction a few times on serialization failures, deadlocks
    /// and lost connections, then throws (the consumer keeps the batch unacknowledged and tries it again
    /// with backoff while the database is away; after another failure, message by message). Statements
    /// whose prepared plans went stale are prepared again, without counting as attempts.
    package func process(_ messages: [InboundMessage]) async throws -> BatchOutcome {
        let started = ContinuousClock.now
        var decoded: [Decoded] = []
        for (index, message) in messages.enumerated() {
            if message.headers["traceparent"] != nil, message.trace == nil { metrics.traceHeaderRefused() }
            switch EventDecoder.decode(message.body, routingKey: message.routingKey, messageID: message.messageID) {
            case .success(let event):
                if let rejection = unknownApp(event)
                    ?? (cell != nil
                        ? OrderRouting.refusal(event, headers: message.headers, cells: cells, cell: cell) : nil)
                {
                    decoded.append(.rejected(rejection, index: index))
                } else {
                    decoded.append(.event(event, index: index))
                }
            case .failure(let rejection): decoded.append(.rejected(rejection, index: index))
            }
        }
        // A span per message that carries a trace, from now until its batch commits (or fails), and in it
        // one for the transactions that apply the batch.
        let spans = eventSpans(messages, decoded)
        defer { for span in spans { span.end() } }
        let applying = spans.map { tracer.startSpan("livedelivery.apply", context: $0.context, ofKind: .internal) }
        defer { for span in applying { span.end() } }
        var outcome = BatchOutcome()
        var attempts = 1
        for part in Self.parts(namedUsers: decoded.map(\.namedUsers), bound: Self.maxLockedUsers) {
            let (applied, attempt) = try await applyPart(
                Array(decoded[part]), messages: messages, spans: spans, applying: applying)
            outcome.add(applied)
            attempts = max(attempts, attempt)
        }
        metrics.batch(duration: ContinuousClock.now - started)
        for span in applying { span.attributes["livedelivery.attempts"] = attempts }
        return outcome
    }

    /// Applies a part of the batch in one transaction, retried as ``process(_:)`` says; returns what it did
    /// and the attempts it took.
    private func applyPart(
        _ decoded: [Decoded], messages: [InboundMessage], spans: [any Span], applying: [any Span]
    ) async throws -> (BatchOutcome, attempts: Int) {
        // Each event may plan a push: room for them all, so that none waits in the outbox to be claimed.
        await capacity?.waitForRoom(decoded.count)
        var attempt = 1
        while true {
            let handover = capacity.map(Handover.init)
            do {
                var (outcome, written) = try await client.withTransaction { connection in
                    try await apply(decoded, messages: messages, handover: handover, on: connection)
                }
                states.store(written)
                handover?.commit()
                outcome.transactions = 1
                return (outcome, attempt)
            } catch {
                // Not committed (or not known to be: a sweeper then finds its pushes a lease later).
                handover?.abandon()
                // A stale plan (a migration changed a column under a prepared statement) is forgotten as it
                // fails, so it does not count: each retry prepares one more statement again.
                guard let retriable = error as? PostgresError, retriable.isRetriable, attempt < 3 || retriable.stalePlan
                else {
                    for span in spans + applying {
                        span.recordError(error)
                        span.setStatus(SpanStatus(code: .error, message: "the batch was not applied"))
                    }
                    throw error
                }
                for span in applying { span.addEvent(SpanEvent(name: "retry", attributes: ["error": "\(retriable)"])) }
                logger.info(
                    "batch transaction failed; retrying",
                    metadata: [
                        LiveDeliveryLoggingKeys.error: "\(retriable)", LiveDeliveryLoggingKeys.attempt: "\(attempt)",
                    ])
                if !retriable.stalePlan { attempt += 1 }
            }
        }
    }

    /// A consumer span for each message that carries a trace, continuing it: the event's type, id and order;
    /// a refused one has an error status that names the reason.
    private func eventSpans(_ messages: [InboundMessage], _ decoded: [Decoded]) -> [any Span] {
        var spans: [any Span] = []
        for item in decoded {
            let index: Int
            switch item {
            case .event(_, let i), .rejected(_, let i): index = i
            }
            let message = messages[index]
            guard let trace = message.trace else { continue }
            var context = ServiceContext.topLevel
            let carrier = TraceCarrier(trace: trace, headers: message.headers)
            tracer.extract(carrier, into: &context, using: TraceCarrierExtractor())
            let span = tracer.startSpan("livedelivery.event", context: context, ofKind: .consumer)
            span.attributes["messaging.system"] = "rabbitmq"
            span.attributes["messaging.operation.type"] = "process"
            span.attributes["messaging.message.id"] = message.messageID ?? ""
            span.attributes["livedelivery.event.type"] = message.routingKey
            span.attributes["w3c.traceparent"] = trace.header
            switch item {
            case .event(let event, _):
                span.attributes["livedelivery.event.id"] = event.eventID
                if let orderID = event.orderID { span.attributes["livedelivery.order.id"] = orderID }
            case .rejected(let rejection, _):
                span.attributes["livedelivery.refusal"] = rejection.reason.rawValue
                if let field = rejection.field { span.attributes["livedelivery.refusal.field"] = field }
                span.setStatus(SpanStatus(code: .error, message: "refused: \(rejection.reason.rawValue)"))
            }
            spans.append(span)
        }
        return spans
    }

    /// The refusal of an event whose app is not in the apps file.
    private func unknownApp(_ event: InboundEvent) -> EventRejection? {
        let app: (bundleID: String, environment: APNsEnvironment)
        switch event {
        case .activityToken(let token): app = (token.bundleID, token.environment)
        case .pushToStartToken(let token): app = (token.bundleID, token.environment)
        case .orderStatus, .activityEnded, .activitySettings, .orderFollowers: return nil
        }
        guard let apps, !apps.contains("\(app.bundleID) \(app.environment.rawValue)") else { return nil }
        return EventRejection(
            .unknownApp, field: "bundle_id",
            "no app \(EventDecoder.quoted(app.bundleID)) (\(app.environment.rawValue)) in the worker's apps file")
    }

    /// Applies the batch inside the transaction; returns what it did and the states it wrote.
    private func apply(
        _ decoded: [Decoded], messages: [InboundMessage], handover: Handover?, on connection: PostgresConnection
    ) async throws -> (BatchOutcome, [OrderStateCache.Written]) {
        var outcome = BatchOutcome()
        let now = self.now()
        // 1. Refused messages: dead_letters (one row per distinct message).
        for case .rejected(let rejection, let index) in decoded {
            try await deadLetter(messages[index], rejection, on: connection)
            outcome.rejected += 1
        }
        // 2. Which events are new, and their users' push-to-start tokens (under the users' locks).
        let events: [InboundEvent] = decoded.compactMap {
            if case .event(let event, _) = $0 { return event }
            return nil
        }
        guard !events.isEmpty else { return (outcome, []) }
        let (newEvents, tokens, settings) = try await admit(events, outcome: &outcome, on: connection)
        guard !newEvents.isEmpty else { return (outcome, []) }
        let startLimit = try await StartLimit.load(
            devices: tokens.values.flatMap { $0.map(\.deviceID) }, configuration: pushToStart, now: now,
            on: connection)
        // 3. The orders concerned, locked: each event's order; for a push-to-start token or a settings
        //    report, every open order of the user (stored, or created by this batch).
        let ordersOfUser = try await openOrders(for: newEvents, on: connection)
        var orderIDs = Set(newEvents.compactMap(\.orderID))
        for orders in ordersOfUser.values { orderIDs.formUnion(orders) }
        let stored = try await OrderStore.lockOrders(Array(orderIDs), cache: states, on: connection)
        // A cell added to the deployment takes over, from the cell it was in, an order of its events it does not know.
        var takenOver: [String: (OrderState, Decision)] = [:]
        if let cellHandover {
            let unknown = newEvents.compactMap { event in
                event.orderID.flatMap { (stored[$0] ?? nil) == nil ? $0 : nil }
            }
            if !unknown.isEmpty { takenOver = try await cellHandover.takeOver(unknown, now: now) }
        }
        // Channels are counted only when an order's channel may be decided (followers in the batch or stored).
        let openChannels =
            BroadcastRows.needsCount(newEvents, stored: stored, policy: tracker.configuration.policy)
            ? try BroadcastRows.openChannels(from: try await connection.query(BroadcastRows.openChannelsQuery)) : nil
        // 4. The core, per event in arrival order; each push carries its event's trace.
        var traces: [String: String] = [:]
        var orderTraces: [String: String] = [:]
        for case .event(let event, let index) in decoded {
            guard let traceParent = messages[index].traceParent else { continue }
            traces[event.eventID] = traceParent
            if let orderID = event.orderID { orderTraces[orderID] = traceParent }
        }
        let plan = EventsPlan(
            newEvents, stored: stored, ordersOfUser: ordersOfUser, tokens: tokens, settings: settings,
            startLimit: startLimit, openChannels: openChannels, takenOver: takenOver,
            traces: traces, orderTraces: orderTraces, tracker: tracker, now: now)
        for event in newEvents { metrics.event(type: event.type.rawValue, outcome: "applied") }
        outcome.applied += newEvents.count
        // 5. Every changed order written at once (set-based, in a stable order).
        let written = plan.written
        let stateWrites = try await OrderStore.write(
            written, kind: "event", handover: handover, now: now, on: connection)
        outcome.pushesPlanned += written.reduce(0) { $0 + $1.pushes.count }
        for change in written {
            for decision in change.decisions where Decision.Code.limits.contains(decision.code) {
                metrics.limit(decision.code)
            }
        }
        if logger.logLevel <= .debug { logDecisions(written, traces: orderTraces) }
        return (outcome, stateWrites)
    }

    /// Records a refused message in `dead_letters`; counts and logs it the first time.
    private func deadLetter(
        _ message: InboundMessage, _ rejection: EventRejection, on connection: PostgresConnection
    ) async throws {
        let rows = try await connection.query(
            DeadLetterRows.insertQuery(
                eventID: message.messageID, routingKey: message.routingKey, reason: rejection.reason.rawValue,
                field: rejection.field, message: rejection.message, body: message.body))
        guard !rows.isEmpty else { return }
        metrics.deadLetter(reason: rejection.reason.rawValue)
        metrics.event(type: message.routingKey, outcome: "rejected")
        var metadata: Logger.Metadata = [
            LiveDeliveryLoggingKeys.reason: "\(rejection.reason)",
            LiveDeliveryLoggingKeys.field: "\(rejection.field ?? "")",
            LiveDeliveryLoggingKeys.eventID: "\(message.messageID ?? "")",
        ]
        metadata.addTrace(message.traceParent)
        logger.warning("event refused and dead-lettered", metadata: metadata)
    }

    /// The events the inbox has not seen, in arrival order, and their users' push-to-start tokens and
    /// device settings (the batch's own reports filed first). Every event's user is locked (a duplicate's
    /// too: harmless), so that the inbox, the locks and the reads go in one round trip.
    private func admit(
        _ events: [InboundEvent], outcome: inout BatchOutcome, on connection: PostgresConnection
    ) async throws -> ([InboundEvent], [String: [PushToStartRegistration]], [String: [String: DeviceSettings]]) {
        let users = Set(events.flatMap(\.namedUsers)).sorted()
        var statements = [Inbox.insertQuery(events)]
        if !users.isEmpty {
            statements.append(UserLocks.lockQuery(users))
            statements.append(OrderStore.pushToStartTokensQuery(users: users))
            statements.append(DeviceSettingsRows.query(users: users))
        }
        let results = try await connection.pipeline(statements)
        var fresh = try Inbox.fresh(from: results[0])
        var newEvents: [InboundEvent] = []
        for event in events {
            if fresh.remove(event.eventID) != nil {
                newEvents.append(event)
            } else {
                outcome.duplicates += 1
                metrics.event(type: event.type.rawValue, outcome: "duplicate")
            }
        }
        guard !newEvents.isEmpty, !users.isEmpty else { return (newEvents, [:], [:]) }
        var filed = false
        for event in newEvents {
            switch event {
            case .pushToStartToken(let e):
                filed = true
                try await connection.query(try OrderStore.registerQuery(e))
            case .activitySettings(let e):
                filed = true
                try await connection.query(DeviceSettingsRows.upsertQuery(e))
            default:
                continue
            }
        }
        // A batch that filed tokens or settings reads them again.
        let (tokens, settings) =
            filed
            ? try await OrderStore.tokensAndSettings(users: users, on: connection)
            : (try OrderStore.pushToStartTokens(from: results[2]), try DeviceSettingsRows.settings(from: results[3]))
        return (newEvents, tokens, settings)
    }

    /// The open orders of each user whose push-to-start token or settings arrived (their own and those they
    /// follow): stored, or created by this batch.
    private func openOrders(
        for events: [InboundEvent], on connection: PostgresConnection
    ) async throws -> [String: Set<String>] {
        let users = Set(events.compactMap { $0.reachesUser ? $0.userID : nil })
        guard !users.isEmpty else { return [:] }
        var ordersOfUser = try await OrderStore.openOrders(of: users.sorted(), on: connection)
        for case .orderStatus(let e) in events where users.contains(e.userID) {
            ordersOfUser[e.userID, default: []].insert(e.orderID)
        }
        return ordersOfUser
    }

    private func logDecisions(_ written: [OrderChange], traces: [String: String]) {
        for change in written {
            for decision in change.decisions {
                var metadata: Logger.Metadata = [
                    LiveDeliveryLoggingKeys.orderID: "\(change.state.orderID)",
                    LiveDeliveryLoggingKeys.activityKey: "\(decision.activityKey ?? "")",
                    LiveDeliveryLoggingKeys.decision: "\(decision.code)",
                ]
                metadata.addTrace(traces[change.state.orderID])
                logger.debug("decision", metadata: metadata)
            }
        }
    }
}
