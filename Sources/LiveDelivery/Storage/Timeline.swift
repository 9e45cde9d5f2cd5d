import LiveDeliveryCore
import Postgres

/// The `timeline` table: each order's decisions, in order, for `report order-timeline` and the
/// reports over sweeps and alerts.
enum Timeline {
    /// Inserts the decisions of a write, each with its order, as `kind` (`event`, `outcome`, `sweep`);
    /// nil when there is none.
    static func insertQuery(_ decisions: [(orderID: String, decision: Decision)], kind: String) -> PostgresQuery? {
        guard !decisions.isEmpty else { return nil }
        return """
            INSERT INTO timeline (order_id, activity_key, kind, code, message)
            SELECT o, NULLIF(k, ''), \(kind), c, m
            FROM unnest(\(decisions.map(\.orderID))::text[], \(decisions.map { $0.decision.activityKey ?? "" })::text[],
                        \(decisions.map(\.decision.code.rawValue))::text[],
                        \(decisions.map(\.decision.message))::text[]) AS t(o, k, c, m)
            """
    }
}
