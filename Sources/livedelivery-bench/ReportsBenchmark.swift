import ArgumentParser
import Foundation
import LiveDelivery
import LiveDeliveryAdmin
import Logging
import Postgres
import TestSupport

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `livedelivery-bench reports`: the admin reports at production scale. Populates N days of synthetic
/// history on the layout before sql/112 (unpartitioned), copies that database, migrates the copy to
/// the day-partitioned layout (timing the migration), then prints each report's time for the last
/// hour, day and week: the window function on the partitioned copy beside the view filtered by its
/// time column on the unpartitioned one, in the same run. Then retention of the oldest day: dropping
/// its partitions beside deleting its rows, with the WAL each writes.
struct ReportsBenchmark: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "reports",
        abstract: "Report times over a time window and retention cost, partitioned vs unpartitioned history."
    )

    @Option(help: "Days of history.")
    var days = 30

    @Option(help: "Push attempts in all (about six per activity; two timeline rows and one inbox row each).")
    var attempts = 100_000_000

    @Option(help: "Runs of each query; the median is printed.")
    var runs = 3

    @Option(
        help:
            "A scripts/services PostgreSQL, whose superuser the bench connects as (default: $LIVEDELIVERY_POSTGRES_URL)."
    )
    var url =
        ProcessInfo.processInfo.environment["LIVEDELIVERY_POSTGRES_URL"]
        ?? "postgresql://livedelivery:livedelivery@127.0.0.1:55432/livedelivery"

    @Option(help: "The migrations folder.")
    var sql = "sql"

    @Flag(help: "Keep the two databases afterwards (their names are printed).")
    var keep = false

    func validate() throws {
        guard days >= 8 else { throw ValidationError("--days must be at least 8 (a week, and a day to expire)") }
        guard attempts >= 6 * days else { throw ValidationError("--attempts must be at least 6 per day") }
    }

    func run() async throws {
        let logger = Logger(label: "livedelivery-bench")
        // The superuser's: the bench makes databases from templates and measures what only it may (CHECKPOINT).
        let admin = PostgresClient(
            configuration: try PostgresConfiguration(PostgresLogin.superuser.url(url, database: "postgres")),
            logger: logger)
        let name = "bench_reports_\(UInt32.random(in: 0...UInt32.max))"
        let flatName = name + "_flat"
        let partitionedName = name + "_days"
        say(
            "reports: \(days) days, \(attempts) push attempts, median of \(runs) runs; databases \(flatName), \(partitionedName)"
        )
        say(try await Durability.describe(admin))

        // The layout before sql/112, populated.
        try await admin.query(PostgresQuery(unsafeSQL: "CREATE DATABASE \(flatName)"))
        let flat = try client(flatName, logger: logger)
        try await Migrator(directory: sql).migrate(client: flat, logger: logger, before: 112)
        let populating = ContinuousClock.now
        let end = try await populate(flat)
        let populated = ContinuousClock.now - populating
        let sizes = try await flat.query(
            """
            SELECT (SELECT count(*) FROM push_attempts) AS attempts, (SELECT count(*) FROM timeline) AS timeline,
                   (SELECT count(*) FROM inbox) AS inbox, (SELECT count(*) FROM activities) AS activities,
                   pg_database_size(current_database()) AS bytes
            """)[0]
        let historyRows =
            try sizes.decode(Int.self, "attempts") + sizes.decode(Int.self, "timeline")
            + sizes.decode(Int.self, "inbox")
        say(
            String(
                format: "populated: %d attempts, %d timeline rows, %d inbox rows, %d activities, %.1f GB, in %.0f s",
                try sizes.decode(Int.self, "attempts"), try sizes.decode(Int.self, "timeline"),
                try sizes.decode(Int.self, "inbox"), try sizes.decode(Int.self, "activities"),
                Double(try sizes.decode(Int64.self, "bytes")) / 1e9, populated.seconds))
        await flat.shutdown()

        // The same data, migrated to day partitions (what an upgrade does).
        try await admin.query(PostgresQuery(unsafeSQL: "CREATE DATABASE \(partitionedName) TEMPLATE \(flatName)"))
        let partitioned = try client(partitionedName, logger: logger)
        let migrating = ContinuousClock.now
        let applied = try await Migrator(directory: sql).migrate(client: partitioned, logger: logger)
        let migrated = (ContinuousClock.now - migrating).seconds
        say(
            String(
                format: "migration %@: %.1f s for %d history rows (%.2f s per million)",
                applied.joined(separator: ", "), migrated, historyRows, migrated / Double(historyRows) * 1e6))
        // The workers' retention rounds roll up each closed hour once; a first run catches up on all.
        let rolling = ContinuousClock.now
        let hours = try await partitioned.query("SELECT report_rollup_push_outcomes(now(), 100000) AS hours")[0]
            .decode(Int.self, "hours")
        let rolled = (ContinuousClock.now - rolling).seconds
        say(
            String(
                format: "push outcomes rollup: %d hours in %.1f s (%.0f ms per hour, once per hour per deployment)",
                hours, rolled, rolled / Double(max(hours, 1)) * 1000))
        try await partitioned.query("ANALYZE report_push_outcomes_rollup")
        let flatClient = try client(flatName, logger: logger)
        try await flatClient.query("ANALYZE")

        say("")
        say("report (window ending at the newest row)   layout        last hour    last day   last week")
        let windows: [(String, TimeInterval)] = [("hour", 3600), ("day", 86_400), ("week", 7 * 86_400)]
        var worst: [String: Double] = [:]
        for report in Report.all where report.hasWindowFunction {
            var lines: [(String, [Double])] = [("day partitions", []), ("unpartitioned", [])]
            for (_, window) in windows {
                let since = end.addingTimeInterval(-window)
                // Every row as text, as a client reads it: a count alone would let the planner skip the
                // view's joins whose columns it does not need.
                let function = PostgresQuery(
                    unsafeSQL: "SELECT sum(length(r::text)) FROM \(report.view)($1, $2) AS r",
                    binds: bindings(since, end))
                lines[0].1.append(try await median { try await partitioned.query(function) })
                let view = PostgresQuery(unsafeSQL: Self.viewQuery(report), binds: bindings(since, end))
                lines[1].1.append(try await median { try await flatClient.query(view) })
            }
            for (index, (layout, times)) in lines.enumerated() {
                let label = index == 0 ? report.name : ""
                say(
                    label.padding(toLength: 43, withPad: " ", startingAt: 0)
                        + layout.padding(toLength: 14, withPad: " ", startingAt: 0)
                        + times.map { String(format: "%9.1f ms", $0 * 1000) }.joined(separator: "  "))
            }
            worst["day", default: 0] = max(worst["day", default: 0], lines[0].1[1])
            worst["week", default: 0] = max(worst["week", default: 0], lines[0].1[2])
        }
        say(
            String(
                format: "slowest on day partitions: last day %.1f ms (aim ≤ 100 ms), last week %.1f ms (aim ≤ 500 ms)",
                worst["day"]! * 1000, worst["week"]! * 1000))

        // Retention of the oldest day: drop its partitions, or delete its rows. Right after a checkpoint
        // every page first touched writes its full image (the catalog's, for a drop): the worst case.
        // The second day is dropped without a checkpoint between.
        say("")
        for (step, checkpoint) in [(1, true), (2, false)] {
            let drop = try await measureWAL(partitioned, checkpoint: checkpoint) {
                try await partitioned.withTransaction { connection in
                    try await connection.query("SET LOCAL lock_timeout = '2s'")
                    let rows = try await connection.query(
                        """
                        SELECT sum(cardinality(partitions_dropped))::bigint AS dropped,
                               sum(default_rows_deleted)::bigint AS deleted
                        FROM history_partitions_drop_expired(\(end)::timestamptz, \(days - step)::integer)
                        """)
                    return "\(try rows[0].decode(Int.self, "dropped")) partitions dropped, "
                        + "\(try rows[0].decode(Int.self, "deleted")) default rows deleted"
                }
            }
            say(
                String(
                    format: "retention of day %d, day partitions%@: %.3f s, %.1f kB WAL (%@) (aim ≤ 1 s, a few kB)",
                    step, checkpoint ? " (after a checkpoint)" : "", drop.seconds, Double(drop.wal) / 1e3, drop.result))
        }
        let cutoffDays = days - 1
        let delete = try await measureWAL(flatClient) {
            try await flatClient.withTransaction { connection in
                var deleted = 0
                for (table, column) in [
                    ("push_attempts", "attempted_at"), ("timeline", "at"), ("inbox", "processed_at"),
                ] {
                    let cutoff = end.addingTimeInterval(-Double(cutoffDays) * 86_400)
                    deleted += try await connection.query(
                        PostgresQuery(unsafeSQL: "DELETE FROM \(table) WHERE \(column) < $1", binds: bindings(cutoff))
                    ).affectedRows
                }
                return "\(deleted) rows deleted"
            }
        }
        say(
            String(
                format: "retention of day 1, unpartitioned (after a checkpoint): %.3f s, %.1f kB WAL (%@)",
                delete.seconds, Double(delete.wal) / 1e3, delete.result))

        await flatClient.shutdown()
        await partitioned.shutdown()
        if !keep {
            for database in [flatName, partitionedName] {
                try await admin.query(PostgresQuery(unsafeSQL: "DROP DATABASE IF EXISTS \(database) WITH (FORCE)"))
            }
        }
        await admin.shutdown()
    }

    /// The same window on the view, as an admin would filter it (the view's time column).
    static func viewQuery(_ report: Report) -> String {
        switch report.name {
        case "duplicate-starts":
            // The view has no time: a dashboard can only read all of it.
            return """
                SELECT sum(length(r::text)) FROM \(report.view) AS r
                WHERE $1::timestamptz IS NOT NULL AND $2::timestamptz IS NOT NULL
                """
        case "alerts-per-activity":
            return "SELECT sum(length(r::text)) FROM \(report.view) AS r WHERE updated_at >= $1 AND updated_at < $2"
        default:
            let column = report.timeColumn ?? "at"
            return "SELECT sum(length(r::text)) FROM \(report.view) AS r WHERE \(column) >= $1 AND \(column) < $2"
        }
    }

    func bindings(_ dates: Date...) -> PostgresBindings {
        var bindings = PostgresBindings()
        for date in dates { bindings.append(date) }
        return bindings
    }

    func client(_ database: String, logger: Logger) throws -> PostgresClient {
        var configuration = try PostgresConfiguration(PostgresLogin.superuser.url(url, database: database))
        configuration.poolSize = 2
        configuration.applicationName = "livedelivery-bench"
        return PostgresClient(configuration: configuration, logger: logger)
    }

    func median(_ body: () async throws -> some Any) async throws -> Double {
        var times: [Double] = []
        for _ in 0..<runs {
            let start = ContinuousClock.now
            _ = try await body()
            times.append((ContinuousClock.now - start).seconds)
        }
        return times.sorted()[times.count / 2]
    }

    func measureWAL<Result>(
        _ client: PostgresClient, checkpoint: Bool = true, _ body: () async throws -> Result
    )
        async throws -> (seconds: Double, wal: Int, result: Result)
    {
        if checkpoint { try await client.query("CHECKPOINT") }
        let before = try await client.query("SELECT pg_current_wal_insert_lsn()::text AS lsn")[0].decode(
            String.self, "lsn")
        let start = ContinuousClock.now
        let result = try await body()
        let seconds = (ContinuousClock.now - start).seconds
        let wal = try await client.query(
            "SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), \(before)::pg_lsn)::bigint AS bytes")[0]
            .decode(Int.self, "bytes")
        return (seconds, wal, result)
    }

    /// Synthetic history ending now, evenly over `days`: per activity six attempts (start, four
    /// updates, end; 95 % delivered, 3 % retried, 1 % token gone, 0.5 % payload faults), each with a
    /// timeline row for its event and one for its outcome, and an inbox row; one activity in 200 swept. In chunks of a
    /// million attempts, each its own transaction. Returns the end of the history.
    func populate(_ client: PostgresClient) async throws -> Date {
        let end = Date()
        let span = Double(days) * 86_400
        let chunk = 1_000_000
        var lo = 0
        let started = ContinuousClock.now
        while lo < attempts {
            let hi = min(lo + chunk, attempts)
            // A whole number of activities per chunk, so that each activity is written once.
            let upper = hi == attempts ? hi : hi - hi % 6
            let statements = Self.populateSQL(lo: lo, hi: upper, total: attempts, end: end, span: span)
            try await client.withConnection { connection in
                // One simple query: one implicit transaction.
                try await connection.execute(unsafeSQL: statements)
            }
            lo = upper
            if isatty(2) != 0 {
                let rate = Double(lo) / (ContinuousClock.now - started).seconds
                FileHandle.standardError.write(
                    Data(String(format: "\rpopulating: %d of %d attempts (%.0f/s) ", lo, attempts, rate).utf8))
            }
        }
        if isatty(2) != 0 { FileHandle.standardError.write(Data("\n".utf8)) }
        try await client.query("SELECT setval('push_attempts_id_seq', \(attempts))")
        try await client.query("ANALYZE")
        return end
    }

    static func populateSQL(lo: Int, hi: Int, total: Int, end: Date, span: Double) -> String {
        let endText = ISO8601DateFormatter().string(from: end)
        let series = """
            SELECT i, (i * 7919) % 1000 AS r, i / 6 AS a,
                   '\(endText)'::timestamptz - make_interval(secs => \(span)) + make_interval(secs => i::float8 / \(total) * \(span)) AS t
            FROM generate_series(\(lo)::bigint, \(hi - 1)::bigint) AS i
            """
        return """
            INSERT INTO orders (order_id, user_id, status, terminal, settled, created_at, updated_at)
            SELECT 'o-' || a, 'u-' || (a % 100000), 'delivered', true, true, t, t FROM (\(series)) AS g WHERE i % 6 = 0;
            INSERT INTO activities (order_id, activity_key, bundle_id, environment, state, end_reason, alert_count,
                                    started_at, ended_at, created_at, updated_at)
            SELECT 'o-' || a, 'device:d' || a, 'com.example.app' || (a % 3), 'production', 'ended', 'delivered', 1,
                   t + interval '1 second', t + interval '40 minutes', t, t + interval '40 minutes'
            FROM (\(series)) AS g WHERE i % 6 = 0;
            INSERT INTO push_attempts (id, order_id, activity_key, kind, bundle_id, priority, generation, apns_id, status,
                                       outcome, reason, latency_ms, worker_id, attempted_at)
            SELECT i + 1, 'o-' || a, 'device:d' || a,
                   CASE i % 6 WHEN 0 THEN 'start' WHEN 5 THEN 'end' ELSE 'update' END,
                   'com.example.app' || (a % 3), CASE WHEN i % 3 = 0 THEN 10 ELSE 5 END, 1, md5(i::text)::uuid,
                   CASE WHEN r < 950 THEN 200 WHEN r < 980 THEN 429 WHEN r < 990 THEN 410 WHEN r < 995 THEN 413 END,
                   CASE WHEN r < 950 THEN 'delivered' WHEN r < 980 THEN 'retry' WHEN r < 990 THEN 'token_gone'
                        WHEN r < 995 THEN 'payload_fault' ELSE 'retry' END,
                   CASE WHEN r < 950 THEN NULL WHEN r < 980 THEN 'TooManyRequests' WHEN r < 990 THEN 'Unregistered'
                        WHEN r < 995 THEN 'PayloadTooLarge' END,
                   5 + (i % 97) * 0.3, 'bench', t
            FROM (\(series)) AS g;
            INSERT INTO timeline (order_id, at, kind, activity_keys, codes, messages)
            SELECT 'o-' || a, t, k.kind, ARRAY['device:d' || a], ARRAY[k.code], ARRAY[k.code]
            FROM (\(series)) AS g
            CROSS JOIN LATERAL (VALUES
                ('event', 'update_planned'),
                ('outcome', CASE WHEN r < 950 THEN 'push_accepted' WHEN r < 980 THEN 'push_retry'
                                 WHEN r < 990 THEN 'token_gone' WHEN r < 995 THEN 'push_dropped' ELSE 'push_retry' END)
            ) AS k(kind, code);
            INSERT INTO timeline (order_id, at, kind, activity_keys, codes, messages)
            SELECT 'o-' || a, t, 'sweep', ARRAY['device:d' || a, 'device:d' || a], '{sweep_lifetime,end_planned}',
                   '{sweep_lifetime,end_planned}'
            FROM (\(series)) AS g
            WHERE i % 1200 = 5;
            INSERT INTO inbox (event_id, event_type, order_id, user_id, occurred_at, processed_at)
            SELECT 'e-' || i, 'order.status', 'o-' || a, 'u-' || (a % 100000), t, t FROM (\(series)) AS g
            """
    }
}

/// A line to standard output at once (print buffers when the output is a file; this run is long).
private func say(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}
