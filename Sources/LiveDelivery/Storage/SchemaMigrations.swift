import Postgres

/// The `schema_migrations` table, which records the migrations applied (``Migrator``), and what
/// migrating needs around it: its session lock, and the roles the migrations grant to.
enum SchemaMigrations {
    /// `pg_advisory_lock` key: "LDMIGRAT" as an int8.
    static let lockKey: Int64 = 0x4C44_4D49_4752_4154

    /// The newest version recorded; 0 on a database never migrated.
    static func newestVersion(_ client: PostgresClient) async throws -> Int {
        do {
            return try await client.query("SELECT coalesce(max(version), 0) FROM schema_migrations").first?
                .decode(Int.self, at: 0) ?? 0
        } catch let error as PostgresError where error.sqlState == .undefinedTable {
            return 0
        }
    }

    /// Serialises migrating processes (a session lock: it spans the migrations' transactions).
    static func lock(on connection: PostgresConnection) async throws {
        try await connection.query("SELECT pg_advisory_lock(\(lockKey))")
    }

    static func unlock(on connection: PostgresConnection) async throws {
        try await connection.query("SELECT pg_advisory_unlock(\(lockKey))")
    }

    /// The versions applied and their files' checksums, creating the table on a fresh database.
    static func applied(on connection: PostgresConnection) async throws -> [Int: String] {
        try await connection.execute(
            unsafeSQL: """
                CREATE TABLE IF NOT EXISTS schema_migrations (
                    version    integer PRIMARY KEY,
                    name       text NOT NULL,
                    checksum   text NOT NULL,
                    applied_at timestamptz NOT NULL DEFAULT now()
                )
                """)
        var done: [Int: String] = [:]
        for row in try await connection.query("SELECT version, checksum FROM schema_migrations") {
            done[try row.decode(Int.self, "version")] = try row.decode(String.self, "checksum")
        }
        return done
    }

    /// Runs `migration`'s file and records it, in one transaction: all of it or nothing.
    static func apply(_ migration: Migrator.Migration, on connection: PostgresConnection) async throws {
        try await connection.execute(unsafeSQL: "BEGIN")
        do {
            try await connection.execute(unsafeSQL: migration.sql)
            try await connection.query(
                """
                INSERT INTO schema_migrations (version, name, checksum)
                VALUES (\(migration.version), \(migration.name), \(migration.checksum))
                """)
            try await connection.execute(unsafeSQL: "COMMIT")
        } catch {
            if !connection.isClosed { try? await connection.execute(unsafeSQL: "ROLLBACK") }
            throw error
        }
    }

    /// Which of `roles` do not exist (sorted), and whether the current login may create them.
    static func missingRoles(
        _ roles: [String], on connection: PostgresConnection
    ) async throws -> (missing: [String], mayCreate: Bool) {
        let row = try await connection.query(
            """
            SELECT coalesce(array_to_string(array_agg(name ORDER BY name), ','), '') AS missing,
                   (SELECT rolsuper OR rolcreaterole FROM pg_catalog.pg_roles WHERE rolname = current_user) AS may_create
            FROM unnest(\(PostgresTextArray(roles))::text[]) AS name
            WHERE NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = name)
            """
        )[0]
        let missing = try row.decode(String.self, "missing")
        return (
            missing.isEmpty ? [] : missing.split(separator: ",").map(String.init),
            try row.decode(Bool.self, "may_create")
        )
    }
}
