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

/// `livedelivery-bench reports`: the admin reports at production scale, at two sizes of history on the same
/// machine and settings, so that growth shows. For each size: a fresh database migrated to the current schema,
/// synthetic history in day partitions (the first size over `days`; a larger one at the same attempts per day
/// over more days, unless `denser`), the rollups caught up as the workers' retention rounds keep
/// them, in rounds bounded by rows (timed), a day of the rounds run once caught up, then each report over the
/// last hour, day and week (the window function, median of `runs`), and retention of the oldest day (its
/// partitions dropped, with the WAL written).
struct ReportsBenchmark: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "reports",
        abstract: "Report times over the last hour, day and week, at two sizes of history."
    )

    @Option(help: "Days of history of the first size; a larger size keeps its attempts per day and spans more days.")
    var days = 30

    @Flag(help: "Every size over --days: a larger size packs more attempts into each day.")
    var denser = false

    @Option(
        name: .customLong("attempts"),
        help:
            "Push attempts in all, once per size (about six per activity; two timeline rows and one inbox row each; about 1.06 GB per million)."
    )
    var sizes: [Int] = [10_000_000, 30_000_000]

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

    @Flag(help: "Keep the databases afterwards (their names are printed).")
    var keep = false

    @Option(
        help:
            "Measure a database this bench made and kept (migrated first; its oldest day is not dropped) instead of making one per size; repeat for several, smallest first."
    )
    var database: [String] = []

    @Flag(help: "With --database: empty its rollups first, so that they catch up from nothing as after an upgrade.")
    var rollUpAgain = false

    func validate() throws {
        guard days >= 8 else { throw ValidationError("--days must be at least 8 (a week, and a day to expire)") }
        guard !sizes.isEmpty, sizes.allSatisfy({ $0 >= 6 * days(for: $0) }) else {
            throw ValidationError("--attempts must be at least 6 per day")
        }
    }

    /// The days a size's history spans: `days` for the first size; a larger one over more days at the same
    /// attempts per day, so that a window of the last day or week holds the same rows at every size and only the
    /// history behind it grows.
    func days(for attempts: Int) -> Int {
        guard !denser, let first = sizes.first else { return days }
        return max(days, Int((Double(days) * Double(attempts) / Double(first)).rounded()))
    }

    /// One size's figures: per report, the last hour, day and week in seconds.
    struct Figures {
        var attempts: Int
        /// The size in millions of attempts, rounded (a kept history has lost its oldest day).
        var millions: Int { Int((Double(attempts) / 1e6).rounded()) }
        var times: [(report: String, seconds: [Double])] = []
    }

    /// The reports of one row per activity or per push given up: the rollup table holding their rows, the
    /// report's row from it, and the column the window applies to.
    static let rowsAlone: [String: (table: String, row: String, time: String)] = [
        "activity-timings": ("report_activity_timings_rollup", "r::text", "created_at"),
        "alerts-per-activity": (
            "report_alerts_per_activity_rollup",
            "(r.order_id, r.activity_key, r.app, r.state, r.alert_count, r.alerts_planned, r.eta_slip_alerts, "
                + "r.alerts_held_back, r.budget_downgrades, r.pushes_delivered, r.high_priority_delivered, "
                + "r.first_alert_at, r.last_alert_at, r.updated_at)::text", "created_at"
        ),
        "failed-pushes": ("report_failed_pushes_rollup", "r::text", "attempted_at"),
    ]

    static let windows: [(String, TimeInterval)] = [("hour", 3600), ("day", 86_400), ("week", 7 * 86_400)]

    func run() async throws {
        let logger = Logger(label: "livedelivery-bench")
        // The superuser's: the bench makes databases and measures what only it may (CHECKPOINT).
        let admin = PostgresClient(
            configuration: try PostgresConfiguration(PostgresLogin.superuser.url(url, database: "postgres")),
            logger: logger)
        say(
            "reports: "
                + (!database.isEmpty
                    ? "databases \(database.joined(separator: ", "))"
                    : "sizes \(sizes.map { "\($0) attempts over \(days(for: $0)) days" }.joined(separator: ", "))")
                + ", median of \(runs) runs")
        say(try await Durability.describe(admin))
        var all: [Figures] = []
        if !database.isEmpty {
            for name in database {
                all.append(try await measure(existing: name, admin: admin, logger: logger))
            }
        } else {
            for attempts in sizes {
                all.append(try await measure(attempts: attempts, admin: admin, logger: logger))
            }
        }
        await admin.shutdown()

        say("")
        say(
            "report                      "
                + all.map {
                    "\($0.millions)M: hour / day / week (ms)".padding(
                        toLength: 36, withPad: " ", startingAt: 0)
                }.joined() + (all.count > 1 ? "growth day / week" : ""))
        for (index, line) in all[0].times.enumerated() {
            var text = line.report.padding(toLength: 28, withPad: " ", startingAt: 0)
            for figures in all {
                let seconds = figures.times[index].seconds
                text += seconds.map { String(format: "%.1f", $0 * 1000) }.joined(separator: " / ")
                    .padding(toLength: 36, withPad: " ", startingAt: 0)
            }
            if let last = all.last, all.count > 1 {
                let first = all[0].times[index].seconds
                let grown = last.times[index].seconds
                text += String(format: "%.2f× / %.2f×", grown[1] / first[1], grown[2] / first[2])
            }
            say(text)
        }
        for figures in all {
            let day = figures.times.map { $0.seconds[1] }.max() ?? 0
            let week = figures.times.map { $0.seconds[2] }.max() ?? 0
            say(
                String(
                    format: "%dM attempts: slowest last day %.1f ms (aim ≤ 50 ms), last week %.1f ms (aim ≤ 200 ms)",
                    figures.millions, day * 1000, week * 1000))
        }
    }

    func measure(attempts: Int, admin: PostgresClient, logger: Logger) async throws -> Figures {
        let name = "bench_reports_\(Figures(attempts: attempts).millions)m_\(UInt32.random(in: 0...UInt32.max))"
        let days = days(for: attempts)
        say("")
        say("\(attempts) attempts over \(days) days: database \(name)")
        try await admin.query(PostgresQuery(unsafeSQL: "CREATE DATABASE \(name)"))
        let database = try client(name, logger: logger)
        var quiet = logger
        quiet.logLevel = .warning
        try await Migrator(directory: sql).migrate(client: database, logger: quiet)
        try await database.query(
            "SELECT count(*) FROM history_partitions_create((now() - make_interval(days => \(days + 1)::integer))::date, now()::date + 2)"
        )
        let populating = ContinuousClock.now
        let end = try await populate(database, attempts: attempts, days: days)
        let populated = ContinuousClock.now - populating
        say(String(format: "populated in %.0f s", populated.seconds))
        return try await measure(
            database, name: name, attempts: attempts, end: end, admin: admin, dropsADay: true, days: days)
    }

    /// A database made and kept by an earlier run: migrated to the current schema, its history ends at its newest
    /// attempt, and it is kept whole.
    func measure(existing name: String, admin: PostgresClient, logger: Logger) async throws -> Figures {
        say("")
        say("database \(name), made by an earlier run")
        let database = try client(name, logger: logger)
        var quiet = logger
        quiet.logLevel = .warning
        let migrating = ContinuousClock.now
        let applied = try await Migrator(directory: sql).migrate(client: database, logger: quiet)
        say(
            String(
                format: "migrated (%@) in %.1f s",
                applied.isEmpty ? "nothing to apply" : applied.joined(separator: ", "),
                (ContinuousClock.now - migrating).seconds))
        if rollUpAgain {
            try await database.query(
                """
                TRUNCATE report_rollups, report_push_outcomes_rollup, report_activity_timings_rollup,
                         report_alerts_per_activity_rollup, report_failed_pushes_rollup,
                         report_activity_timings_by_app_rollup, report_duplicate_starts_rollup,
                         report_repeat_starts_rollup, report_activities_pending, report_activity_partials,
                         report_failed_pushes_staged
                """)
            say("rollups emptied: they catch up from nothing")
        }
        let newest = try await database.query("SELECT max(attempted_at) AS end, count(*) AS n FROM push_attempts")[0]
        return try await measure(
            database, name: name, attempts: try newest.decode(Int.self, "n"), end: try newest.decode(Date.self, "end"),
            admin: admin, dropsADay: false, days: days)
    }

    func measure(
        _ database: PostgresClient, name: String, attempts: Int, end: Date, admin: PostgresClient, dropsADay: Bool,
        days: Int
    ) async throws -> Figures {
        let sizes = try await database.query(
            """
            SELECT (SELECT count(*) FROM push_attempts) AS attempts, (SELECT count(*) FROM timeline) AS timeline,
                   (SELECT count(*) FROM inbox) AS inbox, (SELECT count(*) FROM activities) AS activities,
                   pg_database_size(current_database()) AS bytes
            """)[0]
        say(
            String(
                format: "history: %d attempts, %d timeline rows, %d inbox rows, %d activities, %.1f GB",
                try sizes.decode(Int.self, "attempts"), try sizes.decode(Int.self, "timeline"),
                try sizes.decode(Int.self, "inbox"), try sizes.decode(Int.self, "activities"),
                Double(try sizes.decode(Int64.self, "bytes")) / 1e9))

        // What the workers' retention rounds keep, caught up from where it stands (from nothing, as after an
        // upgrade) in the rounds the workers ask for (`report_rollup_activities(now(), 48)` through the outcomes
        // rollup): each bounded by rows (sql/125: about 100,000 attempts or 20,000 activities); first the slices
        // of attempts and timeline, then the activities (every one already final rolled up, the live ones
        // pending). Then the push outcomes' closed hours, in the same bounded rounds.
        var rounds: [Round] = []
        var before = try await Self.bounds(database)
        while true {
            let rolling = ContinuousClock.now
            let activities = try await database.query(
                "SELECT report_rollup_activities(now(), 48) AS activities")[0].decode(Int.self, "activities")
            let seconds = (ContinuousClock.now - rolling).seconds
            let after = try await Self.bounds(database)
            // The first round sets the bounds from nothing (epoch before it): it counts as a round of slices.
            let first = before.activities == Date(timeIntervalSince1970: 0)
            rounds.append(
                Round(
                    activities: activities, seconds: seconds,
                    sliceHours: after.attempts.timeIntervalSince(first ? after.activities : before.attempts) / 3600,
                    activityHours: first ? 0 : after.activities.timeIntervalSince(before.activities) / 3600))
            before = after
            if after.activities >= Date().addingTimeInterval(-360) { break }
        }
        let pending = try await database.query("SELECT count(*) AS n FROM report_activities_pending")[0]
            .decode(Int.self, "n")
        let slicing = rounds.filter { $0.activityHours == 0 }
        let rolling = rounds.filter { $0.activityHours > 0 }
        say(
            String(
                format:
                    "activity reports rollup, caught up: %d rounds, %.1f s, %d activities rolled up, %d pending (live); %d rounds of slices %.1f s (slowest %.0f ms), %d rounds of activities %.1f s (slowest %.0f ms, %d activities)",
                rounds.count, rounds.map(\.seconds).reduce(0, +), rounds.map(\.activities).reduce(0, +), pending,
                slicing.count, slicing.map(\.seconds).reduce(0, +), (slicing.map(\.seconds).max() ?? 0) * 1000,
                rolling.count, rolling.map(\.seconds).reduce(0, +), (rolling.map(\.seconds).max() ?? 0) * 1000,
                rolling.max { $0.seconds < $1.seconds }?.activities ?? 0))
        for (index, round) in rounds.enumerated() {
            say(
                String(
                    format: "  round %d: slice %.2f h, activities %.2f h (%d rolled up), %.0f ms", index + 1,
                    round.sliceHours, round.activityHours, round.activities, round.seconds * 1000))
        }
        var outcomeHours = 0
        var outcomeRounds: [Double] = []
        while true {
            let outcomesRolling = ContinuousClock.now
            let hours = try await database.query("SELECT report_rollup_push_outcomes(now(), 48) AS hours")[0]
                .decode(Int.self, "hours")
            outcomeRounds.append((ContinuousClock.now - outcomesRolling).seconds)
            outcomeHours += hours
            if hours == 0 { break }
        }
        let outcomesRolled = outcomeRounds.reduce(0, +)
        say(
            String(
                format: "push outcomes rollup: %d hours in %d rounds, %.1f s (%.0f ms per hour; slowest round %.0f ms)",
                outcomeHours, outcomeRounds.count, outcomesRolled,
                outcomesRolled / Double(max(outcomeHours, 1)) * 1000, (outcomeRounds.max() ?? 0) * 1000))
        // As the workers run them (every five minutes), and in hourly rounds: what fewer, longer rounds would save.
        for minutes in [5, 60] {
            let steady = try await steadyDay(database, end: end, minutes: minutes)
            say(
                String(
                    format:
                        "a day of %d-minute rounds once caught up (the newest whole day replayed, rolled back): slices %.0f ms + %d activities %.0f ms = %.0f ms (aim ≤ 1 s)",
                    minutes, steady.slices * 1000, steady.rolled, steady.activities * 1000,
                    (steady.slices + steady.activities) * 1000))
        }
        try await database.query("VACUUM ANALYZE")

        var figures = Figures(attempts: attempts)
        say("report (window ending at the newest row)     last hour    last day   last week")
        for report in Report.all where report.hasWindowFunction {
            var times: [Double] = []
            var rows: [Int] = []
            for (_, window) in Self.windows {
                // Every row as text, as a client reads it: a count alone would let the planner skip the
                // joins whose columns it does not need.
                let function = PostgresQuery(
                    unsafeSQL: "SELECT count(*) AS n, sum(length(r::text)) FROM \(report.view)($1, $2) AS r",
                    binds: bindings(end.addingTimeInterval(-window), end))
                var count = 0
                times.append(
                    try await median { count = try await database.query(function)[0].decode(Int.self, "n") })
                rows.append(count)
            }
            figures.times.append((report.name, times))
            say(
                report.name.padding(toLength: 43, withPad: " ", startingAt: 0)
                    + times.map { String(format: "%9.1f ms", $0 * 1000) }.joined(separator: "  ")
                    + "   rows " + rows.map(String.init).joined(separator: " / "))
            // A report of one row per activity or per push costs at least its rows: the same rows, read from
            // their rollup table alone and turned into text.
            if let floor = Self.rowsAlone[report.name] {
                var floors: [Double] = []
                for (_, window) in Self.windows {
                    let query = PostgresQuery(
                        unsafeSQL: "SELECT count(*) AS n, sum(length(\(floor.row))) FROM \(floor.table) AS r "
                            + "WHERE r.\(floor.time) >= $1 AND r.\(floor.time) < $2",
                        binds: bindings(end.addingTimeInterval(-window), end))
                    floors.append(try await median { try await database.query(query) })
                }
                say(
                    "  its rolled-up rows alone, as text".padding(toLength: 43, withPad: " ", startingAt: 0)
                        + floors.map { String(format: "%9.1f ms", $0 * 1000) }.joined(separator: "  "))
            }
        }

        guard dropsADay else {
            await database.shutdown()
            return figures
        }
        // Retention of the oldest day: its partitions dropped, right after a checkpoint (every page first
        // touched writes its full image: the worst case).
        let drop = try await measureWAL(database) {
            try await database.withTransaction { connection in
                try await connection.query("SET LOCAL lock_timeout = '2s'")
                let rows = try await connection.query(
                    """
                    SELECT sum(cardinality(partitions_dropped))::bigint AS dropped
                    FROM history_partitions_drop_expired(\(end)::timestamptz, \(days - 1)::integer)
                    """)
                let rollups = try await connection.query(
                    "SELECT report_rollups_drop_expired(\(end)::timestamptz, \(days - 1)::integer) AS deleted")
                return "\(try rows[0].decode(Int.self, "dropped")) partitions dropped, "
                    + "\(try rollups[0].decode(Int.self, "deleted")) rollup rows deleted"
            }
        }
        say(
            String(
                format: "retention of the oldest day (after a checkpoint): %.3f s, %.1f kB WAL (%@) (aim ≤ 1 s)",
                drop.seconds, Double(drop.wal) / 1e3, drop.result))
        await database.shutdown()
        if !keep {
            try await admin.query(PostgresQuery(unsafeSQL: "DROP DATABASE IF EXISTS \(name) WITH (FORCE)"))
        }
        return figures
    }

    /// A day of the workers' rounds as they run once caught up, every `minutes` (five for the workers): each
    /// reads the next `minutes` of attempts and timeline, then rolls up the activities created in them (final by
    /// then in this history) with what was written in the `minutes` after. Replayed over the newest whole UTC day, after its
    /// rolled-up rows are taken out, in a transaction rolled back afterwards. Not in it: what a round also does
    /// (activities becoming and leaving pending, the hourly rows merged, the push outcomes' hour).
    func steadyDay(
        _ database: PostgresClient, end: Date, minutes: Int
    ) async throws -> (
        slices: Double, activities: Double, rolled: Int
    ) {
        try await database.withConnection { connection in
            let day = try await connection.query(
                "SELECT date_trunc('day', \(end)::timestamptz, 'UTC') - interval '1 day' AS day")[0].decode(
                    Date.self, "day")
            let next = day.addingTimeInterval(86_400)
            try await connection.query("BEGIN")
            do {
                try await connection.query(
                    """
                    DELETE FROM report_failed_pushes_rollup AS f USING activities AS a
                    WHERE a.order_id = f.order_id AND a.activity_key = f.activity_key
                      AND a.created_at >= \(day)::timestamptz AND a.created_at < \(next)::timestamptz
                    """)
                for (table, column) in [
                    ("report_activity_timings_rollup", "created_at"),
                    ("report_alerts_per_activity_rollup", "created_at"),
                    ("report_activity_timings_by_app_rollup", "hour"), ("report_duplicate_starts_rollup", "hour"),
                    ("report_repeat_starts_rollup", "attempted_at"),
                ] {
                    var query = PostgresQuery(
                        unsafeSQL: "DELETE FROM \(table) WHERE \(column) >= $1 AND \(column) < $2")
                    query.binds = bindings(day, next)
                    try await connection.query(query)
                }
                var slices = 0.0
                var activities = 0.0
                var rolled = 0
                let length = Double(minutes * 60)
                for step in 0..<(1440 / minutes) {
                    let from = day.addingTimeInterval(Double(step) * length)
                    let upto = from.addingTimeInterval(length)
                    var start = ContinuousClock.now
                    try await connection.query(
                        "SELECT report_rollup_slice(\(from)::timestamptz, \(upto)::timestamptz, \(from)::timestamptz)")
                    slices += (ContinuousClock.now - start).seconds
                    start = ContinuousClock.now
                    let final = """
                        SELECT order_id, activity_key FROM activities
                        WHERE created_at >= $1 AND created_at < $2 AND state IN ('ended', 'expired', 'failed')
                        """
                    var rollUp = PostgresQuery(
                        unsafeSQL: """
                            WITH f AS MATERIALIZED (\(final))
                            SELECT (SELECT count(*) FROM f) AS n,
                                   report_rollup_final(ARRAY(SELECT order_id FROM f), ARRAY(SELECT activity_key FROM f),
                                                       $2, $3) IS NULL AS done
                            """)
                    rollUp.binds = bindings(from, upto, upto.addingTimeInterval(length))
                    rolled += try await connection.query(rollUp)[0].decode(Int.self, "n")
                    // As the round does: by the keys of the activities rolled up.
                    for table in ["report_activity_partials", "report_failed_pushes_staged"] {
                        var query = PostgresQuery(
                            unsafeSQL: """
                                WITH f AS MATERIALIZED (\(final))
                                DELETE FROM \(table) AS w
                                USING unnest(ARRAY(SELECT order_id FROM f), ARRAY(SELECT activity_key FROM f))
                                      AS k(order_id, activity_key)
                                WHERE w.order_id = k.order_id AND w.activity_key = k.activity_key
                                """)
                        query.binds = bindings(from, upto)
                        try await connection.query(query)
                    }
                    activities += (ContinuousClock.now - start).seconds
                }
                try await connection.query("ROLLBACK")
                return (slices, activities, rolled)
            } catch {
                _ = try? await connection.query("ROLLBACK")
                throw error
            }
        }
    }

    /// One call of the activities' rollup: the hours its slice of attempts and its activities' bound moved.
    struct Round {
        var activities: Int
        var seconds: Double
        var sliceHours: Double
        var activityHours: Double
    }

    static func bounds(_ database: PostgresClient) async throws -> (attempts: Date, activities: Date) {
        let row = try await database.query(
            """
            SELECT coalesce((SELECT complete_until FROM report_rollups WHERE name = 'attempts'), 'epoch') AS attempts,
                   coalesce((SELECT complete_until FROM report_rollups WHERE name = 'activities'), 'epoch') AS activities
            """)[0]
        return (try row.decode(Date.self, "attempts"), try row.decode(Date.self, "activities"))
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
    /// timeline row for its event and one for its outcome, and an inbox row; one activity in 200 swept.
    /// An activity ends 40 minutes after its creation: those of the last 40 minutes are still live, and so
    /// is one in 500 of the last 12 hours (the sweeper ends an activity at 12 hours). In chunks of a
    /// million attempts, each its own transaction. Returns the end of the history.
    func populate(_ client: PostgresClient, attempts: Int, days: Int) async throws -> Date {
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
        // As autovacuum leaves a month of history: pages visible to all. (The first catch-up rounds right after
        // populating still take tens of seconds, while the checkpoints write out the load: measure the catch-up
        // on a kept database with --roll-up-again for figures a settled database gives.)
        try await client.query("VACUUM ANALYZE")
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
            SELECT 'o-' || a, 'device:d' || a, 'com.example.app' || (a % 3), 'production',
                   CASE WHEN live THEN 'active' ELSE 'ended' END, CASE WHEN live THEN NULL ELSE 'delivered' END, 1,
                   t + interval '1 second', CASE WHEN live THEN NULL ELSE t + interval '40 minutes' END, t,
                   CASE WHEN live THEN t ELSE t + interval '40 minutes' END
            FROM (\(series)) AS g
            CROSS JOIN LATERAL (
                SELECT t + interval '40 minutes' > '\(endText)'::timestamptz
                       OR (t > '\(endText)'::timestamptz - interval '12 hours' AND a % 500 = 7) AS live
            ) AS l
            WHERE i % 6 = 0;
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
