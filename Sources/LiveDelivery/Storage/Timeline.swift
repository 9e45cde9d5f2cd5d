import LiveDeliveryCore
import Postgres

/// The `timeline` table: each order's decisions, in order, for `report order-timeline` and the
/// reports over sweeps and alerts. One row per write of an order (`sql/115`), its decisions in three
/// arrays of the same length; `timeline_decisions` is the view of one row per decision.
enum Timeline {
    /// The decisions of a write, one array per column of the statement's `unnest`, in order.
    struct Rows {
        var orderIDs: [String] = []
        var activityKeys: [String] = []
        var codes: [String] = []
        var messages: [String] = []
        /// The `apns-id`s handed over without an outbox row, and their orders (`sql/126`): the order's row lists
        /// them.
        var handedOrderIDs: [String] = []
        var handedIDs: [String] = []

        /// Room for `count` decisions in every column.
        init(capacity count: Int) {
            orderIDs.reserveCapacity(count)
            activityKeys.reserveCapacity(count)
            codes.reserveCapacity(count)
            messages.reserveCapacity(count)
        }

        /// Appends an order's decisions; each order is appended once per write.
        mutating func append(orderID: String, _ decisions: [Decision]) {
            for decision in decisions {
                orderIDs.append(orderID)
                activityKeys.append(decision.activityKey ?? "")
                codes.append(decision.code.rawValue)
                messages.append(decision.message)
            }
        }

        /// Room for `count` pushes handed over.
        mutating func reserveHanded(_ count: Int) {
            handedOrderIDs.reserveCapacity(count)
            handedIDs.reserveCapacity(count)
        }

        /// Appends a push the write hands over without an outbox row.
        mutating func appendHanded(orderID: String, apnsID: String) {
            handedOrderIDs.append(orderID)
            handedIDs.append(apnsID)
        }
    }

    /// Inserts the decisions of a write, one row per order holding that order's decisions in order, as
    /// `kind` (`event`, `outcome`, `sweep`), with the pushes it handed over without an outbox row; nil when
    /// there is none.
    static func insertQuery(_ rows: Rows, kind: String) -> PostgresQuery? {
        if rows.handedIDs.isEmpty {
            guard !rows.orderIDs.isEmpty else { return nil }
            return """
                INSERT INTO timeline (order_id, kind, activity_keys, codes, messages)
                SELECT o, \(kind), array_agg(NULLIF(k, '') ORDER BY n), array_agg(c ORDER BY n), array_agg(m ORDER BY n)
                FROM unnest(\(PostgresTextArray(rows.orderIDs))::text[], \(PostgresTextArray(rows.activityKeys))::text[],
                            \(PostgresTextArray(rows.codes))::text[],
                            \(PostgresTextArray(rows.messages))::text[]) WITH ORDINALITY AS t(o, k, c, m, n)
                GROUP BY o
                ORDER BY min(n)
                """
        }
        // Only an order with decisions hands pushes over (a row holds at least one decision). A push the outbox
        // statement, earlier in the same pipeline, wrote a row for after all (its app paused, or its activity's row
        // there) was not handed over: the row lists only those that have none.
        return """
            INSERT INTO timeline (order_id, kind, activity_keys, codes, messages, handed)
            SELECT d.o, \(kind), d.k, d.c, d.m, h.ids
            FROM (SELECT o, array_agg(NULLIF(k, '') ORDER BY n) AS k, array_agg(c ORDER BY n) AS c,
                         array_agg(m ORDER BY n) AS m, min(n) AS n
                  FROM unnest(\(PostgresTextArray(rows.orderIDs))::text[], \(PostgresTextArray(rows.activityKeys))::text[],
                              \(PostgresTextArray(rows.codes))::text[],
                              \(PostgresTextArray(rows.messages))::text[]) WITH ORDINALITY AS t(o, k, c, m, n)
                  GROUP BY o) AS d
            LEFT JOIN (SELECT o, array_agg(i::uuid) AS ids
                       FROM unnest(\(PostgresTextArray(rows.handedOrderIDs))::text[], \(PostgresTextArray(rows.handedIDs))::text[])
                           AS t(o, i)
                       WHERE NOT EXISTS (SELECT 1 FROM outbox AS x WHERE x.order_id = t.o AND x.apns_id = t.i::uuid)
                       GROUP BY o) AS h ON h.o = d.o
            ORDER BY d.n
            """
    }
}
