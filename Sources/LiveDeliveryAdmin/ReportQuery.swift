package import Foundation
import LiveDelivery
import LiveDeliveryCore
import LiveDeliveryTime
package import Postgres

/// The filters of `livedelivery report NAME [--order ID] [--since …] [--limit N]`.
package struct ReportQuery: Sendable, Hashable {
    /// Only rows of this order (reports with an `order_id` column).
    package var orderID: String?
    /// Only rows whose time is at or after this moment. A report with a window function reads
    /// the last ``defaultWindow`` when nil; a view reads all its rows.
    package var since: Date?
    /// Only rows whose time is before this moment (nil: no end).
    package var until: Date?
    /// At most this many rows (nil: all).
    package var limit: Int?

    /// The window of a report over history when `--since` is not given: the last 24 hours.
    package static let defaultWindow: TimeInterval = 86_400

    package init(orderID: String? = nil, since: Date? = nil, until: Date? = nil, limit: Int? = 100) {
        self.orderID = orderID
        self.since = since
        self.until = until
        self.limit = limit
    }

    /// `--since`: an age (`90s`, `30m`, `24h`, `7d`, `2w`) counted back from `now`, or an RFC 3339
    /// timestamp (`2026-11-21T10:00:00Z`). Nil when it is neither.
    package static func parseSince(_ text: String, now: Date = Date()) -> Date? {
        if let age = parseAge(text) { return now.addingTimeInterval(-age) }
        return RFC3339.parse(text)
    }

    /// An age in seconds: a positive number followed by s, m, h, d or w (`30d`). Nil otherwise.
    package static func parseAge(_ text: String) -> TimeInterval? {
        guard let unit = text.last, let value = Double(text.dropLast()), value > 0, value.isFinite else { return nil }
        let seconds: Double
        switch unit {
        case "s": seconds = 1
        case "m": seconds = 60
        case "h": seconds = 3600
        case "d": seconds = 86_400
        case "w": seconds = 604_800
        default: return nil
        }
        return value * seconds
    }

    /// The statement: the report's window function (sql/113) or its view, filtered and ordered.
    /// Only the view, column and order names of the fixed catalogue (``Report/all``) are spliced in;
    /// the values are parameters.
    func statement(for report: Report, now: Date = Date()) throws(LiveDeliveryError) -> PostgresQuery {
        var bindings = PostgresBindings()
        var conditions: [String] = []
        var source = report.view
        if report.hasWindowFunction {
            bindings.append(since ?? now.addingTimeInterval(-Self.defaultWindow))
            bindings.append(until)
            source = "\(report.view)($1, coalesce($2::timestamptz, 'infinity'))"
        }
        if let orderID {
            guard report.hasOrderColumn else {
                throw LiveDeliveryError(.invalidConfiguration, "report \(report.name) has no order_id column (--order)")
            }
            bindings.append(orderID)
            conditions.append("order_id = $\(bindings.count)")
        }
        if !report.hasWindowFunction && (since != nil || until != nil) {
            guard let column = report.timeColumn else {
                throw LiveDeliveryError(
                    .invalidConfiguration, "report \(report.name) is a snapshot without time (--since, --until)")
            }
            if let since {
                bindings.append(since)
                conditions.append("\(column) >= $\(bindings.count)")
            }
            if let until {
                bindings.append(until)
                conditions.append("\(column) < $\(bindings.count)")
            }
        }
        var sql = "SELECT * FROM \(source)"
        if !conditions.isEmpty { sql += " WHERE " + conditions.joined(separator: " AND ") }
        sql += " ORDER BY \(report.orderBy)"
        if let limit {
            guard limit > 0 else { throw LiveDeliveryError(.invalidConfiguration, "--limit must be at least 1") }
            bindings.append(limit)
            sql += " LIMIT $\(bindings.count)"
        }
        return PostgresQuery(unsafeSQL: sql, binds: bindings)
    }
}

extension Report {
    /// Runs the report on `client` (any role that may read the view, e.g. livedelivery_reporting).
    package func run(_ query: ReportQuery, client: PostgresClient) async throws -> ReportTable {
        let statement = try query.statement(for: self)
        return ReportTable(try await client.query(statement), hiding: hiddenColumns)
    }
}
