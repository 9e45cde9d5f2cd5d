import Foundation
import LiveDelivery
import LiveDeliveryAdmin
import Postgres
import TestSupport
import Testing

/// Least privilege in the database (sql/117; docs/operations.md, Roles and privileges): definer functions
/// that a caller's temporary objects cannot redirect, a worker role without DDL, a reporting role that
/// reads reports only.
@Suite("Roles and privileges", .timeLimit(.minutes(5)))
struct PrivilegeTests {
    /// A SECURITY DEFINER function of the schema, with arguments that make it do its work.
    struct DefinerFunction: Sendable, CustomStringConvertible {
        var signature: String
        var call: String
        var description: String { signature }
    }

    /// Every SECURITY DEFINER function of the schema, and a call of it: a window of the last day for the
    /// reports, today and two days ahead for the upkeep, a year for retention.
    static func definerFunctions(_ database: TestDatabase) async throws -> [DefinerFunction] {
        let rows = try await database.owner.query(
            """
            SELECT p.proname::text AS name, p.oid::regprocedure::text AS signature,
                   pg_get_function_identity_arguments(p.oid) AS arguments
            FROM pg_proc AS p JOIN pg_namespace AS n ON n.oid = p.pronamespace
            WHERE n.nspname = current_schema() AND p.prosecdef
            ORDER BY 1
            """)
        return try rows.map { row in
            let name = try row.decode(String.self, "name")
            let arguments = try row.decode(String.self, "arguments")
            let values =
                arguments.hasSuffix("timestamp with time zone")
                ? "now() - interval '1 day', now()"
                : name.contains("drop_expired") ? "now(), 365" : "now(), 2"
            return DefinerFunction(
                signature: try row.decode(String.self, "signature"), call: "SELECT * FROM \(name)(\(values))")
        }
    }

    /// The attack of a login that may create temporary objects: for every table and view of the schema, a
    /// temporary view of the same name and row type that calls the login's own function, which says whose
    /// rights it runs with. Then every definer function is called. Returns what each call said, when it
    /// failed.
    static func attack(_ database: TestDatabase, functions: [DefinerFunction]) async throws -> [String: String] {
        let relations = try await database.strings(
            """
            SELECT c.relname::text FROM pg_class AS c JOIN pg_namespace AS n ON n.oid = c.relnamespace
            WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p', 'v') AND NOT c.relispartition
            UNION ALL
            SELECT c.relname::text FROM pg_class AS c JOIN pg_namespace AS n ON n.oid = c.relnamespace
            WHERE n.nspname = current_schema() AND c.relkind = 'r' AND c.relname LIKE '%\\_default'
            ORDER BY 1
            """)
        #expect(relations.contains("push_attempts") && relations.contains("report_rollups"))
        return try await database.withLogin(in: ["livedelivery_reporting", "livedelivery_worker"], temporary: true) {
            client in
            try await client.withConnection { connection in
                try await connection.execute(
                    unsafeSQL: """
                        CREATE FUNCTION pg_temp.escalate(shape anyelement) RETURNS SETOF anyelement
                        LANGUAGE plpgsql VOLATILE AS $$
                        BEGIN
                            RAISE EXCEPTION 'escalated: running as %', current_user;
                        END
                        $$
                        """)
                for relation in relations {
                    try await connection.execute(
                        unsafeSQL: """
                            CREATE TEMPORARY VIEW \(relation) AS
                            SELECT * FROM pg_temp.escalate(NULL::\(relation))
                            """)
                    try await connection.execute(unsafeSQL: "GRANT SELECT ON pg_temp.\(relation) TO PUBLIC")
                }
                var failures: [String: String] = [:]
                for function in functions {
                    do {
                        try await connection.execute(unsafeSQL: "BEGIN")
                        try await connection.execute(unsafeSQL: function.call)
                        try await connection.execute(unsafeSQL: "ROLLBACK")
                    } catch let error as PostgresError where error.code == .server {
                        failures[function.signature] = error.message ?? "\(error)"
                        try await connection.execute(unsafeSQL: "ROLLBACK")
                    }
                }
                return failures
            }
        }
    }

    @Test("no definer function can be redirected by a caller's temporary objects (it could, before sql/117)")
    func definerFunctionsCannotBeRedirected() async throws {
        // Before: the schema of the release before, where the reports ran the caller's view as the owner.
        let before = try await TestDatabase.create(migrate: false)
        try await before.using {
            try await Migrator(directory: TestDatabase.migrationsDirectory).migrate(
                client: before.owner, logger: quietLogger, before: 117)
            let failures = try await Self.attack(before, functions: try await Self.definerFunctions(before))
            #expect(
                failures["report_push_outcomes_hourly(timestamp with time zone,timestamp with time zone)"]
                    == "escalated: running as \(PostgresLogin.owner.rawValue)",
                "the attack is the one the fix is for: \(failures)")
        }

        try await TestDatabase.with { database in
            let functions = try await Self.definerFunctions(database)
            #expect(functions.count == 11, "\(functions)")
            // Each pins its path: the catalog, the schema, the caller's temporary schema last.
            let unpinned = try await database.strings(
                """
                SELECT p.oid::regprocedure::text FROM pg_proc AS p JOIN pg_namespace AS n ON n.oid = p.pronamespace
                WHERE n.nspname = current_schema()
                  AND NOT coalesce(p.proconfig @> ARRAY['search_path=pg_catalog, ' || quote_ident(current_schema()) || ', pg_temp'], false)
                """)
            #expect(unpinned.isEmpty, "functions without the pinned search_path: \(unpinned)")
            let failures = try await Self.attack(database, functions: functions)
            #expect(failures.isEmpty, "\(failures)")
        }
    }

    /// Runs `sql` on `client`; the SQLSTATE it failed with, or nil.
    static func sqlState(_ client: PostgresClient, _ sql: String) async throws -> String? {
        do {
            try await client.withTransaction { try await $0.execute(unsafeSQL: sql) }
            return nil
        } catch let error as PostgresError where error.code == .server {
            return error.sqlState?.rawValue
        }
    }

    @Test("the worker's login is neither superuser nor owner, and cannot create, alter or drop anything")
    func workerCannotChangeTheSchema() async throws {
        try await TestDatabase.with { database in
            let worker = try await LoginPrivileges.read(database.client)
            #expect(
                worker == LoginPrivileges(login: PostgresLogin.worker.rawValue, isSuperuser: false, ownsSchema: false))
            #expect(worker.warning == nil)
            let owner = try await LoginPrivileges.read(database.owner)
            #expect(owner.warning?.contains("the owner of the schema") == true)

            let statements = [
                "CREATE TABLE mine (x int)",
                "CREATE TEMPORARY TABLE mine (x int)",
                "CREATE VIEW mine AS SELECT 1",
                "CREATE FUNCTION mine() RETURNS int LANGUAGE sql AS 'SELECT 1'",
                "CREATE INDEX mine ON orders (updated_at)",
                "ALTER TABLE orders ADD COLUMN mine int",
                "ALTER TABLE outbox DISABLE TRIGGER ALL",
                "DROP TABLE dead_letters",
                "DROP VIEW report_failed_pushes",
                "DROP FUNCTION report_failed_pushes(timestamptz, timestamptz)",
                "TRUNCATE inbox",
                "DELETE FROM push_attempts",
                "UPDATE timeline SET codes = '{}'",
                "DELETE FROM orders",
                "INSERT INTO report_rollups VALUES ('mine', now(), now())",
                "SELECT history_partition_create('timeline', current_date + 30)",
                "SELECT * FROM history_partitions_create(current_date + 30, current_date + 31)",
                "CREATE SCHEMA mine",
            ]
            for statement in statements {
                #expect(try await Self.sqlState(database.client, statement) == "42501", "\(statement)")
            }
            // What it is for: the upkeep, through the owner's functions.
            #expect(try await Self.sqlState(database.client, "SELECT history_partitions_upkeep(now(), 3)") == nil)
            #expect(
                try await Self.sqlState(database.client, "SELECT * FROM history_partitions_drop_expired(now(), 30)")
                    == nil)
        }
    }

    @Test(
        "the worker's login runs the upkeep only within its bounds: no wiped history, no thousands of tables (sql/122)")
    func upkeepIsBoundedForTheWorker() async throws {
        try await TestDatabase.with { database in
            let partitions: PostgresQuery = """
                SELECT count(*) FROM pg_inherits
                WHERE inhparent IN ('push_attempts'::regclass, 'timeline'::regclass, 'inbox'::regclass)
                """
            let before = try await database.count(partitions)
            let refused = [
                "SELECT * FROM history_partitions_drop_expired('infinity', 0)",
                "SELECT * FROM history_partitions_drop_expired(now(), 0)",
                "SELECT * FROM history_partitions_drop_expired(now(), 6)",
                "SELECT * FROM history_partitions_drop_expired(now() + interval '400 days', 30)",
                "SELECT * FROM history_partitions_drop_expired(NULL, 30)",
                "SELECT history_partitions_upkeep(now(), 20000)",
                "SELECT history_partitions_upkeep(now(), -5)",
                "SELECT history_partitions_upkeep(now() + interval '30 days', 2)",
                "SELECT history_partitions_upkeep(now() - interval '30 days', 2)",
                "SELECT history_partitions_upkeep('-infinity', 2)",
                "SELECT report_rollups_drop_expired('infinity', 0)",
                "SELECT report_rollups_drop_expired(now(), 1)",
                "SELECT report_rollup_push_outcomes(now(), 1000000)",
            ]
            for statement in refused {
                #expect(try await Self.sqlState(database.client, statement) == "22023", "\(statement)")
            }
            #expect(try await database.count(partitions) == before, "nothing was created or dropped")
            // What a worker asks stays allowed.
            for statement in [
                "SELECT history_partitions_upkeep(now(), 2)", "SELECT * FROM history_partitions_drop_expired(now(), 7)",
                "SELECT report_rollups_drop_expired(now(), 30)", "SELECT report_rollup_push_outcomes(now(), 48)",
            ] {
                #expect(try await Self.sqlState(database.client, statement) == nil, "\(statement)")
            }
            // The owner, who may drop the tables anyway, is not held to them (tests move the clock this way).
            #expect(
                try await Self.sqlState(
                    database.owner, "SELECT history_partitions_upkeep(now() + interval '30 days', 1)")
                    == nil)
            #expect(try await database.count(partitions) == before + 6)
        }
    }

    @Test("a reporting login calls the report functions and reads the report views, and nothing else")
    func reportingReadsReportsOnly() async throws {
        try await TestDatabase.with { database in
            let everything = try await database.strings(
                """
                SELECT c.relname::text FROM pg_class AS c JOIN pg_namespace AS n ON n.oid = c.relnamespace
                WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p', 'v')
                ORDER BY 1
                """)
            let views = everything.filter { $0.hasPrefix("report_") && Report.all.map(\.view).contains($0) }
            #expect(views.count == Report.all.count)
            let functions = try await Self.definerFunctions(database)
            try await database.withLogin(in: ["livedelivery_reporting"]) { client in
                for relation in everything {
                    let state = try await Self.sqlState(client, "SELECT * FROM \(relation) LIMIT 1")
                    #expect(state == (views.contains(relation) ? nil : "42501"), "\(relation)")
                }
                for function in functions {
                    let state = try await Self.sqlState(client, function.call)
                    let isReport = function.signature.hasSuffix("(timestamp with time zone,timestamp with time zone)")
                    #expect(state == (isReport ? nil : "42501"), "\(function)")
                }
                #expect(try await Self.sqlState(client, "CREATE TEMPORARY TABLE mine (x int)") == "42501")
                #expect(try await Self.sqlState(client, "CREATE TABLE mine (x int)") == "42501")
            }
        }
    }
}
