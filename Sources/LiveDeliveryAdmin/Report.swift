import Foundation
import LiveDelivery

/// One admin report: a `report_` view of sql/090_reports.sql and how `livedelivery report` queries it.
package struct Report: Sendable, Hashable {
    /// The name on the command line (`activities-by-state`).
    package let name: String
    /// The view (`report_activities_by_state`).
    package let view: String
    /// One line for the list of reports.
    package let summary: String
    /// The column `--since` filters on (`>=`); nil when the report is a snapshot without time.
    package let timeColumn: String?
    /// Whether sql/113 has a function of the view's name taking (since, until) that reads only that
    /// window: `livedelivery report` calls it, with the last 24 hours unless told otherwise.
    package let hasWindowFunction: Bool
    /// Whether the view has an `order_id` column that `--order` filters on.
    package let hasOrderColumn: Bool
    /// The `ORDER BY` of the printed table (a fixed clause of this catalogue, never user input).
    let orderBy: String
    /// Columns used only for sorting, left out of the printed table.
    let hiddenColumns: [String]

    init(
        _ name: String, summary: String, timeColumn: String?, hasOrderColumn: Bool, orderBy: String,
        hiddenColumns: [String] = [], windowFunction: Bool = false
    ) {
        self.hasWindowFunction = windowFunction
        self.name = name
        self.view = "report_" + name.replacingOccurrences(of: "-", with: "_")
        self.summary = summary
        self.timeColumn = timeColumn
        self.hasOrderColumn = hasOrderColumn
        self.orderBy = orderBy
        self.hiddenColumns = hiddenColumns
    }

    /// Every report, in the order `livedelivery report` lists them.
    package static let all: [Report] = [
        Report(
            "activities-by-state", summary: "live activities by state and app (snapshot)", timeColumn: nil,
            hasOrderColumn: false, orderBy: "live DESC, app, environment, state"),
        Report(
            "order-timeline", summary: "one order's events, decisions, pushes and outcomes (use --order ID)",
            timeColumn: "at", hasOrderColumn: true, orderBy: "order_id, at, rank, sort_id",
            hiddenColumns: ["rank", "sort_id"]),
        Report(
            "push-outcomes-hourly", summary: "push outcomes and APNs reasons by hour and app, with latency",
            timeColumn: "hour", hasOrderColumn: false, orderBy: "hour DESC, app, attempts DESC", windowFunction: true),
        Report(
            "alerts-per-activity", summary: "alerts planned, held back and high-priority pushes per activity",
            timeColumn: "created_at", hasOrderColumn: true, orderBy: "alerts_planned DESC, updated_at DESC",
            windowFunction: true),
        Report(
            "activity-timings", summary: "time to start, to first update and to end, per activity (seconds)",
            timeColumn: "created_at", hasOrderColumn: true, orderBy: "created_at DESC, order_id, activity_key",
            windowFunction: true),
        Report(
            "activity-timings-by-app", summary: "median and p95 time to first update and to end, per day and app",
            timeColumn: "day", hasOrderColumn: false, orderBy: "day DESC, app", windowFunction: true),
        Report(
            "sweeper-actions", summary: "what the sweeper did, by day, app and reason", timeColumn: "day",
            hasOrderColumn: false, orderBy: "day DESC, app, actions DESC", windowFunction: true),
        Report(
            "dead-letters", summary: "dead-lettered messages, newest first (no bodies)", timeColumn: "received_at",
            hasOrderColumn: false, orderBy: "id DESC"),
        Report(
            "dead-letters-by-reason", summary: "dead-lettered messages by reason and routing key (snapshot)",
            timeColumn: nil, hasOrderColumn: false, orderBy: "messages DESC, reason, routing_key"),
        Report(
            "failed-pushes", summary: "pushes given up for good (payload fault, token gone, retries exhausted)",
            timeColumn: "attempted_at", hasOrderColumn: true, orderBy: "id DESC", windowFunction: true),
        Report(
            "duplicate-starts", summary: "start pushes accepted more than once for one activity, per app",
            timeColumn: "attempted_at", hasOrderColumn: false, orderBy: "app", windowFunction: true),
        Report(
            "people-by-setting", summary: "people and devices by their Live Activity settings (snapshot)",
            timeColumn: nil, hasOrderColumn: false, orderBy: "activities_enabled DESC, frequent_pushes_enabled DESC"),
        Report(
            "broadcast-channels",
            summary: "broadcast channels of orders several people follow, by app and phase (snapshot)",
            timeColumn: nil, hasOrderColumn: false, orderBy: "bundle_id, environment, phase"),
    ]

    /// The report called `name`: `order-timeline`, `order_timeline` or `report_order_timeline`.
    package static func named(_ name: String) -> Report? {
        var key = name.lowercased().replacingOccurrences(of: "_", with: "-")
        if key.hasPrefix("report-") { key.removeFirst("report-".count) }
        return all.first { $0.name == key }
    }
}
