import Foundation
import LiveDeliveryCore
import Postgres

/// The outbox table: one row per activity with a push to send, the newest state's. Its SQL lives
/// here: the write of planned pushes (inserted, or replacing the pending one), the claim and its
/// lease, the release of a row for another send, and the locks and deletes by key.
///
/// Row locks and deletes by key are shaped so that their plans cannot turn quadratic.
///
/// The outbox is a queue: it empties, fills with a backlog, and empties again. A vacuum that finds
/// it empty records no live rows but keeps its pages, so the planner estimates one row until the
/// next `ANALYZE`, however many there are. A join of the keys with the outbox then put the outbox
/// on the outer side, and with 80,000 pending rows each dispatcher batch walked all of them once
/// per key: 350–600 ms per statement, and a backlog drained at a third of its speed for a minute.
///
/// Here the keys drive: each is one probe of the primary key (a `LATERAL` subquery behind
/// `OFFSET 0`, which the planner may not turn around), and every run is planned afresh, so a plan
/// made while the table was nearly empty (a sequential scan per probe) is never reused once it is
/// full. Rows are then changed by their `ctid`, which stays put while this transaction holds them.
enum Outbox {
    /// Announces rows to claim (delivered at commit).
    static let notifyChannel = "livedelivery_outbox"

    /// A row leased to this process: the push to send, on its `attempts`-th attempt.
    struct Claim: Sendable {
        var orderID: String
        var activityKey: String
        var generation: Int64
        var attempts: Int
        var push: PlannedPush
    }

    struct Key: Hashable, Sendable {
        var orderID: String
        var activityKey: String
    }

    // MARK: Writing

    /// One outbox row (the columns of an `unnest`).
    struct Row {
        var orderID: String
        var activityKey: String
        var kind: String
        var bundleID: String
        var environment: String
        var priority: Int
        var apnsID: String
        var push: PostgresBytes
        var reason: String
        var notBefore: Date
        var planned: PlannedPush
        /// Hand the push to this process's dispatcher without a row, if the statement finds it due, its app
        /// not paused and no row of its activity (see ``writeQuery(_:holdSeconds:)``).
        var hand = false
        /// A push of the activity may be in flight without a row: a new row waits a lease for its answer.
        var held = false
        /// The attempts a new row starts with: the sends of the same push made without a row.
        var attempts = 0

        init(orderID: String, push: PlannedPush, notBefore: Date) throws {
            self.orderID = orderID
            activityKey = push.activityKey
            kind = push.kind.rawValue
            bundleID = push.bundleID
            environment = push.environment.rawValue
            priority = push.priority
            apnsID = push.apnsID
            self.push = PostgresBytes(StoredPush.encode(push))
            reason = push.reason
            self.notBefore = notBefore
            planned = push
        }

        /// Whether the push may go to this process's dispatcher without a row: an update of a device's activity
        /// with no alert. A push found lost is built again, with a fresh timestamp, and such an update sent twice
        /// shows the same state twice, silently. The others keep their rows, so that a lost one is sent again
        /// identical (same `apns-id` and timestamp), which the phone ignores if the first one arrived: an alert
        /// built again would sound twice, and an end built again would reach an activity already ended. A start
        /// keeps its row for the per-device start limit too, which counts the starts in the outbox.
        var mayGoWithoutRow: Bool { planned.kind == .update && planned.alert == nil && !planned.isChannelRequest }
    }

    /// Writes planned pushes: a new row per activity, or the newest push replacing the row's (its
    /// generation moves on, so a recorder holding the older push releases the row rather than delete
    /// it).
    ///
    /// A push marked `hand` gets no row at all when it is due, its app is not paused and its activity has no
    /// row (so no push of it is in flight with a row): it is returned, for this process's dispatcher to
    /// send from memory, and the caller's timeline row lists its `apns-id` (`sql/126`). A new row marked `held`
    /// is inserted with a lease of `holdSeconds` and no owner: its activity's previous push may be in flight
    /// without a row, and that push's answer releases it (``PushSettlement/row(claimed:current:recorded:resend:)``
    /// with a claimed generation of 0); if no answer comes, it is claimed once the lease has passed. The `NOTIFY`
    /// for the rows written (delivered at commit) rides in the same statement. Returns the pushes handed over
    /// (`order_id`, `activity_key`), and one row of nulls when it notified.
    static func writeQuery(_ rows: [Row], holdSeconds: Double) -> PostgresQuery {
        let pushes = rows
        return """
            WITH l AS (
                SELECT r.*,
                       r.hand AND r.not_before <= statement_timestamp()
                       AND NOT EXISTS (SELECT 1 FROM app_pauses AS p
                                       WHERE p.bundle_id = r.bundle_id AND p.paused_until > now())
                       AND NOT EXISTS (SELECT 1 FROM outbox AS o
                                       WHERE o.order_id = r.order_id AND o.activity_key = r.activity_key) AS handed
                FROM unnest(\(PostgresTextArray(pushes.map(\.orderID)))::text[], \(PostgresTextArray(pushes.map(\.activityKey)))::text[],
                            \(PostgresTextArray(pushes.map(\.kind)))::text[], \(PostgresTextArray(pushes.map(\.bundleID)))::text[],
                            \(PostgresTextArray(pushes.map(\.environment)))::text[], \(pushes.map(\.priority))::integer[],
                            \(PostgresTextArray(pushes.map(\.apnsID)))::text[], \(pushes.map(\.push))::bytea[],
                            \(PostgresTextArray(pushes.map(\.reason)))::text[], \(pushes.map(\.notBefore))::timestamptz[],
                            \(pushes.map(\.hand))::boolean[], \(pushes.map(\.held))::boolean[],
                            \(pushes.map(\.attempts))::integer[])
                    AS r(order_id, activity_key, kind, bundle_id, environment, priority, apns_id, push, reason,
                         not_before, hand, held, attempts)
            ), written AS (
                INSERT INTO outbox (order_id, activity_key, kind, bundle_id, environment, priority, apns_id, push,
                                    reason, not_before, lease_until, attempts)
                SELECT l.order_id, l.activity_key, l.kind, l.bundle_id, l.environment, l.priority,
                       l.apns_id::uuid, l.push, l.reason, l.not_before,
                       CASE WHEN l.held THEN statement_timestamp() + make_interval(secs => \(holdSeconds)) END,
                       l.attempts
                FROM l WHERE NOT l.handed
                ON CONFLICT (order_id, activity_key) DO UPDATE SET
                    kind = EXCLUDED.kind, bundle_id = EXCLUDED.bundle_id, environment = EXCLUDED.environment,
                    priority = EXCLUDED.priority, apns_id = EXCLUDED.apns_id, push = EXCLUDED.push,
                    reason = EXCLUDED.reason, not_before = EXCLUDED.not_before,
                    generation = outbox.generation + 1, updated_at = now()
                RETURNING 1
            )
            SELECT order_id, activity_key FROM l WHERE handed
            UNION ALL
            SELECT NULL, NULL FROM (SELECT pg_notify(\(notifyChannel), '') FROM written LIMIT 1) AS n
            """
    }

    /// A row this transaction has locked.
    struct LockedRow: Hashable, Sendable {
        var generation: Int64
        /// The row version's `ctid`, in its text form.
        var row: String
    }

    /// Locks the rows of these keys (those that exist), in the order given: callers pass them sorted.
    static func lock(_ keys: [Key], on connection: PostgresConnection) async throws -> [Key: LockedRow] {
        guard !keys.isEmpty else { return [:] }
        return try locked(from: try await connection.query(lockQuery(keys)))
    }

    /// The rows of ``lockQuery(_:)``'s result.
    static func locked(from rows: PostgresRows) throws -> [Key: LockedRow] {
        var locked: [Key: LockedRow] = [:]
        for row in rows {
            let key = Key(
                orderID: try row.decode(String.self, "order_id"),
                activityKey: try row.decode(String.self, "activity_key"))
            locked[key] = LockedRow(
                generation: try row.decode(Int64.self, "generation"), row: try row.decode(String.self, "row"))
        }
        return locked
    }

    static func lockQuery(_ keys: [Key]) -> PostgresQuery {
        let query: PostgresQuery = """
            SELECT o.order_id, o.activity_key, o.generation, o.ctid::text AS row
            FROM unnest(\(PostgresTextArray(keys.map(\.orderID)))::text[], \(PostgresTextArray(keys.map(\.activityKey)))::text[]) AS k(order_id, activity_key)
            CROSS JOIN LATERAL (
                SELECT d.order_id, d.activity_key, d.generation, d.ctid FROM outbox AS d
                WHERE d.order_id = k.order_id AND d.activity_key = k.activity_key
                OFFSET 0 FOR UPDATE) AS o
            """
        return query.planned(.everyRun)
    }

    /// Deletes rows this transaction locked with ``lock(_:on:)``.
    static func delete(_ rows: [String], on connection: PostgresConnection) async throws {
        guard !rows.isEmpty else { return }
        try await connection.query(deleteQuery(rows))
    }

    static func deleteQuery(_ rows: [String]) -> PostgresQuery {
        let query: PostgresQuery = "DELETE FROM outbox WHERE ctid = ANY (\(PostgresTextArray(rows))::text[]::tid[])"
        return query.planned(.everyRun)
    }

    // MARK: Claiming

    /// The rows a claim leases, each through its own partial index.
    enum Lease {
        /// Free rows, oldest first.
        case free
        /// Rows whose lease expired because their worker died.
        case expired

        var predicate: String {
            switch self {
            case .free: "d.lease_until IS NULL"
            case .expired: "d.lease_until IS NOT NULL AND d.lease_until < now()"
            }
        }

        var order: String {
            switch self {
            case .free: "d.not_before"
            case .expired: "d.lease_until"
            }
        }
    }

    /// The claim statement, planned every run (see above): a generic plan made while the outbox
    /// held a few rows reads it whole (a sequential scan and a sort of every free row, then another
    /// scan for the `ctid`s), and kept once a backlog fills the outbox it would make every claim read
    /// the whole backlog.
    ///
    /// The rows are picked by `ctid` from an array the subquery builds, not by a join with it: a
    /// generic plan for a join assumed a tenth of the outbox behind `LIMIT $n`. With 945k pending rows
    /// it hashed the subquery and scanned the whole outbox, and one claim ran for minutes while every
    /// push waited. A TID scan has no such choice to make.
    static func leaseQuery(_ lease: Lease, workerID: String, seconds: Double, limit: Int) -> PostgresQuery {
        let query: PostgresQuery = """
            UPDATE outbox AS o
            SET lease_owner = \(workerID), lease_until = now() + make_interval(secs => \(seconds)),
                attempts = o.attempts + 1
            WHERE o.ctid = ANY (ARRAY(
                SELECT d.ctid FROM outbox AS d
                WHERE \(unsafeRaw: lease.predicate) AND d.not_before <= now()
                  AND NOT EXISTS (SELECT 1 FROM app_pauses AS p
                                  WHERE p.bundle_id = d.bundle_id AND p.paused_until > now())
                ORDER BY \(unsafeRaw: lease.order)
                LIMIT \(limit)
                FOR UPDATE SKIP LOCKED))
            RETURNING o.order_id, o.activity_key, o.generation, o.attempts, o.push
            """
        return query.planned(.everyRun)
    }

    /// The claim a row of ``leaseQuery(_:workerID:seconds:limit:)`` holds.
    static func claim(_ row: PostgresRow) throws -> Claim {
        Claim(
            orderID: try row.decode(String.self, "order_id"),
            activityKey: try row.decode(String.self, "activity_key"),
            generation: try row.decode(Int64.self, "generation"),
            attempts: try row.decode(Int.self, "attempts"),
            push: try StoredPush.decode(try row.decode([UInt8].self, "push")))
    }

    /// A row going back for another send (see ``PushSettlement/Row``).
    struct Released {
        var row: String
        var replaced: Bool
        var uncounted: Bool
    }

    /// Releases rows this transaction locked with ``lock(_:on:)``: by the rows locked, so that the `ANY`
    /// gives the planner a TID scan of the outbox, whatever it believes about the outbox's size.
    static func releaseQuery(_ released: [Released]) -> PostgresQuery {
        let rows = released.map(\.row)
        let release: PostgresQuery = """
            UPDATE outbox AS o SET lease_owner = NULL, lease_until = NULL,
                attempts = CASE WHEN k.replaced THEN 0
                                WHEN k.uncounted THEN greatest(o.attempts - 1, 0)
                                ELSE o.attempts END
            FROM unnest(\(PostgresTextArray(rows))::text[]::tid[], \(released.map(\.replaced))::boolean[],
                        \(released.map(\.uncounted))::boolean[]) AS k(row, replaced, uncounted)
            WHERE o.ctid = ANY (\(PostgresTextArray(rows))::text[]::tid[]) AND o.ctid = k.row
            """
        return release.planned(.everyRun)
    }

    /// Per app: the pushes waiting in the outbox, and how long the oldest due and unleased one has been
    /// due, in seconds (the metrics' sample; one pass over the table, which a backlog keeps small).
    static func pendingByApp(
        _ client: PostgresClient
    ) async throws -> [(bundleID: String, pending: Int, oldestDueAge: Double)] {
        try await client.query(
            """
            SELECT bundle_id, count(*),
                   coalesce(extract(epoch FROM now() - min(not_before) FILTER (
                       WHERE not_before <= now() AND (lease_until IS NULL OR lease_until < now()))), 0)::float8
            FROM outbox GROUP BY bundle_id
            """
        ).map { (try $0.decode(String.self, at: 0), try $0.decode(Int.self, at: 1), try $0.decode(Double.self, at: 2)) }
    }
}

extension ActivityState.PendingPush {
    /// Whether this pending push may be in flight without an outbox row: a silent update, what
    /// ``Outbox/Row/mayGoWithoutRow`` lets go without one (a channel request is never an update). Any other has
    /// its row.
    var mayBeInFlightWithoutRow: Bool { kind == .update && alertKind == nil }
}
