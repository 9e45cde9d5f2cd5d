import Foundation
import LiveDeliveryCore
import Postgres

/// The `activities` table: a projection of each activity in the order's state, for the reports and
/// for people (the state itself is the order's `state` document). Written with the order, in the
/// same statement pipeline (``OrderStore/write(_:kind:handover:delivered:answered:hold:leading:sweepColumn:now:on:)``).
enum Activities {
    /// The projection rows to write, one array per column (the arguments of the statement's `unnest`), appended
    /// row by row from the activities' states: no row value is built, and an unchanged activity costs a comparison.
    private struct Columns {
        var orderID: [String] = []
        var activityKey: [String] = []
        var activityID: [String?] = []
        var deviceID: [String?] = []
        var bundleID: [String?] = []
        var environment: [String?] = []
        var state: [String] = []
        var endReason: [String?] = []
        var tokenPrefix: [String?] = []
        var tokenReceivedAt: [Date?] = []
        var lastSentTimestamp: [Int?] = []
        var lastSentContent: [String?] = []
        var lastSentStep: [String?] = []
        var relevanceScore: [Double?] = []
        var alertCount: [Int] = []
        var pendingKind: [String?] = []
        var startedAt: [Date?] = []
        var endedAt: [Date?] = []
        var deliveredAPNsID: [String?] = []

        /// Room for `count` rows in every column: each column is allocated once.
        init(capacity count: Int) {
            orderID.reserveCapacity(count)
            activityKey.reserveCapacity(count)
            activityID.reserveCapacity(count)
            deviceID.reserveCapacity(count)
            bundleID.reserveCapacity(count)
            environment.reserveCapacity(count)
            state.reserveCapacity(count)
            endReason.reserveCapacity(count)
            tokenPrefix.reserveCapacity(count)
            tokenReceivedAt.reserveCapacity(count)
            lastSentTimestamp.reserveCapacity(count)
            lastSentContent.reserveCapacity(count)
            lastSentStep.reserveCapacity(count)
            relevanceScore.reserveCapacity(count)
            alertCount.reserveCapacity(count)
            pendingKind.reserveCapacity(count)
            startedAt.reserveCapacity(count)
            endedAt.reserveCapacity(count)
            deliveredAPNsID.reserveCapacity(count)
        }

        /// The device the activity's pushes go to: its update token, else its push-to-start token.
        static func target(_ a: ActivityState) -> (token: DeviceToken, bundleID: String, environment: APNsEnvironment)?
        {
            a.updateToken.map { ($0.token, $0.bundleID, $0.environment) }
                ?? a.startToken.map { ($0.token, $0.bundleID, $0.environment) }
        }

        /// Whether two states of an activity give the same row (a changed token gives another row, even where
        /// its prefix is the same).
        static func sameRow(_ a: ActivityState, _ b: ActivityState) -> Bool {
            let (ta, tb) = (target(a), target(b))
            return a.key == b.key && a.activityID == b.activityID && a.deviceID == b.deviceID && a.phase == b.phase
                && a.closeReason == b.closeReason && ta?.token == tb?.token && ta?.bundleID == tb?.bundleID
                && ta?.environment == tb?.environment && a.updateToken?.receivedAt == b.updateToken?.receivedAt
                && a.lastTimestamp == b.lastTimestamp && a.sent?.contentState == b.sent?.contentState
                && a.sent?.step == b.sent?.step && a.sent?.relevance == b.sent?.relevance
                && a.alertCount == b.alertCount && a.pending?.kind == b.pending?.kind && a.startedAt == b.startedAt
                && a.endedAt == b.endedAt
        }

        mutating func append(orderID: String, _ activity: ActivityState, delivered: String?) {
            let target = Self.target(activity)
            self.orderID.append(orderID)
            activityKey.append(activity.key)
            activityID.append(activity.activityID)
            deviceID.append(activity.deviceID)
            bundleID.append(target?.bundleID)
            environment.append(target?.environment.rawValue)
            state.append(activity.phase.rawValue)
            endReason.append(activity.closeReason?.stored)
            tokenPrefix.append(target?.token.prefix)
            tokenReceivedAt.append(activity.updateToken?.receivedAt)
            lastSentTimestamp.append(activity.lastTimestamp == 0 ? nil : activity.lastTimestamp)
            lastSentContent.append(activity.sent?.contentState)
            lastSentStep.append(activity.sent?.step)
            relevanceScore.append(activity.sent?.relevance)
            alertCount.append(activity.alertCount)
            pendingKind.append(activity.pending?.kind.rawValue)
            startedAt.append(activity.startedAt)
            endedAt.append(activity.endedAt)
            deliveredAPNsID.append(delivered)
        }
    }

    /// An order's state written, or settled by APNs' acceptance of updates.
    struct Change {
        var original: OrderState?
        var state: OrderState
        /// The `apns-id`s of the updates APNs accepted that `state` settles and the order's stored
        /// state does not say: each goes to the row of the activity it was pending for, where every read
        /// of the order settles it (``OrderStore/acceptedQuery(_:)``).
        var delivered: [String] = []
    }

    /// The statement writing the activity rows of changed states; nil when there is none to write. A row
    /// whose columns the change leaves as they were (an ended activity beside a live one, say) is not
    /// written again; a row with an accepted update always is.
    static func writeQuery(_ changes: [Change]) -> PostgresQuery? {
        var rows = Columns(capacity: changes.reduce(0) { $0 + $1.state.activities.count })
        for change in changes {
            let orderID = change.state.orderID
            for activity in change.state.activities {
                let before = change.original?.activity(activity.key)
                // The update APNs accepted for this activity, if it was pending in the state read.
                let delivered = before?.pending.flatMap { change.delivered.contains($0.apnsID) ? $0.apnsID : nil }
                if delivered == nil, let before, Columns.sameRow(before, activity) { continue }
                rows.append(orderID: orderID, activity, delivered: delivered)
            }
        }
        guard !rows.orderID.isEmpty else { return nil }
        return """
            INSERT INTO activities (order_id, activity_key, activity_id, device_id, bundle_id, environment, state,
                                    end_reason, token_prefix, token_received_at, last_sent_timestamp,
                                    last_sent_content, last_sent_step, relevance_score, alert_count, pending_kind,
                                    started_at, ended_at, delivered_apns_id)
            SELECT r.order_id, r.activity_key, r.activity_id, r.device_id, r.bundle_id, r.environment, r.state,
                   r.end_reason, r.token_prefix, r.token_received_at, r.last_sent_timestamp,
                   r.last_sent_content::jsonb, r.last_sent_step, r.relevance_score, r.alert_count, r.pending_kind,
                   r.started_at, r.ended_at, r.delivered_apns_id::uuid
            FROM unnest(\(PostgresTextArray(rows.orderID))::text[], \(PostgresTextArray(rows.activityKey))::text[],
                        \(PostgresTextArray(rows.activityID))::text[],
                        \(PostgresTextArray(rows.deviceID))::text[],
                        \(PostgresTextArray(rows.bundleID))::text[],
                        \(PostgresTextArray(rows.environment))::text[], \(PostgresTextArray(rows.state))::text[],
                        \(PostgresTextArray(rows.endReason))::text[],
                        \(PostgresTextArray(rows.tokenPrefix))::text[],
                        \(PostgresNullableArray(rows.tokenReceivedAt))::timestamptz[],
                        \(PostgresNullableArray(rows.lastSentTimestamp))::bigint[],
                        \(PostgresTextArray(rows.lastSentContent))::text[],
                        \(PostgresTextArray(rows.lastSentStep))::text[],
                        \(PostgresNullableArray(rows.relevanceScore))::double precision[],
                        \(rows.alertCount)::integer[], \(PostgresTextArray(rows.pendingKind))::text[],
                        \(PostgresNullableArray(rows.startedAt))::timestamptz[],
                        \(PostgresNullableArray(rows.endedAt))::timestamptz[],
                        \(PostgresTextArray(rows.deliveredAPNsID))::text[])
                AS r(order_id, activity_key, activity_id, device_id, bundle_id, environment, state, end_reason,
                     token_prefix, token_received_at, last_sent_timestamp, last_sent_content, last_sent_step,
                     relevance_score, alert_count, pending_kind, started_at, ended_at, delivered_apns_id)
            ON CONFLICT (order_id, activity_key) DO UPDATE SET
                activity_id = EXCLUDED.activity_id, device_id = EXCLUDED.device_id, bundle_id = EXCLUDED.bundle_id,
                environment = EXCLUDED.environment, state = EXCLUDED.state, end_reason = EXCLUDED.end_reason,
                token_prefix = EXCLUDED.token_prefix, token_received_at = EXCLUDED.token_received_at,
                last_sent_timestamp = EXCLUDED.last_sent_timestamp, last_sent_content = EXCLUDED.last_sent_content,
                last_sent_step = EXCLUDED.last_sent_step, relevance_score = EXCLUDED.relevance_score,
                alert_count = EXCLUDED.alert_count, pending_kind = EXCLUDED.pending_kind,
                started_at = EXCLUDED.started_at, ended_at = EXCLUDED.ended_at,
                delivered_apns_id = coalesce(EXCLUDED.delivered_apns_id, activities.delivered_apns_id),
                updated_at = now()
            """
    }
}
