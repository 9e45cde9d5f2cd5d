import LiveDeliveryCore
import Postgres

/// The `timeline` table: each order's decisions, in order, for `report order-timeline` and the
/// reports over sweeps and alerts. One row per write of an order (`sql/115`), its decisions in three
/// arrays of the same length; `timeline_decisions` is the view of one row per decision.
enum Timeline {
    /// Inserts the decisions of a write, one row per order holding that order's decisions in order, as
    /// `kind` (`event`, `outcome`, `sweep`); nil when there is none. Each order appears in one run of
    /// `decisions` (a write holds each order once).
    static func insertQuery(_ decisions: [(orderID: String, decision: Decision)], kind: String) -> PostgresQuery? {
        guard !decisions.isEmpty else { return nil }
        return """
            INSERT INTO timeline (order_id, kind, activity_keys, codes, messages)
            SELECT o, \(kind), array_agg(NULLIF(k, '') ORDER BY n), array_agg(c ORDER BY n), array_agg(m ORDER BY n)
            FROM unnest(\(PostgresTextArray(decisions.map(\.orderID)))::text[], \(PostgresTextArray(decisions.map { $0.decision.activityKey ?? "" }))::text[],
                        \(PostgresTextArray(decisions.map(\.decision.code.rawValue)))::text[],
                        \(PostgresTextArray(decisions.map(\.decision.message)))::text[]) WITH ORDINALITY AS t(o, k, c, m, n)
            GROUP BY o
            ORDER BY min(n)
            """
    }
}
