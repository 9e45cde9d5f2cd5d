import Foundation
import LiveDeliveryCore
import Postgres

/// The `activities` table: a projection of each activity in the order's state, for the reports and
/// for people (the state itself is the order's `state` document). Written with the order, in the
/// same statement pipeline (``OrderStore/write(_:kind:handover:delivered:leading:sweepColumn:now:on:)``).
enum Activities {
    /// The activity projection rows (the columns of an `unnest`).
    private struct Row: Equatable {
        var orderID: String
        var activityKey: String
        var activityID: String?
        var deviceID: String?
        var bundleID: String?
        var environment: String?
        var state: String
        var endReason: String?
        var tokenPrefix: String?
        var tokenReceivedAt: Date?
        var lastSentTimestamp: Int?
        var lastSentContent: String?
        var lastSentStep: String?
        var relevanceScore: Double?
        var alertCount: Int
        var pendingKind: String?
        var startedAt: Date?
        var endedAt: Date?
        var deliveredAPNsID: String?

        init(orderID: String, _ activity: ActivityState) {
            let target =
                activity.updateToken.map { ($0.token, $0.bundleID, $0.environment) }
                ?? activity.startToken.map { ($0.token, $0.bundleID, $0.environment) }
            self.orderID = orderID
            activityKey = activity.key
            activityID = activity.activityID
            deviceID = activity.deviceID
            bundleID = target?.1
            environment = target?.2.rawValue
            state = activity.phase.rawValue
            endReason = activity.closeReason?.stored
            tokenPrefix = target?.0.prefix
            tokenReceivedAt = activity.updateToken?.receivedAt
            lastSentTimestamp = activity.lastTimestamp == 0 ? nil : activity.lastTimestamp
            lastSentContent = activity.sent?.contentState
            lastSentStep = activity.sent?.step
            relevanceScore = activity.sent?.relevance
            alertCount = activity.alertCount
            pendingKind = activity.pending?.kind.rawValue
            startedAt = activity.startedAt
            endedAt = activity.endedAt
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
        let rows = changes.flatMap { change in
            let accepted = Dictionary(
                change.original?.activities.compactMap { activity in
                    activity.pending.flatMap { change.delivered.contains($0.apnsID) ? (activity.key, $0.apnsID) : nil }
                } ?? [],
                uniquingKeysWith: { first, _ in first })
            return change.state.activities.compactMap { activity -> Row? in
                var row = Row(orderID: change.state.orderID, activity)
                row.deliveredAPNsID = accepted[activity.key]
                if row.deliveredAPNsID == nil, let before = change.original?.activity(activity.key),
                    Row(orderID: change.state.orderID, before) == row
                {
                    return nil
                }
                return row
            }
        }
        guard !rows.isEmpty else { return nil }
        return """
            INSERT INTO activities (order_id, activity_key, activity_id, device_id, bundle_id, environment, state,
                                    end_reason, token_prefix, token_received_at, last_sent_timestamp,
                                    last_sent_content, last_sent_step, relevance_score, alert_count, pending_kind,
                                    started_at, ended_at, delivered_apns_id)
            SELECT r.order_id, r.activity_key, r.activity_id, r.device_id, r.bundle_id, r.environment, r.state,
                   r.end_reason, r.token_prefix, r.token_received_at, r.last_sent_timestamp,
                   r.last_sent_content::jsonb, r.last_sent_step, r.relevance_score, r.alert_count, r.pending_kind,
                   r.started_at, r.ended_at, r.delivered_apns_id::uuid
            FROM unnest(\(PostgresTextArray(rows.map(\.orderID)))::text[], \(PostgresTextArray(rows.map(\.activityKey)))::text[],
                        \(PostgresTextArray(rows.map(\.activityID)))::text[],
                        \(PostgresTextArray(rows.map(\.deviceID)))::text[],
                        \(PostgresTextArray(rows.map(\.bundleID)))::text[],
                        \(PostgresTextArray(rows.map(\.environment)))::text[], \(PostgresTextArray(rows.map(\.state)))::text[],
                        \(PostgresTextArray(rows.map(\.endReason)))::text[],
                        \(PostgresTextArray(rows.map(\.tokenPrefix)))::text[],
                        \(PostgresNullableArray(rows.map(\.tokenReceivedAt)))::timestamptz[],
                        \(PostgresNullableArray(rows.map(\.lastSentTimestamp)))::bigint[],
                        \(PostgresTextArray(rows.map(\.lastSentContent)))::text[],
                        \(PostgresTextArray(rows.map(\.lastSentStep)))::text[],
                        \(PostgresNullableArray(rows.map(\.relevanceScore)))::double precision[],
                        \(rows.map(\.alertCount))::integer[], \(PostgresTextArray(rows.map(\.pendingKind)))::text[],
                        \(PostgresNullableArray(rows.map(\.startedAt)))::timestamptz[],
                        \(PostgresNullableArray(rows.map(\.endedAt)))::timestamptz[],
                        \(PostgresTextArray(rows.map(\.deliveredAPNsID)))::text[])
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
