import Foundation
import LiveDeliveryCore
import Postgres

/// Several ``Step``s of one order merged: the final state, the newest push per activity, what
/// to withdraw, and every decision in order. Its fields are ``OrderChangeFields``', read and written through it.
@dynamicMemberLookup
struct OrderChange: Sendable {
    private var fields: OrderChangeFields

    init(original: OrderState?, state: OrderState) {
        fields = OrderChangeFields(original: original, state: state)
    }

    subscript<Value>(dynamicMember field: ReferenceWritableKeyPath<OrderChangeFields, Value>) -> Value {
        get { fields[keyPath: field] }
        _modify {
            if !isKnownUniquelyReferenced(&fields) { fields = fields.copy() }
            yield &fields[keyPath: field]
        }
    }

    mutating func merge(_ step: Step) {
        self.state = step.state
        merge(step.effects)
    }

    /// The effects of a call that changed ``state`` in place.
    mutating func merge(_ effects: Step.Effects) {
        for key in effects.withdrawn {
            self.withdrawn.insert(key)
            self.pushes[key] = nil
        }
        for push in effects.pushes {
            if self.pushes[push.activityKey] == nil { self.pushOrder.append(push.activityKey) }
            self.pushes[push.activityKey] = push
            self.withdrawn.remove(push.activityKey)
        }
        if !effects.retiredPushToStartTokens.isEmpty { self.retired += effects.retiredPushToStartTokens }
        // The first effects' decisions are taken as they are: their array is shared, not copied.
        if self.decisions.isEmpty {
            self.decisions = effects.decisions
        } else if !effects.decisions.isEmpty {
            self.decisions += effects.decisions
        }
    }

    var changed: Bool { self.original != self.state || !self.pushes.isEmpty || !self.withdrawn.isEmpty }
    var orderedPushes: [PlannedPush] { self.pushOrder.compactMap { self.pushes[$0] } }
}

/// An ``OrderChange``'s fields, in one box shared by the copies of the change until one of them is written (copy
/// on write). A batch's changes pass through the plan, the statement builders and the dispatcher's hand-over, and
/// a copy of the fields themselves retains every part of two order states and five collections: about a thousand
/// instructions a copy, fourteen copies per status update under `scripts/bench events`. A copy of the box is one
/// retain.
final class OrderChangeFields: @unchecked Sendable {
    // Sendable: a box is written only while one change holds it (``OrderChange``'s dynamic member); shared, it is
    // only read.
    var original: OrderState?
    var state: OrderState
    var pushes: [String: PlannedPush] = [:]
    /// Activity keys in the order their pushes were planned (for deterministic writes).
    var pushOrder: [String] = []
    var withdrawn: Set<String> = []
    var retired: [PushToStartRegistration] = []
    var decisions: [Decision] = []
    /// A push planned by a retry: sent not before this moment (backoff).
    var notBefore: [String: Date] = [:]
    /// A push planned by a retry of one sent without an outbox row: the sends its row starts counted with.
    var attempts: [String: Int] = [:]

    init(original: OrderState?, state: OrderState) {
        self.original = original
        self.state = state
    }

    func copy() -> OrderChangeFields {
        let copy = OrderChangeFields(original: original, state: state)
        copy.pushes = pushes
        copy.pushOrder = pushOrder
        copy.withdrawn = withdrawn
        copy.retired = retired
        copy.decisions = decisions
        copy.notBefore = notBefore
        copy.attempts = attempts
        return copy
    }
}

/// An order whose only change is APNs' acceptance of its activities' current updates: the state read
/// (`original`), the same state with those updates settled, their ids, and the version of the order's
/// row, which stays as it was (see ``OrderStore/write(_:kind:handover:delivered:answered:hold:leading:sweepColumn:now:on:)``).
struct Delivered: Sendable {
    var original: OrderState
    var settled: OrderState
    var apnsIDs: [String]
    var version: Int64

    var orderID: String { original.orderID }

    /// The change that recording APNs' acceptance of the updates `ids` made, as a delivered update, when
    /// that is all it did: nothing to push, withdraw or retire, and settling the ids on the state read
    /// gives exactly the state recording wrote. Nil otherwise: the change is written in full.
    init?(folding change: OrderChange, ids: Set<String>, version: Int64) {
        guard let original = change.original, change.pushes.isEmpty, change.withdrawn.isEmpty,
            change.retired.isEmpty
        else { return nil }
        var settled = original
        guard settled.settleDelivered(ids), settled == change.state else { return nil }
        self.init(original: original, settled: settled, ids: ids, version: version)
    }

    /// `original` with the updates `ids` settled (``OrderTracker/settledAcceptance(of:in:now:)`` gave `settled`: the
    /// core's `record` did not run for them).
    init(original: OrderState, settled: OrderState, ids: Set<String>, version: Int64) {
        self.original = original
        self.settled = settled
        // One array, not three (compactMap, filter, sorted): usually one id.
        var apnsIDs: [String] = []
        apnsIDs.reserveCapacity(ids.count)
        for activity in original.activities {
            if let id = activity.pending?.apnsID, ids.contains(id) { apnsIDs.append(id) }
        }
        apnsIDs.sort()
        self.apnsIDs = apnsIDs
        self.version = version
    }
}

/// The one write path of an order (consumer, dispatcher and sweeper), inside the caller's
/// transaction and under the order's row lock.
enum OrderStore {
    /// An order's state as a `bytea` parameter (``StoredState``).
    static func document(_ state: OrderState) -> PostgresBytes { PostgresBytes(StoredState.encode(state)) }

    /// A push-to-start registration, written field by field (``StoredJSON``).
    static func json(_ registration: PushToStartRegistration) throws -> PostgresJSONText {
        PostgresJSONText(bytes: try StoredJSON.encode(registration))
    }

    /// A stored registration, read field by field (``StoredJSON``).
    static func decodeRegistration(_ json: PostgresJSON) throws -> PushToStartRegistration {
        try StoredJSON.decode(PushToStartRegistration.self, json.bytes)
    }

    /// A stored state (``StoredState``; nil for a row created empty).
    static func decodeState(_ document: [UInt8]?) throws -> OrderState? {
        try document.map { try StoredState.decode($0) }
    }

    /// A stored state as every read of an order sees it: decoded, with the updates APNs accepted
    /// (``acceptedQuery(_:)``) settled.
    static func readState(_ document: [UInt8]?, accepted: Set<String>) throws -> OrderState? {
        var state = try decodeState(document)
        state?.settleDelivered(accepted)
        return state
    }

    /// Locks the orders (creating empty rows first, all in sorted order so that concurrent
    /// workers never deadlock) and returns their stored states. One round trip for the statements.
    static func lockOrders(
        _ orderIDs: [String], cache: OrderStateCache? = nil, on connection: PostgresConnection
    ) async throws -> [String: OrderState?] {
        let sorted = Array(Set(orderIDs)).sorted()
        guard !sorted.isEmpty else { return [:] }
        let lock = ExistingLock(sorted, cache: cache)
        let results = try await connection.pipeline([createQuery(sorted)] + lock.queries)
        return try lock.states(from: results[1], accepted: results[2])
    }

    /// Creates the orders' rows that do not exist yet, empty, in the order given (sorted).
    static func createQuery(_ sorted: [String]) -> PostgresQuery {
        """
        INSERT INTO orders (order_id)
        SELECT id FROM unnest(\(PostgresTextArray(sorted))::text[]) AS id ORDER BY id COLLATE "C"
        ON CONFLICT (order_id) DO NOTHING
        """
    }

    /// Locks the orders that exist, in sorted order, and returns their stored states (nil for a
    /// row created empty). A state the cache holds at the row's current version is not sent again.
    static func lockExisting(
        _ orderIDs: [String], cache: OrderStateCache? = nil, on connection: PostgresConnection
    ) async throws -> [String: OrderState?] {
        let lock = ExistingLock(orderIDs, cache: cache)
        guard !lock.ids.isEmpty else { return [:] }
        let results = try await connection.pipeline(lock.queries)
        return try lock.states(from: results[0], accepted: results[1])
    }

    /// ``lockExisting(_:cache:on:)`` as statements and the reading of their rows, for callers that send
    /// them in a pipeline with others.
    struct ExistingLock {
        let ids: [String]
        private let cache: OrderStateCache?
        private let held: [String: OrderStateCache.Entry]

        init(_ orderIDs: [String], cache: OrderStateCache?) {
            ids = Array(Set(orderIDs)).sorted()
            self.cache = cache
            held = ids.isEmpty ? [:] : cache?.entries(ids) ?? [:]
        }

        /// The lock, then the updates APNs accepted (``OrderStore/acceptedQuery(_:)``), in this order.
        var queries: [PostgresQuery] { [query, OrderStore.acceptedQuery(ids)] }

        /// `xmin` is the id of the transaction that wrote the row's current version. The result comes in binary
        /// format: the state document as its bytes, not as hex text twice its size that the server writes and this
        /// process reads back.
        var query: PostgresQuery {
            let query: PostgresQuery = """
                SELECT o.order_id, o.xmin::text::bigint AS version, o.xmin::text::bigint = k.known AS held,
                       CASE WHEN o.xmin::text::bigint = k.known THEN NULL ELSE o.state END AS state
                FROM unnest(\(PostgresTextArray(ids))::text[], \(PostgresNullableArray(ids.map { held[$0]?.version }))::bigint[])
                    AS k(order_id, known)
                JOIN orders AS o ON o.order_id = k.order_id
                ORDER BY o.order_id FOR UPDATE OF o
                """
            return query.results(.binary)
        }

        /// The version of each order's row (its `xmin`) when it was locked: the version it keeps until
        /// this transaction writes it.
        func versions(from rows: PostgresRows) throws -> [String: Int64] {
            var versions: [String: Int64] = [:]
            for row in rows {
                versions[try row.decode(String.self, "order_id")] = try row.decode(Int64.self, "version")
            }
            return versions
        }

        /// Each order's state, with its accepted updates settled (nil for a row created empty).
        func states(from rows: PostgresRows, accepted: PostgresRows) throws -> [String: OrderState?] {
            let accepted = try OrderStore.accepted(from: accepted)
            var states: [String: OrderState?] = [:]
            var cached = 0
            for row in rows {
                let orderID = try row.decode(String.self, "order_id")
                if try row.decode(Bool?.self, "held") == true, let entry = held[orderID] {
                    var state = entry.state
                    state.settleDelivered(accepted[orderID] ?? [])
                    states[orderID] = state
                    cached += 1
                } else {
                    states[orderID] = try OrderStore.readState(
                        try row.decode([UInt8]?.self, "state"), accepted: accepted[orderID] ?? [])
                }
            }
            cache?.counted(cached: cached, fetched: states.count - cached)
            return states
        }
    }

    /// The updates APNs accepted that these orders' states may not say yet: the `delivered_apns_id` of
    /// their activities' rows (`sql/116`), for ``LiveDeliveryCore/OrderState/settleDelivered(_:)``. An
    /// update a state has settled already settles nothing.
    ///
    /// A statement of its own, run after the orders are locked, never a subquery of the lock: a
    /// statement's snapshot is taken when it starts, so a lock that waited for the transaction recording
    /// an acceptance would read the activities as they were before it; the next statement sees them.
    ///
    /// Each order drives one probe of the activities' primary key (a `LATERAL` subquery behind
    /// `OFFSET 0`, as the outbox's locks are, see ``Outbox``): a filter of the whole table by the list,
    /// planned while the table was small, scanned all of it for every batch as it grew. The probe's plan
    /// is cached: planning it each run cost more than running it.
    static func acceptedQuery(_ orderIDs: [String]) -> PostgresQuery {
        """
        SELECT a.order_id, a.delivered_apns_id::text AS apns_id
        FROM unnest(\(PostgresTextArray(orderIDs))::text[]) AS k(order_id)
        CROSS JOIN LATERAL (
            SELECT d.order_id, d.delivered_apns_id FROM activities AS d
            WHERE d.order_id = k.order_id AND d.delivered_apns_id IS NOT NULL
            OFFSET 0) AS a
        """
    }

    /// The rows of ``acceptedQuery(_:)`` by order.
    static func accepted(from rows: PostgresRows) throws -> [String: Set<String>] {
        var accepted: [String: Set<String>] = [:]
        for row in rows {
            accepted[try row.decode(String.self, "order_id"), default: []].insert(
                try row.decode(String.self, "apns_id"))
        }
        return accepted
    }

    /// The orders due for the sweeper, locked (`SKIP LOCKED`: another sweeper's are left to it), with their
    /// accepted updates settled, and how many it only deferred. Events leave the sweep column earlier than
    /// the state's own time (see ``SweepColumn``): such an order's column moves to that time, and it is not
    /// swept now.
    static func lockDue(
        now: Date, limit: Int, on connection: PostgresConnection
    ) async throws -> (states: [OrderState], deferred: Int) {
        let rows = try await connection.query(
            """
            SELECT order_id, user_id, state FROM orders
            WHERE next_sweep_at <= \(now) AND state IS NOT NULL
            ORDER BY next_sweep_at
            LIMIT \(literal: limit)
            FOR UPDATE SKIP LOCKED
            """)
        let lockedIDs = try rows.map { try $0.decode(String.self, "order_id") }
        let accepted =
            lockedIDs.isEmpty
            ? [:] : try OrderStore.accepted(from: try await connection.query(acceptedQuery(lockedIDs)))
        var states: [OrderState] = []
        var notYet: [(orderID: String, at: Date)] = []
        for row in rows {
            let orderID = try row.decode(String.self, "order_id")
            guard let state = try readState(try row.decode([UInt8]?.self, "state"), accepted: accepted[orderID] ?? [])
            else { continue }
            if let at = state.nextSweepAt, at > now {
                notYet.append((state.orderID, at))
            } else {
                states.append(state)
            }
        }
        if !notYet.isEmpty {
            try await connection.query(
                """
                UPDATE orders AS o SET next_sweep_at = r.at
                FROM unnest(\(PostgresTextArray(notYet.map(\.orderID)))::text[], \(notYet.map(\.at))::timestamptz[]) AS r(order_id, at)
                WHERE o.order_id = r.order_id
                """)
        }
        return (states, notYet.count)
    }

    /// Locks one existing order; nil when it does not exist.
    static func lockOrder(_ orderID: String, on connection: PostgresConnection) async throws -> OrderState? {
        try await lockExisting([orderID], on: connection)[orderID] ?? nil
    }

    /// The push-to-start tokens (not retired) and the device settings on file for these users, read in one
    /// round trip.
    static func tokensAndSettings(
        users: [String], on connection: PostgresConnection
    ) async throws -> (tokens: [String: [PushToStartRegistration]], settings: [String: [String: DeviceSettings]]) {
        guard !users.isEmpty else { return ([:], [:]) }
        let results = try await connection.pipeline([
            pushToStartTokensQuery(users: users), DeviceSettingsRows.query(users: users),
        ])
        return (try pushToStartTokens(from: results[0]), try DeviceSettingsRows.settings(from: results[1]))
    }

    /// The push-to-start tokens on file for these users (not retired), as a statement for a pipeline.
    static func pushToStartTokensQuery(users: [String]) -> PostgresQuery {
        """
        SELECT user_id, registration FROM push_to_start_tokens
        WHERE user_id = ANY(\(PostgresTextArray(Array(Set(users)).sorted()))::text[]) AND invalidated_at IS NULL
        ORDER BY user_id, device_id
        """
    }

    /// Files a push-to-start token (newest wins: a registration older than the one on file changes nothing).
    /// A device new to a user who has ``OrderState/maxPushToStartDevices`` on file (not retired) is refused:
    /// the core says so on the user's orders. (The user's row lock, taken before, orders concurrent batches.)
    static func registerQuery(_ e: PushToStartTokenEvent) throws -> PostgresQuery {
        """
        INSERT INTO push_to_start_tokens (user_id, device_id, registration, bundle_id, attributes_type,
                                          environment, token_prefix, occurred_at, event_id)
        SELECT \(e.userID), \(e.deviceID), \(try json(e.registration)),
               \(e.bundleID), \(e.attributesType), \(e.environment.rawValue), \(e.token.prefix),
               \(e.occurredAt), \(e.eventID)
        WHERE EXISTS (SELECT FROM push_to_start_tokens WHERE user_id = \(e.userID) AND device_id = \(e.deviceID))
           OR (SELECT count(*) FROM push_to_start_tokens WHERE user_id = \(e.userID) AND invalidated_at IS NULL)
              < \(OrderState.maxPushToStartDevices)
        ON CONFLICT (user_id, device_id) DO UPDATE SET
            registration = EXCLUDED.registration, bundle_id = EXCLUDED.bundle_id,
            attributes_type = EXCLUDED.attributes_type, environment = EXCLUDED.environment,
            token_prefix = EXCLUDED.token_prefix, occurred_at = EXCLUDED.occurred_at,
            event_id = EXCLUDED.event_id, last_seen_at = now(), invalidated_at = NULL, invalid_reason = NULL
        WHERE (EXCLUDED.occurred_at, EXCLUDED.event_id)
            > (push_to_start_tokens.occurred_at, push_to_start_tokens.event_id)
        """
    }

    /// The orders of these users that are not settled, their own and those they follow, by user.
    static func openOrders(of users: [String], on connection: PostgresConnection) async throws -> [String: Set<String>]
    {
        let rows = try await connection.query(
            """
            SELECT order_id, user_id FROM orders WHERE user_id = ANY(\(PostgresTextArray(users))::text[]) AND NOT settled
            UNION ALL
            SELECT f.order_id, f.user_id FROM order_followers AS f JOIN orders AS o USING (order_id)
            WHERE f.user_id = ANY(\(PostgresTextArray(users))::text[]) AND NOT o.settled
            """)
        var orders: [String: Set<String>] = [:]
        for row in rows {
            orders[try row.decode(String.self, "user_id"), default: []].insert(try row.decode(String.self, "order_id"))
        }
        return orders
    }

    static func pushToStartTokens(from rows: PostgresRows) throws -> [String: [PushToStartRegistration]] {
        var tokens: [String: [PushToStartRegistration]] = [:]
        for row in rows {
            let registration = try decodeRegistration(try row.decode(PostgresJSON.self, "registration"))
            tokens[try row.decode(String.self, "user_id"), default: []].append(registration)
        }
        return tokens
    }

    /// Writes everything a change implies; returns the state written, if it changed (see below).
    @discardableResult
    static func write(
        _ change: OrderChange, kind: String, hold: Duration = .seconds(60), sweepColumn: SweepColumn = .keepEarlier,
        now: Date, on connection: PostgresConnection
    ) async throws -> [OrderStateCache.Written] {
        try await write([change], kind: kind, hold: hold, sweepColumn: sweepColumn, now: now, on: connection)
    }

    /// How a write sets `orders.next_sweep_at`, the time the sweeper next looks at the order.
    ///
    /// The column is never later than the state's own ``LiveDeliveryCore/OrderState/nextSweepAt``,
    /// but it may be earlier. Nearly every event moves an active order's idle deadline on, and a
    /// column that changed with it would be an indexed column changed on every event: the row could
    /// never be updated in place (a HOT update), and each event would add entries to all three of the
    /// order's indexes, at a random place in each. So events and outcomes keep an earlier time
    /// (``keepEarlier``), and the sweeper, finding an order whose own time has not come, only moves
    /// the column to it (``exact``; about once per idle timeout for an order that stays open).
    enum SweepColumn: Sendable {
        /// Keep the column while it is earlier than the state's time; set it when the state's time is
        /// earlier, or when either is absent.
        case keepEarlier
        /// Set the column to the state's time.
        case exact
    }

    /// Writes everything several orders' changes imply with a fixed number of statements, whatever
    /// the number of orders (set-based: the cost of a batch is a handful of round trips, not a few
    /// per order). Each order appears at most once. Returns the states written and the row versions
    /// they were written as (for ``OrderStateCache``, once the transaction has committed).
    ///
    /// With a `handover`, due updates without an alert go to this process's dispatcher in memory, without an outbox
    /// row, as many as it has slots for (see ``PushCapacity``); the timeline row lists them, so that a
    /// sweeper can send them again if this process stops before their answers are recorded
    /// (``HandedPushes``). The rest are written to the outbox and announced with a `NOTIFY` for any
    /// dispatcher to claim. A push whose activity's previous push may be in flight without a row waits for
    /// that push's answer, `hold` at most, unless its activity is among `answered` (the recorder's, whose
    /// answers are the ones in flight).
    ///
    /// `delivered` are orders whose only change is APNs' acceptance of current updates (see
    /// ``LiveDeliveryCore/OrderState/settleDelivered(_:)``): their activity rows are written with the
    /// updates' ids (`delivered_apns_id`, which every read settles), their order rows are not; the settled
    /// states are returned with the order rows' current versions.
    ///
    /// The statements go in one pipeline (one round trip), after `leading` ones of the caller's; only
    /// withdrawn pushes, which must be locked before they are deleted, cost two round trips of their own.
    @discardableResult
    static func write(
        _ changes: [OrderChange], kind: String, handover: Handover? = nil, delivered: [Delivered] = [],
        answered: Set<Outbox.Key> = [], hold: Duration = .seconds(60), leading: [PostgresQuery] = [],
        sweepColumn: SweepColumn = .keepEarlier, now: Date, on connection: PostgresConnection
    ) async throws -> [OrderStateCache.Written] {
        // The dispatcher's slots, reserved before the statements are built and given to them as a count.
        let lease = Writes.Lease(
            slots: handover?.reserve(upTo: Writes.duePushes(changes, now: now)) ?? 0,
            holdSeconds: handover?.leaseSeconds ?? hold.seconds, answered: answered)
        let writes = try Writes(
            changes, kind: kind, lease: lease, delivered: delivered, leading: leading, sweepColumn: sweepColumn,
            now: now)
        // Withdrawn pushes first (the order rows are locked already, so this waits on no one new).
        if !writes.withdrawn.isEmpty {
            try await Outbox.delete(
                try await Outbox.lock(writes.withdrawn, on: connection).values.map(\.row), on: connection)
        }
        guard !writes.statements.isEmpty else { return [] }
        return try writes.finish(try await connection.pipeline(writes.statements), handover: handover)
    }

    /// What ``write(_:kind:handover:delivered:answered:hold:leading:sweepColumn:now:on:)`` sends, built without a
    /// connection, and the reading of its answers.
    struct Writes {
        /// Outbox rows to lock and delete before the statements.
        var withdrawn: [Outbox.Key]
        /// One pipeline: the caller's `leading` statements, then the orders', activities', outbox's,
        /// push-to-start tokens' and timeline's.
        var statements: [PostgresQuery] = []
        /// The orders' rows written (their states and documents).
        private var rows: [OrderRow] = []
        private var delivered: [Delivered]
        private var versionsIndex: Int?
        private var outboxIndex: Int?
        private var pushes: [Outbox.Row] = []
        /// Dispatcher slots reserved for the rows the outbox statement leases.
        private var slots = 0

        /// How many pushes the statement may hand to this process's dispatcher without a row (the slots it
        /// reserved); how long a new row waits for an answer to a push in flight without a row; and the
        /// activities whose answers are being recorded (no push of theirs is in flight any more). ``none``
        /// writes every push to the outbox for any dispatcher to claim.
        struct Lease {
            var slots: Int
            var holdSeconds: Double
            var answered: Set<Outbox.Key> = []
            static let none = Lease(slots: 0, holdSeconds: 60)
        }

        /// The new pushes of `changes` due at `now`: as many slots as a lease can use.
        static func duePushes(_ changes: [OrderChange], now: Date) -> Int {
            changes.reduce(0) { count, change in
                count
                    + change.orderedPushes.count {
                        max($0.notBefore, change.notBefore[$0.activityKey] ?? $0.notBefore) <= now
                    }
            }
        }

        init(
            _ changes: [OrderChange], kind: String, lease: Lease, delivered: [Delivered],
            leading: [PostgresQuery], sweepColumn: SweepColumn, now: Date
        ) throws {
            let changes = changes.sorted { $0.state.orderID < $1.state.orderID }
            withdrawn = changes.flatMap { change in
                change.withdrawn.sorted().map { Outbox.Key(orderID: change.state.orderID, activityKey: $0) }
            }
            self.delivered = delivered
            statements = leading
            let changed = changes.filter { $0.original != $0.state }
            rows = try changed.map { try OrderRow($0.state) }
            if !rows.isEmpty {
                versionsIndex = statements.count
                statements.append(OrderStore.updateQuery(rows, sweepColumn: sweepColumn))
            }
            let activityChanges =
                changed.map { Activities.Change(original: $0.original, state: $0.state) }
                + delivered.map { Activities.Change(original: $0.original, state: $0.settled, delivered: $0.apnsIDs) }
            if let activities = Activities.writeQuery(activityChanges) {
                statements.append(activities)
            }
            // The timeline's rows, begun here: they list the pushes handed over.
            var timeline = Timeline.Rows(capacity: changes.reduce(0) { $0 + $1.decisions.count })
            if lease.slots > 0 { timeline.reserveHanded(lease.slots) }
            var free = lease.slots
            pushes.reserveCapacity(changes.count)
            for change in changes {
                let orderID = change.state.orderID
                for push in change.orderedPushes {
                    var row = try Outbox.Row(
                        orderID: orderID, push: push,
                        notBefore: max(push.notBefore, change.notBefore[push.activityKey] ?? push.notBefore))
                    row.attempts = change.attempts[push.activityKey] ?? 0
                    // The activity's push before this change, if any, may be in flight without a row (any other push
                    // has its row, which the statement replaces), unless its answer is the one being recorded.
                    if let previous = change.original?.activity(push.activityKey)?.pending {
                        row.held =
                            previous.mayBeInFlightWithoutRow
                            && !lease.answered.contains(Outbox.Key(orderID: orderID, activityKey: push.activityKey))
                    } else if free > 0, row.notBefore <= now, row.mayGoWithoutRow, !change.decisions.isEmpty {
                        // A push that must wait keeps no slot: a slot reserved for it is only given back. The
                        // timeline row lists it, and only an order with decisions has one.
                        row.hand = true
                        free -= 1
                        timeline.appendHanded(orderID: orderID, apnsID: push.apnsID)
                    }
                    pushes.append(row)
                }
            }
            slots = lease.slots - free
            if !pushes.isEmpty {
                // The NOTIFY (delivered at commit) for the rows written rides in the same statement: one round
                // trip fewer.
                outboxIndex = statements.count
                statements.append(Outbox.writeQuery(pushes, holdSeconds: lease.holdSeconds))
            }
            for registration in changes.flatMap(\.retired) {
                statements.append(
                    """
                    UPDATE push_to_start_tokens SET invalidated_at = now(), invalid_reason = 'token_gone'
                    WHERE user_id = \(registration.userID) AND device_id = \(registration.deviceID)
                      AND event_id = \(registration.key.eventID)
                    """)
            }
            statements += BroadcastRows.writes(changed)
            for change in changes { timeline.append(orderID: change.state.orderID, change.decisions) }
            if let insert = Timeline.insertQuery(timeline, kind: kind) { statements.append(insert) }
        }

        /// Reads the statements' answers: the states written with their rows' versions, for the cache
        /// (the order rows of `delivered` are not written: they go at the versions they keep). Hands the
        /// pushes the outbox statement kept out of the outbox to the dispatcher.
        func finish(_ results: [PostgresRows], handover: Handover?) throws -> [OrderStateCache.Written] {
            var written = delivered.map {
                OrderStateCache.Written(orderID: $0.orderID, version: $0.version, state: $0.settled)
            }
            if let versionsIndex {
                var byID: [String: OrderState] = [:]
                for row in rows { byID[row.orderID] = row.value }
                for row in results[versionsIndex] {
                    let orderID = try row.decode(String.self, "order_id")
                    if let state = byID[orderID] {
                        written.append(
                            .init(orderID: orderID, version: try row.decode(Int64.self, "version"), state: state))
                    }
                }
            }
            if let handover, let outboxIndex, slots > 0 {
                var planned: [Outbox.Key: PlannedPush] = [:]
                for push in pushes where push.hand {
                    planned[Outbox.Key(orderID: push.orderID, activityKey: push.activityKey)] = push.planned
                }
                var claims: [Outbox.Claim] = []
                for row in results[outboxIndex] {
                    guard let orderID = try row.decode(String?.self, "order_id"),
                        let activityKey = try row.decode(String?.self, "activity_key"),
                        let push = planned[Outbox.Key(orderID: orderID, activityKey: activityKey)]
                    else { continue }
                    // Generation 0: no row. An answer finds none (or a newer push's, which it releases).
                    claims.append(
                        Outbox.Claim(
                            orderID: orderID, activityKey: activityKey, generation: 0, attempts: 1, push: push))
                }
                handover.leased(claims)
            }
            return written
        }

        /// The pushes the outbox statement hands over without a row if it finds them due, their apps not paused
        /// and no row of their activities.
        var handed: [Outbox.Key] {
            pushes.filter(\.hand).map { Outbox.Key(orderID: $0.orderID, activityKey: $0.activityKey) }
        }

        /// The state documents the statements write, by order.
        var documents: [(orderID: String, bytes: [UInt8])] { rows.map { ($0.orderID, $0.state.bytes) } }
    }

    /// The orders' rows written set-based, returning each row's new version.
    private static func updateQuery(_ rows: [OrderRow], sweepColumn: SweepColumn) -> PostgresQuery {
        """
        UPDATE orders AS o SET
            state = r.state, user_id = COALESCE(r.user_id, o.user_id), status = r.status,
            terminal = r.terminal, settled = r.settled, last_sequence = r.last_sequence,
            last_occurred_at = r.last_occurred_at, last_event_id = r.last_event_id,
            next_sweep_at = CASE WHEN \(sweepColumn == .keepEarlier)::boolean AND r.next_sweep_at >= o.next_sweep_at
                                 THEN o.next_sweep_at ELSE r.next_sweep_at END,
            updated_at = now()
        FROM unnest(\(PostgresTextArray(rows.map(\.orderID)))::text[], \(rows.map(\.state))::bytea[],
                    \(PostgresTextArray(rows.map(\.userID)))::text[],
                    \(PostgresTextArray(rows.map(\.status)))::text[], \(rows.map(\.terminal))::boolean[],
                    \(rows.map(\.settled))::boolean[], \(PostgresNullableArray(rows.map(\.lastSequence)))::bigint[],
                    \(PostgresNullableArray(rows.map(\.lastOccurredAt)))::timestamptz[],
                    \(PostgresTextArray(rows.map(\.lastEventID)))::text[],
                    \(PostgresNullableArray(rows.map(\.nextSweepAt)))::timestamptz[])
            AS r(order_id, state, user_id, status, terminal, settled, last_sequence, last_occurred_at,
                 last_event_id, next_sweep_at)
        WHERE o.order_id = r.order_id
        RETURNING o.order_id, o.xmin::text::bigint AS version
        """
    }

    /// One order row's new values (the columns of an `unnest`: arrays bind as parameters and PostgreSQL
    /// reads them far faster than `json_to_recordset` reads the same rows as JSON objects).
    fileprivate struct OrderRow {
        var value: OrderState
        var orderID: String
        var state: PostgresBytes
        var userID: String?
        var status: String?
        var terminal: Bool
        var settled: Bool
        var lastSequence: Int?
        var lastOccurredAt: Date?
        var lastEventID: String?
        var nextSweepAt: Date?

        init(_ state: OrderState) throws {
            let record = state.record
            value = state
            orderID = state.orderID
            self.state = OrderStore.document(state)
            userID = record?.userID
            status = record?.status.rawValue
            terminal = record?.isTerminal ?? false
            settled = state.isSettled
            lastSequence = record?.newest.sequence
            lastOccurredAt = record?.newest.occurredAt
            lastEventID = record?.newest.eventID
            nextSweepAt = state.nextSweepAt
        }
    }
}

/// The per-device push-to-start limit within one transaction: how many starts each device has
/// had in the window (accepted by APNs, or waiting in the outbox), kept up to date as the
/// transaction plans more. Read under the user's advisory lock, so concurrent workers agree.
struct StartLimit: Sendable {
    let maximum: Int
    private(set) var used: [String: Int] = [:]

    init(maximum: Int) { self.maximum = maximum }

    /// The devices that must not be started now.
    var refused: Set<String> { Set(used.filter { $0.value >= maximum }.keys) }

    static func load(
        devices: [String], configuration: WorkerConfiguration.PushToStart, now: Date,
        on connection: PostgresConnection
    ) async throws -> StartLimit {
        var limit = StartLimit(maximum: configuration.maxStartsPerDevice)
        let sorted = Array(Set(devices)).sorted()
        guard !sorted.isEmpty else { return limit }
        let since = now.addingTimeInterval(-configuration.window.seconds)
        let keys = sorted.map { "device:" + $0 }
        // Planned every run: the outbox swings between empty and a backlog (see ``Outbox``).
        let query: PostgresQuery = """
            SELECT k, (SELECT count(*) FROM push_attempts a
                       WHERE a.activity_key = k AND a.kind = 'start' AND a.outcome = 'delivered'
                         AND a.attempted_at > \(since))
                    + (SELECT count(*) FROM outbox o WHERE o.activity_key = k AND o.kind = 'start') AS n
            FROM unnest(\(PostgresTextArray(keys))::text[]) AS k
            """
        for row in try await connection.query(query.planned(.everyRun)) {
            let key = try row.decode(String.self, "k")
            limit.used[String(key.dropFirst("device:".count))] = try row.decode(Int.self, "n")
        }
        return limit
    }

    /// Counts the devices `effects` start: a start push for an activity that had none pending before
    /// (`pendingStarts`, ``pendingStarts(_:)`` of the state before the call).
    mutating func count(_ effects: Step.Effects, pendingStarts: [String], after state: OrderState) {
        for push in effects.pushes where push.kind == .start {
            guard !pendingStarts.contains(push.activityKey), let device = state.activity(push.activityKey)?.deviceID
            else { continue }
            used[device, default: 0] += 1
        }
    }

    /// The activities of `state` whose pending push is a start.
    static func pendingStarts(_ state: OrderState) -> [String] {
        state.activities.compactMap { $0.pending?.kind == .start ? $0.key : nil }
    }
}
