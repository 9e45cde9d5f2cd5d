import APNs
import Foundation
import LiveDelivery
import LiveDeliveryAdmin
import LiveDeliveryCore
import LiveDeliveryTime
import Postgres
import TestSupport
import Testing

@Suite("Reports on a database populated by the worker's own code", .timeLimit(.minutes(6)))
struct ReportsTests {
    func run(
        _ name: String, _ query: ReportQuery = ReportQuery(limit: nil), on database: TestDatabase
    )
        async throws -> ReportTable
    {
        let report = try #require(Report.named(name))
        return try await report.run(query, client: database.client)
    }

    /// Rows of a table as dictionaries (column → text).
    func records(_ table: ReportTable) -> [[String: String]] {
        table.rows.map { row in
            var record: [String: String] = [:]
            for (index, column) in table.columns.enumerated() { record[column.name] = row[index] }
            return record
        }
    }

    @Test("every report returns the expected rows; failed-pushes retry re-plans and recovers")
    func populated() async throws {
        try await TestDatabase.with { database in
            let pipeline = try Pipeline(database: database)
            let orderA = TestEnvironment.uniqueName("A")
            let orderB = TestEnvironment.uniqueName("B")

            // A: adopted by the app, updated twice, delivered (ended).
            try await pipeline.apply(
                Events.status(orderA, "confirmed", sequence: 1, user: "u-rep", courier: "Sam", eta: .sample),
                Events.activityToken(orderA, activity: "act-a", token: Events.token()))
            try await pipeline.apply(
                Events.status(orderA, "out_for_delivery", sequence: 2, user: "u-rep", courier: "Sam", eta: .sample))
            try await pipeline.apply(
                Events.status(orderA, "delivered", sequence: 3, user: "u-rep", courier: "Sam", eta: .sample))

            // B: its first update is refused for good (413 PayloadTooLarge).
            pipeline.sender.fail(orderB, .update, with: .payloadFault(reason: .payloadTooLarge, status: 413))
            try await pipeline.apply(
                Events.status(orderB, "preparing", sequence: 1, user: "u-rep", courier: "Sam", eta: .sample),
                Events.activityToken(orderB, activity: "act-b", token: Events.token()))

            // A malformed message.
            _ = try await pipeline.processor.process([
                InboundMessage(body: Array("not json".utf8), routingKey: "order.status", messageID: "bad-1")
            ])

            // activities-by-state
            let states = records(try await run("activities-by-state", on: database))
            #expect(states.contains { $0["app"] == testApp && $0["state"] == "ended" && $0["activities"] == "1" })
            #expect(states.contains { $0["app"] == testApp && $0["state"] == "active" && $0["live"] == "t" })

            // order-timeline of A: events, decisions and pushes, in order.
            let timeline = records(
                try await run("order-timeline", ReportQuery(orderID: orderA, limit: nil), on: database))
            #expect(timeline.allSatisfy { $0["order_id"] == orderA })
            #expect(timeline.filter { $0["source"] == "event" }.count == 4)
            #expect(timeline.first?["source"] == "event")
            #expect(
                timeline.contains {
                    $0["source"] == "push" && $0["code"] == "delivered" && $0["subject"]?.hasPrefix("end") == true
                })
            #expect(timeline.contains { $0["source"] == "decision" && $0["code"] == "status_changed" })
            #expect(timeline.contains { $0["source"] == "outcome" && $0["code"] == "push_accepted" })
            let times = timeline.compactMap { $0["at"] }
            #expect(times == times.sorted())
            #expect(!timeline.contains { $0.keys.contains("rank") }, "sort columns are hidden")

            // push-outcomes-hourly
            let outcomes = records(try await run("push-outcomes-hourly", on: database))
            let delivered = outcomes.filter { $0["outcome"] == "delivered" }.compactMap { Int($0["attempts"] ?? "") }
            #expect(
                delivered.reduce(0, +)
                    == (try await database.count("SELECT count(*) FROM push_attempts WHERE outcome = 'delivered'")))
            #expect(
                outcomes.contains {
                    $0["outcome"] == "payload_fault" && $0["reason"] == "PayloadTooLarge" && $0["status"] == "413"
                        && $0["attempts"] == "1" && $0["app"] == testApp
                })

            // alerts-per-activity: A alerted (out for delivery, delivered) on priority 10.
            let alerts = records(
                try await run("alerts-per-activity", ReportQuery(orderID: orderA, limit: nil), on: database))
            let alertA = try #require(alerts.first)
            #expect(Int(alertA["alerts_planned"] ?? "") ?? 0 >= 1)
            #expect(Int(alertA["alert_count"] ?? "") ?? 0 >= 1)
            #expect(Int(alertA["high_priority_delivered"] ?? "") ?? 0 >= 1)
            #expect(alertA["first_alert_at"] != nil)

            // activity-timings: A has a first update and an end; B has no update delivered yet.
            let timings = records(try await run("activity-timings", on: database))
            let timingA = try #require(timings.first { $0["order_id"] == orderA })
            #expect(timingA["first_update_s"] != nil && timingA["end_s"] != nil && timingA["ended_at"] != nil)
            #expect((Double(timingA["end_s"] ?? "") ?? -1) >= 0)
            let timingB = try #require(timings.first { $0["order_id"] == orderB })
            #expect(timingB["first_update_at"] == nil && timingB["ended_at"] == nil)
            let byApp = records(try await run("activity-timings-by-app", on: database))
            #expect(
                byApp.contains {
                    $0["app"] == testApp && $0["activities"] == "2" && $0["with_update"] == "1" && $0["ended"] == "1"
                })

            // dead-letters and dead-letters-by-reason
            let letters = records(try await run("dead-letters", on: database))
            #expect(letters.count == 1)
            #expect(letters.first?["reason"] == "malformed_json" && letters.first?["body_bytes"] == "8")
            #expect(!(letters.first?.keys.contains("body") ?? true))
            let byReason = records(try await run("dead-letters-by-reason", on: database))
            #expect(byReason.map { [$0["reason"], $0["messages"], $0["pending"]] } == [["malformed_json", "1", "1"]])

            // failed-pushes: B's update, not recovered; then retry plans the newest state again.
            let failedTable = try await run("failed-pushes", on: database)
            let failed = records(failedTable)
            #expect(failed.count == 1)
            let failure = try #require(failed.first)
            #expect(failure["order_id"] == orderB && failure["decision"] == "push_dropped")
            #expect(failure["kind"] == "update" && failure["reason"] == "PayloadTooLarge")
            #expect(failure["recovered_at"] == nil && failure["activity_state"] == "active")
            let id = try #require(Int64(failure["id"] ?? ""))

            let store = FailedPushStore(client: database.client, tracking: pipeline.tracking)
            let shown = try #require(try await store.show(id))
            #expect(shown.attempts.rows.count == 1)
            #expect(try await store.retry(999_999_999, logger: quietLogger) == nil)
            let retried = try #require(try await store.retry(id, logger: quietLogger))
            #expect(retried.orderID == orderB && retried.planned == ["update"])
            try await pipeline.drain()
            let recovered = records(try await run("failed-pushes", on: database))
            #expect(recovered.first?["recovered_at"] != nil)
            #expect(
                try await database.count(
                    "SELECT count(*) FROM timeline_decisions WHERE order_id = \(orderB) AND code = 'operator_retry'")
                    == 1)
            #expect(try await store.list(unrecoveredOnly: true).rows.isEmpty)

            // sweeper-actions: nine hours later the sweeper ends B (lifetime); A has nothing left to do.
            let later = Date().addingTimeInterval(9 * 3600)
            #expect(try await pipeline.sweeper(now: { later }).sweepOnce() >= 1)
            let sweeps = records(try await run("sweeper-actions", on: database))
            #expect(
                sweeps.contains { $0["reason"] == "sweep_lifetime" && $0["actions"] == "1" && $0["app"] == testApp })
            #expect(!sweeps.contains { $0["reason"] == "end_finished_order" }, "the lifetime end counts once")
            #expect(sweeps.contains { $0["reason"] == "operator_retry" && $0["actions"] == "1" })
            #expect(!sweeps.contains { $0["reason"] == "update_replanned" }, "the retry's plan is not a sweep")

            // duplicate-starts: no push-to-start here.
            #expect(try await run("duplicate-starts", on: database).rows.isEmpty)

            // Every window function (sql/113) returns its view's rows for a window that holds all the data,
            // and none for a window before it.
            for report in Report.all where report.hasWindowFunction {
                let view = try await database.strings(
                    PostgresQuery(unsafeSQL: "SELECT row_to_json(r)::text FROM \(report.view) AS r ORDER BY 1"))
                let windowed = try await database.strings(
                    PostgresQuery(
                        unsafeSQL: """
                            SELECT row_to_json(r)::text
                            FROM \(report.view)(now() - interval '1 day', now() + interval '1 day') AS r ORDER BY 1
                            """))
                #expect(windowed == view, "\(report.name)")
                #expect(!view.isEmpty || report.name == "duplicate-starts", "\(report.name) has rows to compare")
                let before = try await database.count(
                    PostgresQuery(
                        unsafeSQL:
                            "SELECT count(*) FROM \(report.view)(now() - interval '3 days', now() - interval '2 days')")
                )
                #expect(before == 0, "\(report.name)")
            }
            // --since/--until: a window in the past holds nothing; the default window (24 h) holds today.
            let past = ReportQuery(
                since: Date().addingTimeInterval(-3 * 86_400), until: Date().addingTimeInterval(-2 * 86_400), limit: nil
            )
            #expect(try await run("push-outcomes-hourly", past, on: database).rows.isEmpty)
            #expect(try await run("order-timeline", past, on: database).rows.isEmpty)
            #expect(try await run("push-outcomes-hourly", on: database).rows.count == outcomes.count)

            // Filters: --since in the future leaves nothing; --order on a snapshot report is refused.
            let future = ReportQuery(since: Date().addingTimeInterval(3600 * 24 * 365), limit: nil)
            #expect(try await run("order-timeline", future, on: database).rows.isEmpty)
            #expect(try await run("order-timeline", ReportQuery(limit: 3), on: database).rows.count == 3)
            await #expect(throws: LiveDeliveryError.self) {
                try await run("activities-by-state", ReportQuery(orderID: orderA), on: database)
            }
            await #expect(throws: LiveDeliveryError.self) {
                try await run("dead-letters-by-reason", ReportQuery(since: Date()), on: database)
            }
        }
    }

    @Test("push outcomes of closed hours come from the rollup and equal what the attempts say, for any window")
    func pushOutcomesRollUp() async throws {
        try await TestDatabase.with { database in
            // 240 attempts over the last four hours, outcomes and latencies varied.
            try await database.client.query(
                """
                INSERT INTO push_attempts (order_id, activity_key, kind, bundle_id, priority, generation, apns_id, status,
                                           outcome, reason, latency_ms, worker_id, attempted_at)
                SELECT 'o-' || (i % 17), 'device:d' || (i % 17), 'update', 'com.example.app' || (i % 2), 5, 1,
                       gen_random_uuid(), CASE WHEN i % 9 = 0 THEN 410 WHEN i % 13 = 0 THEN NULL ELSE 200 END,
                       CASE WHEN i % 9 = 0 THEN 'token_gone' WHEN i % 13 = 0 THEN 'retry' ELSE 'delivered' END,
                       CASE WHEN i % 9 = 0 THEN 'Unregistered' END, (i * 37 % 101) / 3.0, 'test',
                       now() - make_interval(secs => i * 60)
                FROM generate_series(0, 239) AS i
                """)
            let windows: [(String, String)] = [
                ("now() - interval '5 hours'", "now() + interval '1 hour'"),
                ("now() - interval '150 minutes'", "now() - interval '35 minutes'"),
                ("date_trunc('hour', now()) - interval '3 hours'", "date_trunc('hour', now())"),
                ("now() - interval '10 minutes'", "now()"),
            ]
            func read(_ window: (String, String)) async throws -> [String] {
                try await database.strings(
                    PostgresQuery(
                        unsafeSQL: """
                            SELECT row_to_json(r)::text FROM report_push_outcomes_hourly(\(window.0), \(window.1)) AS r
                            ORDER BY 1
                            """))
            }
            var live: [[String]] = []
            for window in windows { live.append(try await read(window)) }
            let view = try await database.strings(
                "SELECT row_to_json(r)::text FROM report_push_outcomes_hourly AS r ORDER BY 1")

            let hours = try await database.count("SELECT report_rollup_push_outcomes(now(), 48)")
            #expect(hours >= 3)
            #expect(try await database.count("SELECT count(*) FROM report_push_outcomes_rollup") > 0)
            #expect(try await database.count("SELECT report_rollup_push_outcomes(now(), 48)") == 0, "each hour once")
            for (index, window) in windows.enumerated() {
                #expect(try await read(window) == live[index], "\(window)")
            }
            #expect(try await read(windows[0]) == view)
            // A clock ahead of the database's rolls up nothing the database has not seen close.
            #expect(try await database.count("SELECT report_rollup_push_outcomes(now() + interval '3 hours', 48)") == 0)
        }
    }

    @Test("sweeper-actions counts a terminal order's re-sent end once, under its own reason")
    func terminalEndResent() async throws {
        try await TestDatabase.with { database in
            try await database.client.query(
                """
                INSERT INTO timeline (order_id, at, kind, activity_keys, codes, messages) VALUES
                    ('o-1', now(), 'sweep', '{device:d1,device:d1}', '{sweep_terminal_not_ended,end_planned}',
                     '{not ended,end planned}'),
                    ('o-2', now(), 'sweep', '{device:d2}', '{end_planned}', '{end planned}')
                """)
            let sweeps = records(try await run("sweeper-actions", on: database))
            #expect(sweeps.count == 2)
            #expect(sweeps.contains { $0["reason"] == "sweep_terminal_not_ended" && $0["actions"] == "1" })
            #expect(sweeps.contains { $0["reason"] == "end_finished_order" && $0["actions"] == "1" })
        }
    }
}

@Suite("Report catalogue, filters and tables")
struct ReportFormattingTests {
    @Test("names resolve with dashes, underscores or the view's name")
    func names() {
        #expect(Report.named("order-timeline")?.view == "report_order_timeline")
        #expect(Report.named("order_timeline")?.view == "report_order_timeline")
        #expect(Report.named("report_order_timeline")?.view == "report_order_timeline")
        #expect(Report.named("orders; DROP TABLE inbox") == nil)
    }

    @Test("--since takes an age or an RFC 3339 time; purge ages")
    func since() {
        let now = Date(timeIntervalSince1970: 1_000_000)
        #expect(ReportQuery.parseSince("30m", now: now) == now.addingTimeInterval(-1800))
        #expect(ReportQuery.parseSince("7d", now: now) == now.addingTimeInterval(-7 * 86_400))
        #expect(ReportQuery.parseSince("2026-11-21T10:00:00Z") == RFC3339.parse("2026-11-21T10:00:00Z"))
        #expect(ReportQuery.parseSince("yesterday") == nil)
        #expect(ReportQuery.parseAge("30d") == TimeInterval(30 * 86_400))
        #expect(ReportQuery.parseAge("-3d") == nil)
        #expect(ReportQuery.parseAge("3") == nil)
    }

    @Test("tables align, right-align numbers, cut long cells and print NULL as empty")
    func render() {
        let table = ReportTable(
            columns: [.init(name: "app"), .init(name: "n", isNumeric: true), .init(name: "note")],
            rows: [["com.a", "5", nil], ["b", "12", "line\nbreak and a long tail"]])
        #expect(
            table.render(maxCellWidth: 12) == """
                app     n  note
                -----  --  ------------
                com.a   5
                b      12  line break …
                (2 rows)
                """)
    }

    @Test("dead-letter bodies hide device tokens")
    func redaction() {
        let token = String(repeating: "ab", count: 32)
        let letter = DeadLetter(
            id: 1, eventID: "e", routingKey: "activity.token", reason: "invalid_field", field: "token", message: "m",
            body: Array("{\"token\":\"\(token)\",\"event_id\":\"0d7c1e9e-aaaa\"}".utf8), receivedAt: Date(),
            replayedAt: nil)
        #expect(letter.displayBody == "{\"token\":\"abababab…(64 hex digits)\",\"event_id\":\"0d7c1e9e-aaaa\"}")
        let binary = DeadLetter(
            id: 2, eventID: nil, routingKey: "x", reason: "r", field: nil, message: "m", body: [0xff, 0xfe],
            receivedAt: Date(), replayedAt: nil)
        #expect(binary.displayBody == "(2 bytes, not UTF-8) fffe")
    }
}
