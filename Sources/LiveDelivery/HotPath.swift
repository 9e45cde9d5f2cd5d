package import APNs
package import Foundation
package import LiveDeliveryCore
import Postgres

/// The worker's own work for a batch of events with the servers taken out, step by step as the worker
/// does it: what `livedelivery-bench events` counts under valgrind (instructions and heap allocations
/// per event, the same on every run of the same binary, whatever else the machine does). Each step is
/// what the worker runs:
/// - the consumer decodes the messages, builds the inbox, lock and read statements, reads the orders'
///   stored documents (a cold cache: from the text PostgreSQL sends) and settles the updates APNs accepted,
///   plans the batch (``EventsPlan``: the core), and builds its writes (``OrderStore/Writes``: every
///   parameter encoded);
/// - the dispatcher sends the pushes (`send`: the caller builds each APNs request and classifies an
///   answer), then records the answers as one group: the lock and attempt statements, the plan
///   (``AnswersPlan``: settlements, the core's record, the fold of delivered updates) and its writes.
///
/// Left out: I/O and what surrounds it (the broker, libpq, libcurl, the threads and tasks between
/// them), the state cache, metrics and traces.
package struct HotPath: Sendable {
    /// An order as the database holds it: its state document (``StoredState``) as PostgreSQL sends it
    /// to the lock (``OrderStore/ExistingLock``: binary format, the document's bytes), and the updates APNs
    /// accepted that the document does not say yet (`activities.delivered_apns_id`).
    package struct StoredOrder: Sendable {
        var bytes: [UInt8]
        package var accepted: Set<String> = []

        init(document: [UInt8]) { bytes = document }

        /// The document, read from its column as ``OrderStore/ExistingLock`` reads it.
        func document() throws -> [UInt8] {
            try [UInt8].decode(
                from: PostgresCell(columnName: "state", columnIndex: 3, dataType: .bytea, text: nil, bytes: bytes))
        }
    }

    private let tracker: OrderTracker
    private let rules: PushSettlement.Rules

    package init(tracking: TrackingConfiguration, dispatcher: WorkerConfiguration.Dispatcher = .init()) {
        tracker = OrderTracker(configuration: tracking)
        rules = PushSettlement.Rules(dispatcher)
    }

    /// The stored document of a new order after `messages`, their pushes accepted: a stream's start.
    package func document(orderID: String, after messages: [InboundMessage], now: Date) throws -> StoredOrder {
        var state = OrderState(orderID: orderID, now: now)
        for event in try Self.decode(messages) {
            var change = OrderChange(original: state, state: state)
            change.merge(tracker.apply(event, to: state, now: now))
            for push in change.orderedPushes {
                change.merge(tracker.record(.accepted, for: push, in: change.state, now: now))
            }
            state = change.state
        }
        return StoredOrder(document: StoredState.encode(state))
    }

    /// One batch through the consumer and its pushes through the dispatcher. Returns the number of
    /// statement parameters built (so that nothing is left unused).
    package func apply(
        _ messages: [InboundMessage], to orders: inout [String: StoredOrder], now: Date,
        send: (PlannedPush) -> APNsOutcome
    ) throws -> Int {
        // The consumer.
        let events = try Self.decode(messages)
        let users = Set(events.compactMap(\.userID)).sorted()
        let orderIDs = Set(events.compactMap(\.orderID)).sorted()
        var statements = [
            Inbox.insertQuery(events), UserLocks.lockQuery(users), OrderStore.pushToStartTokensQuery(users: users),
            OrderStore.createQuery(orderIDs),
        ]
        statements += OrderStore.ExistingLock(orderIDs, cache: nil).queries
        var stored: [String: OrderState?] = [:]
        for orderID in orderIDs {
            let order = orders[orderID]
            stored[orderID] = try OrderStore.readState(try order?.document(), accepted: order?.accepted ?? [])
        }
        let plan = EventsPlan(
            events, stored: stored, ordersOfUser: [:], tokens: [:], startLimit: StartLimit(maximum: 5),
            tracker: tracker, now: now)
        let written = plan.written
        // The dispatcher has a slot for every push due: those that may go without an outbox row do.
        let lease = OrderStore.Writes.Lease(
            slots: OrderStore.Writes.duePushes(written, now: now), holdSeconds: 60)
        let writes = try OrderStore.Writes(
            written, kind: "event", lease: lease, delivered: [], leading: [], sweepColumn: .keepEarlier, now: now)
        statements += writes.statements
        for (orderID, document) in writes.documents { orders[orderID] = StoredOrder(document: document) }

        // The dispatcher: every push handed over, answered, and recorded as one group.
        statements += try dispatch(written, handed: Set(writes.handed), to: &orders, now: now, send: send)
        return statements.reduce(0) { $0 + $1.binds.count }
    }

    /// The dispatcher's part: the pushes the written changes planned, sent and recorded as one group.
    private func dispatch(
        _ written: [OrderChange], handed: Set<Outbox.Key>, to orders: inout [String: StoredOrder], now: Date,
        send: (PlannedPush) -> APNsOutcome
    ) throws -> [PostgresQuery] {
        var states: [String: OrderState] = [:]
        var versions: [String: Int64] = [:]
        var sent: [PushDispatcher.Sent] = []
        for change in written {
            states[change.state.orderID] = change.state
            versions[change.state.orderID] = 1
            for push in change.orderedPushes {
                let key = Outbox.Key(orderID: change.state.orderID, activityKey: push.activityKey)
                // Generation 0: handed over without a row.
                let claim = Outbox.Claim(
                    orderID: key.orderID, activityKey: key.activityKey, generation: handed.contains(key) ? 0 : 1,
                    attempts: 1, push: push)
                sent.append(PushDispatcher.Sent(claim: claim, outcome: send(push), latency: .milliseconds(5)))
            }
        }
        sent.sort { ($0.claim.orderID, $0.claim.activityKey) < ($1.claim.orderID, $1.claim.activityKey) }
        var statements = PushDispatcher.recordingReads(
            sent, orders: OrderStore.ExistingLock(sent.map(\.claim.orderID), cache: nil), workerID: "w")
        var outbox: [Outbox.Key: Outbox.LockedRow] = [:]
        for (index, answer) in sent.enumerated() where answer.claim.generation > 0 {
            outbox[Outbox.Key(orderID: answer.claim.orderID, activityKey: answer.claim.activityKey)] =
                Outbox.LockedRow(generation: 1, row: "(0,\(index + 1))")
        }
        let answers = AnswersPlan(
            sent, stored: states, versions: versions, outbox: outbox, tracker: tracker, rules: rules,
            jitter: { 0.75 }, now: now)
        let recording = try OrderStore.Writes(
            Array(answers.changes.values), kind: "outcome",
            lease: OrderStore.Writes.Lease(slots: 0, holdSeconds: 60, answered: answers.answered),
            delivered: answers.delivered, leading: try answers.outboxWrites(), sweepColumn: .keepEarlier, now: now)
        statements += recording.statements
        for (orderID, document) in recording.documents { orders[orderID] = StoredOrder(document: document) }
        for delivered in answers.delivered { orders[delivered.orderID]?.accepted = Set(delivered.apnsIDs) }
        return statements
    }

    private static func decode(_ messages: [InboundMessage]) throws -> [InboundEvent] {
        try messages.map { message in
            switch EventDecoder.decode(message.body, routingKey: message.routingKey, messageID: message.messageID) {
            case .success(let event): return event
            case .failure(let rejection):
                throw LiveDeliveryError(.invalidConfiguration, "the stream's event is refused: \(rejection.message)")
            }
        }
    }
}
