import Foundation
import LiveDelivery
import Postgres
import TestSupport
import Testing

/// The report rollups (sql/123, read in slices since sql/124): every report over history gives the same rows
/// read from the rollups as read from the history alone, for windows that cut hours and days, over four days of
/// generated history. An activity is rolled up by the first round that sees it final; one still live is read
/// live.
@Suite("Report rollups equal the history they were made from", .serialized, .timeLimit(.minutes(3)))
struct ReportRollupTests {
    static let reports = [
        "report_activity_timings", "report_activity_timings_by_app", "report_alerts_per_activity",
        "report_failed_pushes", "report_duplicate_starts",
    ]

    /// Windows as SQL expressions: rolled-up hours only, live hours only, both, cutting hours and UTC days.
    static let windows: [(String, String)] = [
        ("'-infinity'", "'infinity'"),
        ("now() - interval '7 days'", "now()"),
        ("now() - interval '24 hours'", "now()"),
        ("now() - interval '50 hours 13 minutes'", "now() - interval '7 minutes'"),
        ("now() - interval '3 days 17 minutes'", "now() - interval '1 day 23 minutes'"),
        ("date_trunc('day', now(), 'UTC') - interval '2 days'", "date_trunc('day', now(), 'UTC') - interval '1 day'"),
        (
            "date_trunc('hour', now()) - interval '40 hours 20 minutes'",
            "date_trunc('hour', now()) - interval '40 hours'"
        ),
        ("now() - interval '30 hours'", "now() - interval '30 hours'"),
    ]

    /// Four days of activities over three apps: some still live, some without a start or an end; attempts
    /// delivered, retried and given up; a second accepted start for every ninth; alerts held back and downgraded.
    static let history = """
        INSERT INTO orders (order_id, user_id, status, terminal, settled, created_at, updated_at)
        SELECT 'o-' || i, 'u-' || i, 'delivered', true, true, now() - make_interval(secs => (i * 2903 % 345600)), now()
        FROM generate_series(1, 1000) AS i;
        INSERT INTO activities (order_id, activity_key, bundle_id, environment, state, end_reason, alert_count,
                                started_at, ended_at, created_at, updated_at)
        SELECT order_id, 'device:d' || i, CASE WHEN i % 17 = 0 THEN NULL ELSE 'com.example.app' || (i % 3) END,
               'production',
               CASE WHEN live THEN 'active' WHEN i % 11 = 0 THEN 'failed' ELSE 'ended' END,
               CASE WHEN live THEN NULL ELSE 'delivered' END,
               i % 4,
               CASE WHEN i % 13 = 0 THEN NULL ELSE date_trunc('second', c + make_interval(secs => i % 3)) END,
               CASE WHEN live OR i % 11 = 0 THEN NULL
                    ELSE date_trunc('second', c + make_interval(secs => 60 + i * 7 % 7200)) END,
               c, c + make_interval(secs => 60 + i * 7 % 7200)
        FROM (SELECT i, 'o-' || i AS order_id, c, c > now() - interval '3 hours' AND i % 4 = 0 AS live
              FROM generate_series(1, 1000) AS i,
                   LATERAL (SELECT now() - make_interval(secs => (i * 2903 % 345600))
                                   + make_interval(secs => i % 7 + (i % 10) / 10.0) AS c) AS t) AS g;
        INSERT INTO push_attempts (order_id, activity_key, kind, bundle_id, priority, generation, apns_id, status,
                                   outcome, reason, latency_ms, worker_id, attempted_at)
        SELECT a.order_id, a.activity_key,
               CASE WHEN j IN (0, 6) THEN 'start' WHEN j = 5 THEN 'end' ELSE 'update' END,
               coalesce(a.bundle_id, 'com.example.app0'), CASE WHEN (i + j) % 3 = 0 THEN 10 ELSE 5 END, 1,
               gen_random_uuid(),
               CASE WHEN r < 80 OR j = 6 THEN 200 WHEN r < 88 THEN 429 WHEN r < 94 THEN 410 ELSE 413 END,
               CASE WHEN r < 80 OR j = 6 THEN 'delivered' WHEN r < 88 THEN 'retry' WHEN r < 94 THEN 'token_gone'
                    ELSE 'payload_fault' END,
               CASE WHEN r < 80 OR j = 6 THEN NULL WHEN r < 88 THEN 'TooManyRequests' WHEN r < 94 THEN 'Unregistered'
                    ELSE 'PayloadTooLarge' END,
               5 + r * 0.7, 'test',
               CASE WHEN j = 6 THEN a.created_at + make_interval(secs => 1 + i % 5000)
                    ELSE a.created_at + make_interval(secs => j * (30 + i * 7 % 7200) / 6.0) END
        FROM (SELECT row_number() OVER (ORDER BY order_id) AS i, * FROM activities) AS a
        CROSS JOIN generate_series(0, 6) AS j
        CROSS JOIN LATERAL (SELECT (i * 31 + j * 17) % 100 AS r) AS h
        WHERE j < 6 OR i % 9 = 0;
        INSERT INTO timeline (order_id, at, kind, activity_keys, codes, messages)
        SELECT p.order_id, p.attempted_at, 'outcome', ARRAY[p.activity_key],
               ARRAY[CASE p.outcome WHEN 'token_gone' THEN 'token_gone' ELSE 'push_dropped' END], ARRAY['given up']
        FROM push_attempts AS p WHERE p.outcome IN ('token_gone', 'payload_fault');
        INSERT INTO timeline (order_id, at, kind, activity_keys, codes, messages)
        SELECT p.order_id, p.attempted_at - interval '1 second', 'event', ARRAY[p.activity_key, p.activity_key],
               ARRAY['update_planned', (ARRAY['alert', 'alert_eta_slip', 'alert_cap_reached',
                                              'alert_already_sent_for_step', 'budget_downgrade', 'no_alert'])[1 + p.id % 6]],
               ARRAY['planned', 'why']
        FROM push_attempts AS p WHERE p.kind = 'update'
        """

    /// Every report over every window, each row as JSON, sorted: read as the owner, who is not bound.
    /// Every report over every window, the windows' `now()` read as `reference` (both readings must see the
    /// same windows, however long the rollup rounds between them take).
    static func read(_ database: TestDatabase, at reference: String) async throws -> [[String]] {
        var answers: [[String]] = []
        let now = "'\(reference)'::timestamptz"
        for report in reports {
            for (since, until) in windows.map({
                ($0.0.replacingOccurrences(of: "now()", with: now), $0.1.replacingOccurrences(of: "now()", with: now))
            }) {
                answers.append(
                    try await database.strings(
                        PostgresQuery(
                            unsafeSQL: """
                                SELECT row_to_json(r)::text FROM \(report)(\(since), \(until)) AS r ORDER BY 1
                                """)))
            }
        }
        return answers
    }

    @Test("every report, over windows that cut hours and days, gives the same rows from the rollups as from history")
    func rollupsEqualHistory() async throws {
        try await TestDatabase.with { database in
            try await database.owner.withConnection { try await $0.execute(unsafeSQL: Self.history) }
            // Nothing rolled up yet: every window is read from the history.
            #expect(try await database.count("SELECT count(*) FROM report_rollups WHERE name = 'activities'") == 0)
            let reference = try #require(try await database.strings("SELECT now()::text").first)
            let fromHistory = try await Self.read(database, at: reference)
            for (index, answer) in fromHistory.enumerated() where index % Self.windows.count == 3 {
                #expect(!answer.isEmpty, "\(Self.reports[index / Self.windows.count]) has rows over two days")
            }

            // The workers' round, through the worker's login (bounded: at most 168 hours a call, so three calls).
            for _ in 0..<3 { _ = try await database.client.query("SELECT report_rollup_push_outcomes(now(), 168)") }
            let bound = try await database.strings(
                """
                SELECT (complete_until > now() - interval '6 minutes' AND complete_until <= now() - interval '5 minutes')::text
                FROM report_rollups WHERE name = 'activities'
                """)
            #expect(bound == ["true"], "every activity created until five minutes ago is rolled up or pending")
            #expect(
                try await database.count(
                    """
                    SELECT count(*) FROM activities AS a
                    WHERE a.created_at < (SELECT complete_until FROM report_rollups WHERE name = 'activities')
                      AND (a.state IN ('ended', 'expired', 'failed')) = EXISTS (
                          SELECT 1 FROM report_activities_pending AS p
                          WHERE p.order_id = a.order_id AND p.activity_key = a.activity_key)
                    """) == 0, "the final activities are rolled up, the live ones pending")
            #expect(try await database.count("SELECT count(*) FROM report_activities_pending") > 0)
            for table in [
                "report_activity_timings_rollup", "report_alerts_per_activity_rollup", "report_failed_pushes_rollup",
                "report_activity_timings_by_app_rollup", "report_duplicate_starts_rollup",
                "report_repeat_starts_rollup",
            ] {
                #expect(
                    try await database.count(PostgresQuery(unsafeSQL: "SELECT count(*) FROM \(table)")) > 0, "\(table)")
            }
            let fromRollups = try await Self.read(database, at: reference)
            for (index, answer) in fromRollups.enumerated() {
                let report = Self.reports[index / Self.windows.count]
                let window = Self.windows[index % Self.windows.count]
                #expect(answer == fromHistory[index], "\(report) over \(window)")
            }

            // Over all history the functions are the views (failed-pushes' function counts a recovery only from
            // attempts made after the give-up, and alerts-per-activity's view has no creation time to read by).
            for report in ["report_activity_timings", "report_activity_timings_by_app", "report_duplicate_starts"] {
                let view = try await database.strings(
                    PostgresQuery(unsafeSQL: "SELECT row_to_json(r)::text FROM \(report) AS r ORDER BY 1"))
                let function = try await database.strings(
                    PostgresQuery(
                        unsafeSQL: "SELECT row_to_json(r)::text FROM \(report)('-infinity', 'infinity') AS r ORDER BY 1"
                    ))
                #expect(view == function, "\(report)")
            }
            // Each hour once.
            let rows = try await database.count("SELECT count(*) FROM report_activity_timings_rollup")
            _ = try await database.client.query("SELECT report_rollup_push_outcomes(now(), 168)")
            #expect(try await database.count("SELECT count(*) FROM report_activity_timings_rollup") == rows)
        }
    }

    @Test("an activity that ended a minute ago is read from the rollup; one still live is read live")
    func finalActivitiesAreRolledUp() async throws {
        try await TestDatabase.with { database in
            try await database.owner.withConnection { try await $0.execute(unsafeSQL: Self.history) }
            // Two activities of two days ago still live: neither holds back the rest of its hour.
            let live = try await database.strings(
                """
                UPDATE activities SET state = 'active', ended_at = NULL, end_reason = NULL
                WHERE (order_id, activity_key) IN (SELECT order_id, activity_key FROM activities
                                                   WHERE created_at < now() - interval '2 days'
                                                   ORDER BY created_at DESC LIMIT 2)
                RETURNING order_id
                """
            ).sorted()
            #expect(live.count == 2)
            for _ in 0..<3 { _ = try await database.client.query("SELECT report_rollup_push_outcomes(now(), 168)") }
            let pending = try await database.strings(
                "SELECT order_id FROM report_activities_pending WHERE created_at < now() - interval '2 days' ORDER BY 1"
            )
            #expect(pending == live)
            #expect(
                try await database.count(
                    """
                    SELECT count(*) FROM report_activity_timings_rollup
                    WHERE created_at >= (SELECT min(created_at) FROM report_activities_pending) - interval '1 hour'
                      AND created_at < (SELECT min(created_at) FROM report_activities_pending)
                    """) > 0, "the activities of the live ones' hours are rolled up")

            // The first ends a minute ago; the next round rolls it up, and the report reads it from there (a mark
            // put in its rolled-up row shows). The second, still live, is read live: a change shows at once.
            try await database.owner.query(
                """
                UPDATE activities SET state = 'ended', end_reason = 'delivered', ended_at = now() - interval '1 minute',
                                      updated_at = now() - interval '1 minute'
                WHERE order_id = \(live[0])
                """)
            let reference = try #require(try await database.strings("SELECT now()::text").first)
            let fromHistory = try await Self.read(database, at: reference)
            _ = try await database.client.query("SELECT report_rollup_push_outcomes(now(), 168)")
            #expect(
                try await database.strings(
                    "SELECT order_id FROM report_activities_pending WHERE created_at < now() - interval '2 days'")
                    == [live[1]])
            #expect(try await Self.read(database, at: reference) == fromHistory)
            try await database.owner.query(
                "UPDATE report_activity_timings_rollup SET end_reason = 'rolled up' WHERE order_id = \(live[0])")
            try await database.owner.query("UPDATE activities SET end_reason = 'live' WHERE order_id = \(live[1])")
            let reasons = try await database.strings(
                """
                SELECT order_id || ' ' || end_reason FROM report_activity_timings(now() - interval '5 days', now())
                WHERE order_id IN (\(live[0]), \(live[1])) ORDER BY 1
                """)
            #expect(reasons == ["\(live[0]) rolled up", "\(live[1]) live"])
        }
    }

    /// One activity created before a UTC midnight and ended after it, with an update delivered on each side,
    /// and answers recorded after its end: one delivered at priority 10, one given up (with its decision). And a
    /// push given up to a device of the order with no activity row, recovered a minute later.
    static let acrossMidnight = """
        INSERT INTO orders (order_id, user_id, status, terminal, settled, created_at, updated_at)
        VALUES ('o-midnight', 'u-midnight', 'delivered', true, true,
                date_trunc('day', now(), 'UTC') - interval '1 day 20 minutes', now());
        INSERT INTO activities (order_id, activity_key, bundle_id, environment, state, end_reason, alert_count,
                                started_at, ended_at, created_at, updated_at)
        SELECT 'o-midnight', 'device:midnight', 'com.example.app1', 'production', 'ended', 'delivered', 2,
               m - interval '19 minutes', m + interval '30 minutes', m - interval '20 minutes', m + interval '30 minutes'
        FROM (SELECT date_trunc('day', now(), 'UTC') - interval '1 day' AS m) AS d;
        INSERT INTO push_attempts (order_id, activity_key, kind, bundle_id, priority, generation, apns_id, status,
                                   outcome, reason, latency_ms, worker_id, attempted_at)
        SELECT 'o-midnight', 'device:midnight', k, 'com.example.app1', pr, 1, gen_random_uuid(), st, oc, re, 5, 'test',
               m + o
        FROM (SELECT date_trunc('day', now(), 'UTC') - interval '1 day' AS m) AS d,
             (VALUES ('start', 10, 200, 'delivered', NULL, interval '-19 minutes'),
                     ('update', 5, 200, 'delivered', NULL, interval '-5 minutes'),
                     ('update', 10, 413, 'payload_fault', 'PayloadTooLarge', interval '2 minutes'),
                     ('update', 10, 200, 'delivered', NULL, interval '10 minutes'),
                     ('end', 10, 200, 'delivered', NULL, interval '30 minutes'),
                     ('update', 10, 200, 'delivered', NULL, interval '31 minutes'),
                     ('update', 5, 410, 'token_gone', 'Unregistered', interval '33 minutes'))
             AS v(k, pr, st, oc, re, o);
        -- A push given up to a device with no activity row, then one delivered to it.
        INSERT INTO push_attempts (order_id, activity_key, kind, bundle_id, priority, generation, apns_id, status,
                                   outcome, reason, latency_ms, worker_id, attempted_at)
        SELECT 'o-midnight', 'device:no-row', 'update', 'com.example.app1', 5, 1, gen_random_uuid(), st, oc, re, 5,
               'test', m + o
        FROM (SELECT date_trunc('day', now(), 'UTC') - interval '1 day' AS m) AS d,
             (VALUES (410, 'token_gone', 'Unregistered', interval '3 minutes'),
                     (200, 'delivered', NULL, interval '4 minutes')) AS v(st, oc, re, o);
        INSERT INTO timeline (order_id, at, kind, activity_keys, codes, messages)
        SELECT 'o-midnight', p.attempted_at, 'outcome', ARRAY[p.activity_key],
               ARRAY[CASE p.outcome WHEN 'token_gone' THEN 'token_gone' ELSE 'push_dropped' END], ARRAY['given up']
        FROM push_attempts AS p WHERE p.order_id = 'o-midnight' AND p.outcome IN ('token_gone', 'payload_fault');
        INSERT INTO timeline (order_id, at, kind, activity_keys, codes, messages)
        SELECT 'o-midnight', m + o, 'event', ARRAY['device:midnight'], ARRAY[c], ARRAY['why']
        FROM (SELECT date_trunc('day', now(), 'UTC') - interval '1 day' AS m) AS d,
             (VALUES ('alert', interval '-6 minutes'), ('alert_cap_reached', interval '1 minute'),
                     ('alert_eta_slip', interval '9 minutes'), ('budget_downgrade', interval '32 minutes'))
             AS v(c, o)
        """

    /// Calls the workers' round through the worker's login, `max_hours` at a time, until the activities are
    /// rolled up to five minutes ago. Returns the number of calls.
    static func catchUp(_ database: TestDatabase, maxHours: Int) async throws -> Int {
        for call in 1...1000 {
            _ = try await database.client.query(
                PostgresQuery(unsafeSQL: "SELECT report_rollup_push_outcomes(now(), \(maxHours))"))
            let behind = try await database.count(
                """
                SELECT count(*) FROM report_rollups
                WHERE name = 'activities' AND complete_until < now() - interval '6 minutes'
                """)
            if behind == 0 { return call }
        }
        Issue.record("the rollup did not catch up in 1000 calls")
        return 1000
    }

    @Test(
        "an hour a round, as after a pause: each slice of attempts read once adds up to the same rows, for an activity across midnight and answers after its end"
    )
    func slicesAddUp() async throws {
        try await TestDatabase.with { database in
            try await database.owner.withConnection {
                try await $0.execute(unsafeSQL: Self.history)
                try await $0.execute(unsafeSQL: Self.acrossMidnight)
            }
            let reference = try #require(try await database.strings("SELECT now()::text").first)
            let fromHistory = try await Self.read(database, at: reference)
            let calls = try await Self.catchUp(database, maxHours: 1)
            // About 96 hours of slices, then about 96 of activities.
            #expect(calls > 150, "\(calls) calls")
            #expect(
                try await database.count(
                    """
                    SELECT count(*) FROM report_rollups
                    WHERE name IN ('attempts', 'start_hours') AND complete_until < now() - interval '66 minutes'
                    """) == 0, "the slices are caught up")
            #expect(
                try await database.count(
                    """
                    SELECT count(*) FROM report_activity_timings_rollup
                    WHERE order_id = 'o-midnight' AND first_update_at < date_trunc('day', now(), 'UTC') - interval '1 day'
                    """) == 1, "the activity across midnight is rolled up whole")
            #expect(
                try await database.strings(
                    """
                    SELECT pushes_delivered || ' ' || high_priority_delivered || ' ' || alerts_planned || ' '
                           || alerts_held_back || ' ' || budget_downgrades
                    FROM report_alerts_per_activity_rollup WHERE order_id = 'o-midnight'
                    """) == ["5 4 2 1 1"], "the answers after its end count")
            #expect(
                try await database.count(
                    """
                    SELECT count(*) FROM report_failed_pushes_rollup
                    WHERE order_id = 'o-midnight' AND (activity_key <> 'device:no-row' OR recovered_at IS NOT NULL)
                    """) == 3, "and the push to no activity row, with its recovery")
            // Partials are kept for the activities not rolled up only.
            #expect(
                try await database.count(
                    """
                    SELECT count(*) FROM report_activity_partials AS w
                    WHERE NOT EXISTS (SELECT 1 FROM report_activities_pending AS p
                                      WHERE p.order_id = w.order_id AND p.activity_key = w.activity_key)
                      AND NOT EXISTS (SELECT 1 FROM activities AS a
                                      WHERE a.order_id = w.order_id AND a.activity_key = w.activity_key
                                        AND a.created_at >= (SELECT complete_until FROM report_rollups
                                                             WHERE name = 'activities'))
                    """) == 0)
            let fromRollups = try await Self.read(database, at: reference)
            for (index, answer) in fromRollups.enumerated() {
                let report = Self.reports[index / Self.windows.count]
                let window = Self.windows[index % Self.windows.count]
                #expect(answer == fromHistory[index], "\(report) over \(window)")
            }
        }
    }

    @Test("after an upgrade from sql/123 with rollups made, the rounds go on to the same rows")
    func upgradeFrom123() async throws {
        let database = try await TestDatabase.create(migrate: false)
        try await database.using {
            let migrator = Migrator(directory: TestDatabase.migrationsDirectory)
            try await migrator.migrate(client: database.owner, logger: quietLogger, before: 124)
            try await database.owner.withConnection {
                try await $0.execute(unsafeSQL: Self.history)
                try await $0.execute(unsafeSQL: Self.acrossMidnight)
            }
            // Two activities of three days ago still live, pending after sql/123's rounds up to two days ago.
            let live = try await database.strings(
                """
                UPDATE activities SET state = 'active', ended_at = NULL, end_reason = NULL
                WHERE (order_id, activity_key) IN (SELECT order_id, activity_key FROM activities
                                                   WHERE created_at < now() - interval '3 days'
                                                   ORDER BY created_at DESC LIMIT 2)
                RETURNING order_id
                """
            ).sorted()
            for _ in 0..<2 {
                _ = try await database.owner.query("SELECT report_rollup_push_outcomes(now() - interval '2 days', 168)")
            }
            #expect(
                try await database.strings(
                    "SELECT order_id FROM report_activities_pending WHERE created_at < now() - interval '3 days' ORDER BY 1"
                ) == live)
            try await migrator.migrate(client: database.owner, logger: quietLogger)
            #expect(
                try await database.count(
                    """
                    SELECT count(*) FROM report_activity_partials AS w
                    JOIN report_activities_pending AS p USING (order_id, activity_key)
                    WHERE w.delivered > 0
                    """) == 2, "the activities pending got their partials from history")
            try await database.owner.query(
                """
                UPDATE activities SET state = 'ended', end_reason = 'delivered', ended_at = now() - interval '1 hour',
                                      updated_at = now() - interval '1 hour'
                WHERE order_id = \(live[0])
                """)
            let reference = try #require(try await database.strings("SELECT now()::text").first)
            let fromHistory = try await Self.read(database, at: reference)
            _ = try await Self.catchUp(database, maxHours: 24)
            #expect(
                try await database.strings(
                    "SELECT order_id FROM report_activities_pending WHERE created_at < now() - interval '3 days'")
                    == [live[1]])
            let fromRollups = try await Self.read(database, at: reference)
            for (index, answer) in fromRollups.enumerated() {
                let report = Self.reports[index / Self.windows.count]
                let window = Self.windows[index % Self.windows.count]
                #expect(answer == fromHistory[index], "\(report) over \(window)")
            }
        }
    }

    @Test(
        "rounds bounded by rows: a round reads at most livedelivery.report_rollup_round_rows attempts and decision rows and a fifth as many activities, and the rounds add up to the same rows"
    )
    func roundsBoundedByRows() async throws {
        try await TestDatabase.with { database in
            try await database.owner.withConnection { try await $0.execute(unsafeSQL: Self.history) }
            let reference = try #require(try await database.strings("SELECT now()::text").first)
            let fromHistory = try await Self.read(database, at: reference)

            // The worker's login may ask for 1 to 1,000,000 rows a round, nothing else.
            for setting in ["0", "1000001", "many"] {
                #expect(
                    try await PrivilegeTests.sqlState(
                        database.client,
                        """
                        SET LOCAL livedelivery.report_rollup_round_rows = '\(setting)';
                        SELECT report_rollup_push_outcomes(now(), 168)
                        """) == "22023", "\(setting)")
            }

            // The workers' rounds through the worker's login, 400 rows a round, 168 hours at most: the four days
            // of history take many rounds. The bounds after each round, read as the owner.
            let rows = 400
            let boundsQuery: PostgresQuery = """
                SELECT coalesce(string_agg(name || '=' || complete_until::text, '|' ORDER BY name), '')
                FROM report_rollups WHERE name IN ('attempts', 'activities', 'push_outcomes_hourly')
                """
            var bounds: [[String: String]] = []
            try await database.client.withConnection { connection in
                try await connection.query("SELECT set_config('livedelivery.report_rollup_round_rows', '400', false)")
                for _ in 0..<1000 {
                    let hours = try await connection.query("SELECT report_rollup_push_outcomes(now(), 168) AS hours")[0]
                        .decode(Int.self, "hours")
                    let line = try #require(try await database.strings(boundsQuery).first)
                    bounds.append(
                        Dictionary(
                            uniqueKeysWithValues: line.split(separator: "|", omittingEmptySubsequences: true).map {
                                let parts = $0.split(separator: "=", maxSplits: 1)
                                return (String(parts[0]), String(parts[1]))
                            }))
                    let behind = try await database.count(
                        """
                        SELECT count(*) FROM report_rollups
                        WHERE name = 'activities' AND complete_until < now() - interval '6 minutes'
                        """)
                    if hours == 0 && behind == 0 { break }
                }
            }
            #expect(bounds.count > 20, "\(bounds.count) rounds")
            // Each round's share, by the bounds it moved.
            var largest = (attempts: 0, decisions: 0, activities: 0, outcomeAttempts: 0)
            for (before, after) in zip(bounds, bounds.dropFirst()) {
                func within(_ name: String, _ sql: String) async throws -> Int {
                    guard let from = before[name], let to = after[name], from != to else { return 0 }
                    var query = PostgresQuery(unsafeSQL: sql)
                    query.binds.append(from)
                    query.binds.append(to)
                    return try await database.count(query)
                }
                largest.attempts = max(
                    largest.attempts,
                    try await within(
                        "attempts",
                        "SELECT count(*) FROM push_attempts WHERE attempted_at >= $1::timestamptz AND attempted_at < $2::timestamptz"
                    ))
                largest.decisions = max(
                    largest.decisions,
                    try await within(
                        "attempts",
                        """
                        SELECT count(*) FROM timeline WHERE at >= $1::timestamptz AND at < $2::timestamptz
                          AND codes && ARRAY['alert', 'alert_eta_slip', 'alert_cap_reached', 'alert_already_sent_for_step',
                                             'budget_downgrade', 'push_dropped', 'token_gone']
                        """))
                largest.activities = max(
                    largest.activities,
                    try await within(
                        "activities",
                        "SELECT count(*) FROM activities WHERE created_at >= $1::timestamptz AND created_at < $2::timestamptz"
                    ))
                // Whole hours, at least one a round.
                largest.outcomeAttempts = max(
                    largest.outcomeAttempts,
                    try await within(
                        "push_outcomes_hourly",
                        """
                        SELECT CASE WHEN $2::timestamptz - $1::timestamptz = interval '1 hour' THEN 0 ELSE count(*) END
                        FROM push_attempts WHERE attempted_at >= $1::timestamptz AND attempted_at < $2::timestamptz
                        """))
            }
            #expect(largest.attempts > 0 && largest.attempts <= rows, "\(largest)")
            #expect(largest.decisions <= rows, "\(largest)")
            #expect(largest.activities > 0 && largest.activities <= rows / 5, "\(largest)")
            #expect(largest.outcomeAttempts <= rows, "\(largest)")

            let fromRollups = try await Self.read(database, at: reference)
            for (index, answer) in fromRollups.enumerated() {
                let report = Self.reports[index / Self.windows.count]
                let window = Self.windows[index % Self.windows.count]
                #expect(answer == fromHistory[index], "\(report) over \(window)")
            }
        }
    }
}
