import APNsSimulator
import Foundation
import LiveDeliveryAdmin
import LiveDeliveryCore
import Postgres
import TestSupport
import Testing

@testable import LiveDelivery

@Suite("Migrations", .timeLimit(.minutes(6)))
struct MigrationTests {
    /// Every migration file the project ships, in order.
    static var shipped: [String] {
        get throws {
            try FileManager.default.contentsOfDirectory(atPath: TestDatabase.migrationsDirectory)
                .filter { $0.hasSuffix(".sql") }.sorted()
        }
    }

    @Test("applying twice changes nothing the second time")
    func idempotent() async throws {
        let database = try await TestDatabase.create(migrate: false)
        try await database.using {
            let migrator = Migrator(directory: TestDatabase.migrationsDirectory)
            let first = try await migrator.migrate(client: database.owner, logger: quietLogger)
            let second = try await migrator.migrate(client: database.owner, logger: quietLogger)
            let shipped = try Self.shipped
            #expect(shipped.first == "001_core_schema.sql")
            #expect(first == shipped)
            #expect(second.isEmpty)
            #expect(try await database.count("SELECT count(*) FROM schema_migrations") == shipped.count)
            #expect(try await database.count("SELECT count(*) FROM orders") == 0)
        }
    }

    @Test("the schema version the worker requires is the newest migration shipped")
    func schemaVersionIsTheNewestFile() throws {
        let newest = try Self.shipped.last.flatMap { Int($0.prefix { $0.isNumber }) }
        #expect(newest == Migrator.schemaVersion)
    }

    @Test("two concurrent migrate calls both succeed and apply each file once")
    func concurrent() async throws {
        let database = try await TestDatabase.create(migrate: false)
        try await database.using {
            let other = PostgresClient(
                configuration: try PostgresConfiguration(database.ownerURL), logger: quietLogger)
            let migrator = Migrator(directory: TestDatabase.migrationsDirectory)
            async let a = migrator.migrate(client: database.owner, logger: quietLogger)
            async let b = migrator.migrate(client: other, logger: quietLogger)
            let (applied1, applied2) = try await (a, b)
            await other.shutdown()
            let shipped = try Self.shipped
            #expect((applied1 + applied2).sorted() == shipped)
            #expect(try await database.count("SELECT count(*) FROM schema_migrations") == shipped.count)
        }
    }

    /// Applies the shipped migrations numbered below `version`.
    static func migrate(_ database: TestDatabase, before version: Int) async throws {
        try await Migrator(directory: TestDatabase.migrationsDirectory).migrate(
            client: database.owner, logger: quietLogger, before: version)
    }

    @Test("110 stops, changing nothing and naming it, when a materialized view reads the identifiers")
    func identifiersBehindAMaterializedView() async throws {
        let database = try await TestDatabase.create(migrate: false)
        try await database.using {
            try await Self.migrate(database, before: 110)
            try await database.owner.withTransaction { connection in
                try await connection.execute(
                    unsafeSQL: """
                        CREATE MATERIALIZED VIEW order_users AS SELECT order_id, user_id FROM orders;
                        CREATE VIEW order_users_count AS SELECT count(*) AS n FROM order_users;
                        """)
            }
            let error = await #expect(throws: LiveDeliveryError.self) {
                try await Migrator(directory: TestDatabase.migrationsDirectory).migrate(
                    client: database.owner, logger: quietLogger)
            }
            #expect(error?.message.contains("public.order_users; drop them, migrate, then create them again") == true)
            #expect(try await database.count("SELECT count(*) FROM schema_migrations WHERE version = 110") == 0)
            #expect(
                try await database.count(
                    """
                    SELECT count(*) FROM pg_attribute
                    WHERE attrelid = 'orders'::regclass AND attname = 'order_id'
                      AND attcollation = 'pg_catalog."C"'::regcollation
                    """) == 0)
            #expect(
                try await database.count(
                    "SELECT count(*) FROM pg_views WHERE viewname IN ('order_users_count', 'report_order_timeline')")
                    == 2)
        }
    }

    @Test(
        """
        under a linguistic default collation, every indexed identifier compares as bytes after 110, and views \
        made before it keep their definition, options, comment and grants
        """
    )
    func identifiersCompareAsBytes() async throws {
        let database = try await TestDatabase.create(
            migrate: false, options: "TEMPLATE template0 LOCALE_PROVIDER icu ICU_LOCALE 'en-US' LOCALE 'C.UTF-8'")
        try await database.using {
            // The schema as it was before 110, and an admin's views on it: one in another schema that
            // reads a view created after it (so it cannot be created again first), with options, a
            // comment and a grant.
            try await Self.migrate(database, before: 110)
            try await database.owner.withTransaction { connection in
                try await connection.execute(
                    unsafeSQL: """
                        INSERT INTO orders (order_id, user_id) VALUES ('b', 'u'), ('B', 'u'), ('a', 'u'), ('_', NULL);
                        CREATE SCHEMA ops;
                        CREATE VIEW ops.open_orders AS SELECT NULL::text AS order_id;
                        CREATE VIEW admin_orders AS SELECT order_id, user_id FROM orders;
                        CREATE OR REPLACE VIEW ops.open_orders WITH (security_barrier) AS
                            SELECT order_id FROM admin_orders WHERE user_id IS NOT NULL;
                        COMMENT ON VIEW ops.open_orders IS 'orders with a user';
                        GRANT SELECT ON ops.open_orders TO livedelivery_reporting;
                        """)
            }
            #expect(
                try await database.strings("SELECT order_id FROM orders ORDER BY order_id") == ["_", "a", "b", "B"],
                "the database's own collation is linguistic")

            let applied = try await Migrator(directory: TestDatabase.migrationsDirectory).migrate(
                client: database.owner, logger: quietLogger)
            #expect(applied.first == "110_identifiers_compare_as_bytes.sql")

            let linguistic = try await database.strings(
                """
                SELECT DISTINCT t.relname || '.' || a.attname
                FROM pg_index AS x
                JOIN pg_class AS t ON t.oid = x.indrelid
                JOIN pg_attribute AS a ON a.attrelid = t.oid AND a.attnum = ANY (x.indkey)
                WHERE t.relnamespace = current_schema()::regnamespace AND t.relname <> 'dead_letters'
                  AND a.atttypid = 'text'::regtype AND a.attcollation <> 'pg_catalog."C"'::regcollation
                ORDER BY 1
                """)
            #expect(linguistic == [], "indexed text columns of the worker's tables")
            // Another text: the one above is prepared on this connection, and the column's new collation
            // made its plan stale (the client prepares it again after one failure; see PostgresServerTests).
            #expect(
                try await database.strings("SELECT order_id AS id FROM orders ORDER BY order_id")
                    == ["B", "_", "a", "b"])
            #expect(
                try await database.count(
                    """
                    SELECT count(*) FROM pg_constraint
                    WHERE conrelid = 'activities'::regclass AND contype = 'f' AND confrelid = 'orders'::regclass
                    """) == 1, "the activities' foreign key to orders")

            #expect(
                try await database.strings("SELECT order_id FROM ops.open_orders ORDER BY order_id")
                    == ["B", "a", "b"])
            let view = try #require(
                try await database.owner.query(
                    """
                    SELECT array_to_string(c.reloptions, ',') AS options, obj_description(c.oid, 'pg_class') AS comment,
                           has_table_privilege('livedelivery_reporting', c.oid, 'SELECT') AS granted
                    FROM pg_class AS c WHERE c.oid = 'ops.open_orders'::regclass
                    """
                ).first)
            #expect(try view.decode(String?.self, "options") == "security_barrier=true")
            #expect(try view.decode(String?.self, "comment") == "orders with a user")
            #expect(try view.decode(Bool.self, "granted"))
            #expect(
                try await database.count(
                    "SELECT count(*) FROM pg_views WHERE schemaname = current_schema() AND viewname LIKE 'report\\_%'")
                    == Report.all.count)
        }
    }

    @Test(
        """
        115 folds a live deployment's decisions into one timeline row per write; the reports, their window \
        functions and an admin's own view show the same rows
        """
    )
    func timelineOneRowPerWrite() async throws {
        let database = try await TestDatabase.create(migrate: false)
        try await database.using {
            try await Self.migrate(database, before: 115)
            // Three writes of one order (an event with an alert, a give-up recorded with its attempt, a
            // sweep that ends the activity) and an operator's retry of another, as the previous release
            // wrote them: one row per decision.
            try await database.owner.withTransaction { connection in
                try await connection.execute(
                    unsafeSQL: """
                        INSERT INTO orders (order_id, user_id) VALUES ('o-1', 'u-1'), ('o-2', 'u-2');
                        INSERT INTO activities (order_id, activity_key, bundle_id, state, created_at)
                        VALUES ('o-1', 'device:d1', 'com.example.pizza', 'ended', now() - interval '1 hour'),
                               ('o-2', 'device:d2', 'com.example.pizza', 'active', now() - interval '1 hour');
                        INSERT INTO push_attempts (order_id, activity_key, kind, bundle_id, priority, generation, apns_id,
                                                   status, outcome, reason, latency_ms, worker_id, attempted_at)
                        VALUES ('o-1', 'device:d1', 'update', 'com.example.pizza', 10, 1, gen_random_uuid(), 413,
                                'payload_fault', 'PayloadTooLarge', 1.0, 'w', now() - interval '40 minutes');
                        INSERT INTO timeline (order_id, activity_key, kind, code, message, at) VALUES
                            ('o-1', NULL, 'event', 'status_changed', 'placed → out_for_delivery', now() - interval '50 minutes'),
                            ('o-1', 'device:d1', 'event', 'update_planned', 'update', now() - interval '50 minutes'),
                            ('o-1', 'device:d1', 'event', 'alert', 'alert: on_the_way', now() - interval '50 minutes'),
                            ('o-1', 'device:d1', 'event', 'priority', 'priority 10', now() - interval '50 minutes'),
                            ('o-1', 'device:d1', 'outcome', 'push_dropped', 'dropped: PayloadTooLarge', now() - interval '40 minutes'),
                            ('o-1', 'device:d1', 'sweep', 'sweep_lifetime', 'lifetime', now() - interval '30 minutes'),
                            ('o-1', 'device:d1', 'sweep', 'end_planned', 'end', now() - interval '30 minutes'),
                            ('o-2', NULL, 'sweep', 'operator_retry', 'retry', now() - interval '20 minutes'),
                            ('o-2', 'device:d2', 'sweep', 'update_planned', 'update', now() - interval '20 minutes');
                        CREATE VIEW admin_alerts AS SELECT order_id, activity_key, code, message FROM timeline WHERE code = 'alert';
                        """)
            }
            let window = "now() - interval '1 day', now() + interval '1 day'"
            let reports = [
                "SELECT concat_ws(' ', source, activity_key, code, detail) FROM report_order_timeline ORDER BY order_id, at, rank, sort_id",
                "SELECT concat_ws(' ', id, decision, message) FROM report_failed_pushes ORDER BY id",
                "SELECT concat_ws(' ', id, decision, message) FROM report_failed_pushes(\(window)) ORDER BY id",
                "SELECT concat_ws(' ', app, reason, actions, orders) FROM report_sweeper_actions ORDER BY 1",
                "SELECT concat_ws(' ', app, reason, actions, orders) FROM report_sweeper_actions(\(window)) ORDER BY 1",
                "SELECT concat_ws(' ', activity_key, alerts_planned, first_alert_at) FROM report_alerts_per_activity ORDER BY 1",
                "SELECT concat_ws(' ', activity_key, alerts_planned, first_alert_at) FROM report_alerts_per_activity(\(window)) ORDER BY 1",
                "SELECT concat_ws(' ', order_id, activity_key, code, message) FROM admin_alerts",
            ]
            var before: [[String]] = []
            for report in reports { before.append(try await database.strings(PostgresQuery(unsafeSQL: report))) }

            let applied = try await Migrator(directory: TestDatabase.migrationsDirectory).migrate(
                client: database.owner, logger: quietLogger)
            #expect(applied.first == "115_timeline_one_row_per_write.sql")
            for (report, rows) in zip(reports, before) {
                #expect(try await database.strings(PostgresQuery(unsafeSQL: report)) == rows, "\(report)")
            }
            #expect(before[0].count == 10 && before[1].count == 1 && before[3].count == 2 && before[7].count == 1)
            #expect(
                try await database.strings(
                    "SELECT concat_ws(' ', order_id, kind, array_to_string(codes, ',')) FROM timeline ORDER BY id")
                    == [
                        "o-1 event status_changed,update_planned,alert,priority", "o-1 outcome push_dropped",
                        "o-1 sweep sweep_lifetime,end_planned", "o-2 sweep operator_retry,update_planned",
                    ])
            // The views were replaced in place: the reporting role's grant stays.
            #expect(
                try await database.count(
                    "SELECT count(*) FROM information_schema.role_table_grants WHERE grantee = 'livedelivery_reporting' AND table_name = 'report_order_timeline'"
                )
                    == 1)
        }
    }

    @Test("115 stops, changing nothing and naming it, when a materialized view reads the timeline")
    func timelineBehindAMaterializedView() async throws {
        let database = try await TestDatabase.create(migrate: false)
        try await database.using {
            try await Self.migrate(database, before: 115)
            try await database.owner.query(
                "CREATE MATERIALIZED VIEW codes_per_day AS SELECT date_trunc('day', at) AS day, code, count(*) FROM timeline GROUP BY 1, 2"
            )
            let error = await #expect(throws: LiveDeliveryError.self) {
                try await Migrator(directory: TestDatabase.migrationsDirectory).migrate(
                    client: database.owner, logger: quietLogger)
            }
            #expect(error?.message.contains("public.codes_per_day; drop them, migrate, then create them again") == true)
            #expect(try await database.count("SELECT count(*) FROM schema_migrations WHERE version = 115") == 0)
            #expect(
                try await database.count(
                    "SELECT count(*) FROM information_schema.columns WHERE table_name = 'timeline' AND column_name = 'code'"
                )
                    == 1)
        }
    }

    @Test("116 moves each accepted update's id from the order's list to the row of the activity it was pending for")
    func acceptedUpdatesMoveToActivities() async throws {
        let database = try await TestDatabase.create(migrate: false)
        try await database.using {
            try await Self.migrate(database, before: 116)
            let accepted = "0b1e6f3c-2d4a-4c5e-9f10-aa11bb22cc33"
            try await database.owner.withTransaction { connection in
                try await connection.execute(
                    unsafeSQL: """
                        INSERT INTO orders (order_id, state, delivered) VALUES
                            ('o-1', '{"activities": [{"key": "device:d1", "pending": {"apnsID": "\(accepted)"}},
                                                     {"key": "device:d2", "pending": {"apnsID": "9d2c1b0a-0000-4000-8000-000000000002"}},
                                                     {"key": "device:d3"}]}', ARRAY['\(accepted)']::uuid[]),
                            ('o-2', '{"activities": [{"key": "device:d4", "pending": {"apnsID": "9d2c1b0a-0000-4000-8000-000000000004"}}]}', NULL);
                        INSERT INTO activities (order_id, activity_key, state) VALUES
                            ('o-1', 'device:d1', 'active'), ('o-1', 'device:d2', 'active'), ('o-1', 'device:d3', 'active'),
                            ('o-2', 'device:d4', 'active');
                        """)
            }
            try await Migrator(directory: TestDatabase.migrationsDirectory).migrate(
                client: database.owner, logger: quietLogger)
            #expect(
                try await database.strings(
                    "SELECT activity_key || ' ' || coalesce(delivered_apns_id::text, '-') FROM activities ORDER BY 1")
                    == ["device:d1 \(accepted)", "device:d2 -", "device:d3 -", "device:d4 -"])
            #expect(
                try await database.count(
                    "SELECT count(*) FROM information_schema.columns WHERE table_name = 'orders' AND column_name = 'delivered'"
                )
                    == 0)
        }
    }

    @Test("an upgrade rewrites the order states stored as JSON before 118 in the binary form, to the same values")
    func jsonDocumentsRewritten() async throws {
        let file = TestEnvironment.projectRoot.appendingPathComponent("Tests/Fixtures/stored-json-documents.txt")
        let states = try String(contentsOf: file, encoding: .utf8).split(separator: "\n")
            .filter { $0.hasPrefix("state ") }.map { String($0.split(separator: " ", maxSplits: 2)[2]) }
        #expect(states.count > 2)
        let database = try await TestDatabase.create(migrate: false)
        try await database.using {
            try await Self.migrate(database, before: 118)
            for (index, state) in states.enumerated() {
                try await database.owner.query(
                    "INSERT INTO orders (order_id, state) VALUES (\("legacy-\(index)"), \(state)::jsonb)")
            }
            try await Migrator(directory: TestDatabase.migrationsDirectory).migrate(
                client: database.owner, logger: quietLogger)

            let rows = try await database.owner.query("SELECT order_id, state FROM orders ORDER BY order_id")
            #expect(rows.count == states.count)
            for row in rows {
                let index = try #require(Int(try row.decode(String.self, "order_id").dropFirst("legacy-".count)))
                let document = try row.decode([UInt8].self, "state")
                #expect(document.first == StoredState.version, "rewritten in the binary form")
                #expect(
                    try StoredState.decode(document) == StoredJSON.decode(OrderState.self, Array(states[index].utf8)))
            }
            // Nothing is left to rewrite: a second run finds nothing.
            let again = try await database.owner.withConnection { connection in
                try await StoredDocumentUpgrade.run(on: connection, logger: quietLogger)
            }
            #expect(again == StoredDocumentUpgrade.Summary())
        }
    }

    @Test("a migration changed after it was applied is refused")
    func changedFile() async throws {
        let database = try await TestDatabase.create()
        try await database.using {
            let folder = FileManager.default.temporaryDirectory.appendingPathComponent(
                TestEnvironment.uniqueName("sql"))
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: folder) }
            try Data("CREATE TABLE changed (id int);".utf8).write(
                to: folder.appendingPathComponent("001_core_schema.sql"))
            await #expect(throws: LiveDeliveryError.self) {
                try await Migrator(directory: folder.path).migrate(
                    client: database.owner, logger: quietLogger)
            }
        }
    }
}

@Suite("Consumer batches", .timeLimit(.minutes(6)))
struct BatchTests {
    @Test(
        "duplicates and an out-of-order event converge on the newest state; a redelivery changes nothing"
    )
    func duplicatesAndOrder() async throws {
        try await withWorker { harness, worker in
            let order = TestEnvironment.uniqueName("A")
            let token = Events.token()
            let newest = Events.status(order, "out_for_delivery", sequence: 3, courier: "Sam")
            let batch = [
                Events.status(order, "confirmed", sequence: 1),
                newest,
                Events.activityToken(order, activity: "act-1", token: token),
                Events.status(order, "preparing", sequence: 2),  // older than the newest: arrives late
                newest,  // duplicate within the batch
            ]
            let first = try await worker.processor.process(batch)
            #expect(first.applied == 4)
            #expect(first.duplicates == 1)
            #expect(
                try await harness.database.strings("SELECT status FROM orders WHERE order_id = \(order)")
                    == ["out_for_delivery"])
            #expect(
                try await harness.database.count("SELECT count(*) FROM outbox WHERE order_id = \(order)")
                    == 1)
            #expect(try await harness.database.count("SELECT count(*) FROM inbox") == 4)

            // Redelivered: nothing changes, nothing is planned.
            let stateBefore = try await harness.database.strings(
                "SELECT state::text FROM orders WHERE order_id = \(order)")
            let generationBefore = try await harness.database.count(
                "SELECT generation FROM outbox WHERE order_id = \(order)")
            let again = try await worker.processor.process(batch)
            #expect(again.applied == 0)
            #expect(again.duplicates == 5)
            #expect(
                try await harness.database.strings(
                    "SELECT state::text FROM orders WHERE order_id = \(order)") == stateBefore)
            #expect(
                try await harness.database.count("SELECT generation FROM outbox WHERE order_id = \(order)")
                    == generationBefore)

            // The dispatcher sends the newest state once.
            try await eventually("the push is delivered") {
                try await worker.dispatcher.dispatchOnce()
                return try await harness.database.count("SELECT count(*) FROM outbox") == 0
            }
            let pushes = harness.simulator.pushes(token: token)
            #expect(pushes.count == 1)
            let state = try contentState(try #require(pushes.first))
            #expect(state["currentStep"] as? String == "delivering")
            #expect(state["driverName"] as? String == "Sam")
            #expect(
                try await harness.database.count(
                    "SELECT count(*) FROM push_attempts WHERE outcome = 'delivered'") == 1)
            _ = try await worker.processor.process(batch)
            #expect(try await worker.dispatcher.dispatchOnce() == 0)
            #expect(harness.simulator.pushes(token: token).count == 1)
        }
    }

    @Test(
        """
        a migration that changes the columns the worker's statements return (as sql/110 did) fails no batch \
        and no push record: each stale plan is prepared again
        """
    )
    func stalePlansAfterAMigration() async throws {
        // One connection, so that the second batch runs on the plans the first prepared.
        try await withWorker(adjust: { $0.postgres.poolSize = 1 }) { harness, worker in
            let order = TestEnvironment.uniqueName("S")
            let token = Events.token()
            let first = try await worker.processor.process([
                Events.status(order, "confirmed", sequence: 1),
                Events.activityToken(order, activity: "act-1", token: token),
            ])
            #expect(first.applied == 2)
            #expect(try await worker.dispatcher.dispatchOnce() == 1)

            // Under the worker's prepared statements, the columns several of them return change collation
            // (the report views that read them go first, as 110 drops and creates them again), by the owner.
            try await harness.database.owner.withTransaction { connection in
                try await connection.execute(
                    unsafeSQL: """
                        DO $$
                        DECLARE v text;
                        BEGIN
                            FOR v IN SELECT viewname FROM pg_views WHERE schemaname = current_schema() LOOP
                                EXECUTE format('DROP VIEW IF EXISTS %I CASCADE', v);
                            END LOOP;
                        END
                        $$;
                        ALTER TABLE inbox ALTER COLUMN event_id TYPE text COLLATE "POSIX";
                        ALTER TABLE orders ALTER COLUMN order_id TYPE text COLLATE "POSIX";
                        ALTER TABLE activities ALTER COLUMN order_id TYPE text COLLATE "POSIX";
                        ALTER TABLE outbox ALTER COLUMN order_id TYPE text COLLATE "POSIX",
                                           ALTER COLUMN activity_key TYPE text COLLATE "POSIX";
                        """)
            }

            let other = TestEnvironment.uniqueName("S")
            let otherToken = Events.token()
            let second = try await worker.processor.process([
                Events.status(order, "preparing", sequence: 2),
                Events.status(other, "confirmed", sequence: 1),
                Events.activityToken(other, activity: "act-2", token: otherToken),
            ])
            #expect(second.applied == 3)
            #expect(
                try await harness.database.strings(
                    "SELECT status FROM orders WHERE order_id IN (\(order), \(other)) ORDER BY status")
                    == ["confirmed", "preparing"])
            #expect(try await harness.database.count("SELECT count(*) FROM inbox") == 5)

            // The dispatcher sends the new activity's start (and the first order's update if it is due
            // already) and records the answers in the same call, on plans it prepared before: no row is
            // left leased.
            #expect(try await worker.dispatcher.dispatchOnce() >= 1)
            #expect(harness.simulator.pushes(token: otherToken).count == 1)
            #expect(
                try await harness.database.count(
                    "SELECT count(*) FROM push_attempts WHERE order_id = \(other) AND outcome = 'delivered'") == 1)
            #expect(try await harness.database.count("SELECT count(*) FROM outbox WHERE lease_owner IS NOT NULL") == 0)
        }
    }

    @Test("malformed input lands in dead_letters with its reason; the rest of the batch is applied")
    func malformed() async throws {
        try await withWorker { harness, worker in
            let order = TestEnvironment.uniqueName("B")
            let badJSON = InboundMessage(
                body: Array("{not json".utf8), routingKey: "order.status", messageID: "bad-1")
            let badStatus = InboundMessage(
                body: Array(
                    """
                    {"type":"order.status","version":1,"event_id":"bad-2","occurred_at":"2026-11-21T10:04:05Z",\
                    "order_id":"\(order)","user_id":"u","status":"teleported"}
                    """.utf8), routingKey: "order.status", messageID: "bad-2")
            let outcome = try await worker.processor.process([
                badJSON, Events.status(order, "confirmed", sequence: 1), badStatus,
            ])
            #expect(outcome.rejected == 2)
            #expect(outcome.applied == 1)
            #expect(
                try await harness.database.strings("SELECT reason FROM dead_letters ORDER BY id") == [
                    "malformed_json", "unknown_status",
                ])
            #expect(
                try await harness.database.strings("SELECT status FROM orders WHERE order_id = \(order)")
                    == ["confirmed"])
            // Redelivered, the same refused messages are not recorded twice.
            _ = try await worker.processor.process([badJSON, badStatus])
            #expect(try await harness.database.count("SELECT count(*) FROM dead_letters") == 2)
        }
    }
}

@Suite("Horizontal scale", .timeLimit(.minutes(6)))
struct ScaleTests {
    @Test(
        "two workers applying shuffled, overlapping batches of the same orders at once converge without errors"
    )
    func concurrentBatches() async throws {
        try await withWorker { harness, worker in
            let second = try harness.worker()
            var events: [InboundMessage] = []
            var orders: [String] = []
            for index in 0..<30 {
                let order = TestEnvironment.uniqueName("S\(index)")
                orders.append(order)
                let user = "user-\(index % 4)"  // several orders per user: user locks overlap too
                events.append(Events.status(order, "confirmed", sequence: 1, user: user))
                events.append(Events.activityToken(order, activity: "act-\(order)", token: Events.token()))
                events.append(Events.status(order, "preparing", sequence: 2, user: user))
                events.append(Events.status(order, "delivered", sequence: 3, user: user))
            }
            // Every event reaches both workers (at-least-once), in different orders and batch cuts.
            let a = events.shuffled()
            let b = events.shuffled()
            async let first: Void = {
                for batch in stride(from: 0, to: a.count, by: 17).map({
                    Array(a[$0..<min($0 + 17, a.count)])
                }) {
                    _ = try await worker.processor.process(batch)
                }
            }()
            async let other: Void = {
                for batch in stride(from: 0, to: b.count, by: 11).map({
                    Array(b[$0..<min($0 + 11, b.count)])
                }) {
                    _ = try await second.processor.process(batch)
                }
            }()
            _ = try await (first, other)
            await second.client.shutdown()
            await second.dispatcher.sender.shutdown()
            #expect(try await harness.database.count("SELECT count(*) FROM inbox") == events.count)
            #expect(
                try await harness.database.count(
                    "SELECT count(*) FROM orders WHERE order_id = ANY(\(orders)::text[]) AND status = 'delivered'"
                ) == 30)
            #expect(try await harness.database.count("SELECT count(*) FROM outbox") <= 30)
        }
    }
}
