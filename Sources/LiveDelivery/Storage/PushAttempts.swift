import APNs
import Foundation
import LiveDeliveryCore
import Postgres

/// The `push_attempts` table: one row per APNs answer, the push's history (the reports read it; the
/// day partitions and their retention are `sql/112`).
enum PushAttempts {
    // swift-format-ignore: AlwaysUseLowerCamelCase
    // (the properties are named after the table's columns)
    /// One `push_attempts` row (the columns of an `unnest`).
    struct Row {
        var order_id: String
        var activity_key: String
        var kind: String
        var bundle_id: String
        var priority: Int
        var generation: Int64
        var apns_id: String
        var status: Int?
        var outcome: String
        var reason: String?
        var latency_ms: Double

        init(_ claim: Outbox.Claim, outcome: APNsOutcome, latency: Duration) {
            order_id = claim.orderID
            activity_key = claim.activityKey
            kind = claim.push.kind.rawValue
            bundle_id = claim.push.bundleID
            priority = claim.push.priority
            generation = claim.generation
            apns_id = claim.push.apnsID
            status = outcome.status
            self.outcome = PushAttempts.outcomeName(outcome)
            reason = outcome.reason?.rawValue
            latency_ms = latency.seconds * 1000
        }
    }

    /// Inserts the attempts of one recorded group, by `workerID`.
    static func insertQuery(_ attempts: [Row], workerID: String) -> PostgresQuery {
        """
        INSERT INTO push_attempts (order_id, activity_key, kind, bundle_id, priority, generation, apns_id,
                                   status, outcome, reason, latency_ms, worker_id)
        SELECT r.order_id, r.activity_key, r.kind, r.bundle_id, r.priority, r.generation, r.apns_id::uuid,
               r.status, r.outcome, r.reason, r.latency_ms, \(workerID)
        FROM unnest(\(PostgresTextArray(attempts.map(\.order_id)))::text[], \(PostgresTextArray(attempts.map(\.activity_key)))::text[],
                    \(PostgresTextArray(attempts.map(\.kind)))::text[], \(PostgresTextArray(attempts.map(\.bundle_id)))::text[],
                    \(attempts.map(\.priority))::integer[], \(attempts.map(\.generation))::bigint[],
                    \(PostgresTextArray(attempts.map(\.apns_id)))::text[], \(PostgresNullableArray(attempts.map(\.status)))::integer[],
                    \(PostgresTextArray(attempts.map(\.outcome)))::text[], \(PostgresTextArray(attempts.map(\.reason)))::text[],
                    \(attempts.map(\.latency_ms))::double precision[])
            AS r(order_id, activity_key, kind, bundle_id, priority, generation, apns_id, status, outcome, reason,
                 latency_ms)
        """
    }

    /// The `outcome` column's (and the metrics') name of an answer.
    static func outcomeName(_ outcome: APNsOutcome) -> String {
        switch outcome {
        case .delivered, .channelCreated: "delivered"
        case .tokenGone: "token_gone"
        case .retryLater: "retry_later"
        case .refreshAuth: "refresh_auth"
        case .configurationFault: "configuration_fault"
        case .payloadFault: "payload_fault"
        }
    }
}
