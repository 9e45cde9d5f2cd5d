import Foundation
import LiveDelivery
import LiveDeliveryAdmin
import Postgres
import TestSupport
import Testing

@Suite("The reporting role and the report views", .timeLimit(.minutes(6)))
struct ReportingRoleTests {
    static let role = "livedelivery_reporting"

    /// Runs `sql` as a login in the reporting role; returns the SQLSTATE it failed with, or nil.
    func asReportingRole(_ database: TestDatabase, _ sql: String) async throws -> SQLState? {
        try await database.withLogin(in: [Self.role]) { client in
            do {
                try await client.withConnection { try await $0.execute(unsafeSQL: sql) }
                return nil
            } catch let error as PostgresError where error.code == .server {
                return error.sqlState
            }
        }
    }

    @Test("the migration creates a NOLOGIN role that can read every report_ view")
    func readsViews() async throws {
        try await TestDatabase.with { database in
            let role = try await database.client.query(
                "SELECT rolcanlogin, rolsuper FROM pg_roles WHERE rolname = \(Self.role)")
            let row = try #require(role.first)
            #expect(try row.decode(Bool.self, "rolcanlogin") == false)
            #expect(try row.decode(Bool.self, "rolsuper") == false)

            let views = try await database.strings(
                "SELECT viewname::text FROM pg_views WHERE schemaname = current_schema() AND viewname LIKE 'report\\_%' ORDER BY 1"
            )
            #expect(views == Report.all.map(\.view).sorted(), "the CLI's catalogue lists every view")
            for view in views {
                #expect(try await asReportingRole(database, "SELECT * FROM \(view)") == nil, "\(view)")
            }
        }
    }

    @Test("the reporting role can call every window function and read its comment; the functions are the views' rows")
    func callsWindowFunctions() async throws {
        try await TestDatabase.with { database in
            for report in Report.all where report.hasWindowFunction {
                #expect(
                    try await asReportingRole(
                        database, "SELECT * FROM \(report.view)(now() - interval '1 day', now())") == nil,
                    "\(report.view)")
                let described = try await database.withLogin(in: [Self.role]) { client in
                    try await client.query(
                        PostgresQuery(
                            unsafeSQL: """
                                SELECT coalesce(obj_description('\(report.view)(timestamptz, timestamptz)'::regprocedure,
                                                                'pg_proc'), '') AS comment
                                """))
                }
                #expect(try described[0].decode(String.self, "comment").contains("[since, until)"), "\(report.view)")
            }
            // Only the report functions: the partition upkeep and retention stay the owner's.
            #expect(
                try await asReportingRole(database, "SELECT * FROM history_partitions_upkeep(now(), 1)")
                    == SQLState(rawValue: "42501"))
        }
    }

    @Test("every report view and every one of its columns has a comment the reporting role can read")
    func everyViewAndColumnIsDescribed() async throws {
        try await TestDatabase.with { database in
            let missing: [String] = try await database.withLogin(in: [Self.role]) { client in
                let rows = try await client.query(
                    """
                    WITH views AS (
                        SELECT c.oid, c.relname FROM pg_class AS c
                        JOIN pg_namespace AS n ON n.oid = c.relnamespace AND n.nspname = current_schema()
                        WHERE c.relkind = 'v' AND c.relname LIKE 'report\\_%'
                    )
                    SELECT relname::text FROM views WHERE coalesce(obj_description(oid, 'pg_class'), '') = ''
                    UNION ALL
                    SELECT v.relname || '.' || a.attname FROM views AS v
                    JOIN pg_attribute AS a ON a.attrelid = v.oid AND a.attnum > 0 AND NOT a.attisdropped
                    WHERE coalesce(col_description(v.oid, a.attnum), '') = ''
                    ORDER BY 1
                    """)
                return try rows.map { try $0.decode(String.self, at: 0) }
            }
            #expect(missing.isEmpty, "without a comment: \(missing)")
            let described = try await database.count(
                """
                SELECT count(*) FROM pg_class AS c JOIN pg_attribute AS a ON a.attrelid = c.oid AND a.attnum > 0
                WHERE c.relkind = 'v' AND c.relname LIKE 'report\\_%' AND col_description(c.oid, a.attnum) <> ''
                """)
            #expect(described >= 100)
        }
    }

    @Test("the role cannot read or write any table, nor write through a view")
    func cannotTouchTables() async throws {
        try await TestDatabase.with { database in
            let tables = try await database.strings(
                "SELECT tablename::text FROM pg_tables WHERE schemaname = current_schema() ORDER BY 1")
            #expect(tables.contains("inbox") && tables.contains("dead_letters") && tables.contains("schema_migrations"))
            for table in tables {
                #expect(try await asReportingRole(database, "SELECT * FROM \(table)") == SQLState("42501"), "\(table)")
                #expect(
                    try await asReportingRole(database, "DELETE FROM \(table)") == SQLState("42501"), "\(table)")
            }
            #expect(
                try await asReportingRole(
                    database,
                    "INSERT INTO inbox (event_id, event_type, occurred_at) VALUES ('x', 'order.status', now())")
                    == SQLState("42501"))
            // report_dead_letters is a simple (auto-updatable) view: writing through it is refused too.
            #expect(
                try await asReportingRole(database, "UPDATE report_dead_letters SET replayed_at = now()")
                    == SQLState("42501"))
            #expect(try await asReportingRole(database, "DELETE FROM report_dead_letters") == SQLState("42501"))
            #expect(
                try await asReportingRole(database, "CREATE TABLE report_mine (x int)") == SQLState("42501"))
        }
    }

    @Test("the migration is idempotent: running its SQL again (role and grants exist) succeeds")
    func idempotent() async throws {
        // On the schema it was written for: later migrations change the tables its first views read.
        let database = try await TestDatabase.create(migrate: false)
        try await database.using {
            let migrator = Migrator(directory: TestDatabase.migrationsDirectory)
            let file = try #require(try migrator.migrations().first { $0.name.hasSuffix("_reports.sql") })
            try await migrator.migrate(client: database.owner, logger: quietLogger, before: file.version + 1)
            try await database.owner.withTransaction { try await $0.execute(unsafeSQL: file.sql) }
            try await database.owner.withTransaction { try await $0.execute(unsafeSQL: file.sql) }
            #expect(try await asReportingRole(database, "SELECT * FROM report_activities_by_state") == nil)
        }
    }

    @Test("databases migrated at the same time on one server all get the views and the grants")
    func concurrentMigrations() async throws {
        let databases = try await withThrowingTaskGroup(of: TestDatabase.self) { group in
            for _ in 0..<3 { group.addTask { try await TestDatabase.create() } }
            var databases: [TestDatabase] = []
            for try await database in group { databases.append(database) }
            return databases
        }
        for database in databases {
            #expect(try await asReportingRole(database, "SELECT * FROM report_failed_pushes") == nil)
            await database.drop()
        }
    }
}
