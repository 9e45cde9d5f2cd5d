import Foundation
import LiveDelivery
import Postgres
import TestSupport
import Testing

@Suite("Retention and history partitions", .timeLimit(.minutes(6)))
struct RetentionTests {
    @Test("history older than the retention is deleted; newer history and orders stay")
    func deletesOnlyOldHistory() async throws {
        try await withWorker(adjust: { $0.retention.days = 7 }) { harness, worker in
            let (order, _) = try await trackedOrder(worker)
            try await eventually("the push is recorded") {
                try await worker.dispatcher.dispatchOnce()
                return try await harness.database.count("SELECT count(*) FROM push_attempts") > 0
            }
            let recent = (
                inbox: try await harness.database.count("SELECT count(*) FROM inbox"),
                attempts: try await harness.database.count("SELECT count(*) FROM push_attempts"),
                timeline: try await harness.database.count("SELECT count(*) FROM timeline")
            )
            // Five rows of each kind from 8 days ago: no day partition holds them, the default ones do.
            let client = harness.database.client
            for index in 0..<5 {
                try await client.query(
                    """
                    INSERT INTO inbox (event_id, event_type, order_id, occurred_at, processed_at)
                    VALUES (\("old-\(index)"), 'order.status', \(order), now() - interval '8 days', now() - interval '8 days')
                    """)
                try await client.query(
                    """
                    INSERT INTO push_attempts (order_id, activity_key, kind, bundle_id, priority, generation, apns_id,
                                               status, outcome, latency_ms, worker_id, attempted_at)
                    VALUES (\(order), 'activity:old', 'update', 'com.example.pizza', 5, 1, gen_random_uuid(), 200,
                            'delivered', 1.0, 'test', now() - interval '8 days')
                    """)
                try await client.query(
                    """
                    INSERT INTO timeline (order_id, kind, activity_keys, codes, messages, at)
                    VALUES (\(order), 'event', '{NULL}', '{old}', '{old}', now() - interval '8 days')
                    """)
            }
            let round = try #require(try await worker.retention.runOnce())
            #expect(
                round.deleted.filter { $0.key != "report_push_outcomes_rollup" } == [
                    "inbox": 5, "push_attempts": 5, "timeline": 5,
                ])
            // The round rolled up the old attempts' hour first, then dropped it with them.
            #expect(round.rolledUp > 0 && (round.deleted["report_push_outcomes_rollup"] ?? 0) >= 1)
            #expect(round.dropped.isEmpty)
            #expect(try await harness.database.count("SELECT count(*) FROM inbox") == recent.inbox)
            #expect(try await harness.database.count("SELECT count(*) FROM push_attempts") == recent.attempts)
            #expect(try await harness.database.count("SELECT count(*) FROM timeline") == recent.timeline)
            #expect(try await harness.database.count("SELECT count(*) FROM orders WHERE order_id = \(order)") == 1)
            #expect(
                try await worker.retention.runOnce()?.deleted
                    == ["inbox": 0, "push_attempts": 0, "timeline": 0, "report_push_outcomes_rollup": 0])
        }
    }

    /// 2031-03-10T12:00:00Z plus `days`: far from the real clock, so only the injected one decides.
    static func day(_ days: Double) -> Date { Date(timeIntervalSince1970: 1_930_910_400 + days * 86_400) }

    static func partitions(_ database: TestDatabase) async throws -> Set<String> {
        Set(
            try await database.strings(
                """
                SELECT c.relname::text FROM pg_inherits AS i JOIN pg_class AS c ON c.oid = i.inhrelid
                WHERE i.inhparent IN ('push_attempts'::regclass, 'timeline'::regclass, 'inbox'::regclass)
                """))
    }

    static func names(_ days: [String]) -> Set<String> {
        Set(days.flatMap { day in ["push_attempts", "timeline", "inbox"].map { "\($0)_p\(day)" } })
    }

    @Test(
        "upkeep creates today's partitions and two days ahead, then only what the clock adds; retention drops what ended before the cutoff"
    )
    func upkeepAheadAndBehind() async throws {
        let database = try await TestDatabase.create()
        try await database.using {
            var configuration = WorkerConfiguration.Retention()
            configuration.days = 7
            // The clock moves years ahead: the owner's login, which the upkeep's bounds leave free (sql/122).
            let retention = Retention(configuration: configuration, client: database.owner, logger: quietLogger)
            let migrated = try await Self.partitions(database)
            #expect(migrated.contains("push_attempts_default") && migrated.contains("inbox_default"))

            let first = try #require(try await retention.runOnce(now: Self.day(0)))
            #expect(Set(first.created) == Self.names(["20310310", "20310311", "20310312"]))
            // The real days of the migration ended long before 2031-03-03: dropped, each table's own.
            #expect(
                Set(first.dropped)
                    == migrated.subtracting(["push_attempts_default", "timeline_default", "inbox_default"]))
            let again = try #require(try await retention.runOnce(now: Self.day(0.4)))
            #expect(again.created.isEmpty && again.dropped.isEmpty)
            #expect(again.deleted == ["inbox": 0, "push_attempts": 0, "timeline": 0, "report_push_outcomes_rollup": 0])

            let next = try #require(try await retention.runOnce(now: Self.day(1)))
            #expect(Set(next.created) == Self.names(["20310313"]))
            #expect(next.dropped.isEmpty)

            // Ten days on: the cutoff is 2031-03-13T12:00Z; the days that ended by then go, 03-13 stays.
            let later = try #require(try await retention.runOnce(now: Self.day(10)))
            #expect(Set(later.dropped) == Self.names(["20310310", "20310311", "20310312"]))
            #expect(Set(later.created) == Self.names(["20310320", "20310321", "20310322"]))
            let left = try await Self.partitions(database)
            #expect(left.isSuperset(of: Self.names(["20310313", "20310320", "20310321", "20310322"])))
            #expect(left.isDisjoint(with: Self.names(["20310310", "20310311", "20310312"])))
        }
    }

    @Test(
        "a row whose day has no partition waits in the default one and moves when its day is created; none is refused")
    func defaultPartitionCatchesAndHandsOver() async throws {
        let database = try await TestDatabase.create()
        try await database.using {
            let client = database.client
            let at = Self.day(30)
            try await client.query(
                """
                INSERT INTO push_attempts (order_id, activity_key, kind, bundle_id, priority, generation, apns_id,
                                           status, outcome, latency_ms, worker_id, attempted_at)
                VALUES ('o-1', 'a-1', 'update', 'com.example.pizza', 5, 1, gen_random_uuid(), 200, 'delivered', 1.0,
                        'test', \(at))
                """)
            try await client.query(
                """
                INSERT INTO inbox (event_id, event_type, order_id, occurred_at)
                VALUES ('e-1', 'order.status', 'o-1', \(at)), ('e-1', 'order.status', 'o-1', \(at))
                ON CONFLICT (event_id, occurred_at) DO NOTHING
                """)
            let holder: PostgresQuery = "SELECT tableoid::regclass::text FROM push_attempts WHERE order_id = 'o-1'"
            #expect(try await database.strings(holder) == ["push_attempts_default"])
            var configuration = WorkerConfiguration.Retention()
            configuration.days = 0
            let retention = Retention(configuration: configuration, client: database.owner, logger: quietLogger)
            try await retention.runOnce(now: at)
            #expect(try await database.strings(holder) == ["push_attempts_p20310409"])
            #expect(
                try await database.strings("SELECT tableoid::regclass::text FROM inbox WHERE event_id = 'e-1'")
                    == ["inbox_p20310409"])
            // retention.days = 0 keeps everything: nothing is dropped however far the clock goes.
            let far = try #require(try await retention.runOnce(now: Self.day(400)))
            #expect(far.dropped.isEmpty)
            #expect(try await database.count("SELECT count(*) FROM push_attempts WHERE order_id = 'o-1'") == 1)
        }
    }

    @Test("the reporting role cannot run the partition upkeep or retention")
    func maintenanceIsTheOwnersAlone() async throws {
        let database = try await TestDatabase.create()
        try await database.using {
            let granted = try await database.strings(
                """
                SELECT p.proname::text FROM pg_proc AS p
                WHERE p.proname LIKE 'history\\_partition%'
                  AND has_function_privilege('livedelivery_reporting', p.oid, 'EXECUTE')
                """)
            #expect(granted.isEmpty)
        }
    }

    @Test(
        "112 moves a live deployment's history into day partitions; the report views read it, with their comments and grants"
    )
    func migrationMovesLiveRows() async throws {
        let database = try await TestDatabase.create(migrate: false)
        try await database.using {
            try await MigrationTests.migrate(database, before: 112)
            try await database.owner.withConnection { connection in
                try await connection.execute(
                    unsafeSQL: """
                        INSERT INTO inbox (event_id, event_type, order_id, occurred_at, processed_at)
                        SELECT 'e-' || d, 'order.status', 'o-1', now() - d * interval '1 day', now() - d * interval '1 day'
                        FROM generate_series(0, 3) AS d;
                        INSERT INTO push_attempts (order_id, activity_key, kind, bundle_id, priority, generation, apns_id,
                                                   status, outcome, latency_ms, worker_id, attempted_at)
                        SELECT 'o-1', 'a-1', 'update', 'com.example.pizza', 5, d, gen_random_uuid(), 200, 'delivered', 1.0,
                               'test', now() - d * interval '1 day'
                        FROM generate_series(0, 3) AS d;
                        INSERT INTO timeline (order_id, activity_key, kind, code, message, at)
                        SELECT 'o-1', 'a-1', 'event', 'update_planned', 'planned', now() - d * interval '1 day'
                        FROM generate_series(0, 3) AS d;
                        CREATE VIEW admin_attempts AS SELECT order_id, attempted_at FROM push_attempts;
                        """)
            }
            let before = try await database.strings(
                "SELECT concat_ws(' ', source, code, at) FROM report_order_timeline WHERE order_id = 'o-1' ORDER BY at, rank, sort_id"
            )
            let applied = try await Migrator(directory: TestDatabase.migrationsDirectory).migrate(
                client: database.owner, logger: quietLogger)
            #expect(applied.first == "112_history_partitioned_by_day.sql")
            #expect(
                try await database.strings(
                    "SELECT concat_ws(' ', source, code, at) FROM report_order_timeline WHERE order_id = 'o-1' ORDER BY at, rank, sort_id"
                )
                    == before)
            #expect(before.count == 12)
            // Each day's rows in that day's partition, none left in the default ones.
            for table in ["push_attempts", "timeline", "inbox"] {
                #expect(
                    try await database.count(
                        PostgresQuery(
                            unsafeSQL:
                                "SELECT count(DISTINCT tableoid) FROM \(table) WHERE tableoid::regclass::text LIKE '%\\_p%'"
                        ))
                        == 4, "\(table)")
                #expect(
                    try await database.count(PostgresQuery(unsafeSQL: "SELECT count(*) FROM \(table)_default")) == 0)
            }
            #expect(try await database.count("SELECT count(*) FROM admin_attempts") == 4)
            // The views were replaced in place: their comments and the reporting role's grant stay.
            #expect(
                try await database.strings(
                    "SELECT obj_description('report_push_outcomes_hourly'::regclass, 'pg_class')"
                ).first?.isEmpty == false)
            #expect(
                try await database.count(
                    "SELECT count(*) FROM information_schema.role_table_grants WHERE grantee = 'livedelivery_reporting' AND table_name = 'report_failed_pushes'"
                )
                    == 1)
            // New rows keep taking ids after the copied ones.
            try await database.owner.query(
                """
                INSERT INTO push_attempts (order_id, activity_key, kind, bundle_id, priority, generation, apns_id,
                                           status, outcome, latency_ms, worker_id)
                VALUES ('o-1', 'a-1', 'update', 'com.example.pizza', 5, 9, gen_random_uuid(), 200, 'delivered', 1.0, 'test')
                """)
            #expect(try await database.count("SELECT count(DISTINCT id) FROM push_attempts") == 5)
        }
    }

    @Test("112 stops, changing nothing and naming it, when a materialized view reads the history")
    func migrationStopsAtAMaterializedView() async throws {
        let database = try await TestDatabase.create(migrate: false)
        try await database.using {
            try await MigrationTests.migrate(database, before: 112)
            try await database.owner.query(
                "CREATE MATERIALIZED VIEW attempts_per_app AS SELECT bundle_id, count(*) FROM push_attempts GROUP BY 1")
            let error = await #expect(throws: LiveDeliveryError.self) {
                try await Migrator(directory: TestDatabase.migrationsDirectory).migrate(
                    client: database.owner, logger: quietLogger)
            }
            #expect(error?.description.contains("public.attempts_per_app") == true)
            #expect(
                try await database.strings("SELECT relkind::text FROM pg_class WHERE relname = 'push_attempts'") == [
                    "r"
                ])
        }
    }
}
