import Foundation
package import Logging
package import Postgres

/// Applies the numbered SQL files of a folder (`001_core_schema.sql`, …) in order.
///
/// - Each file runs in its own transaction together with its `schema_migrations` row, so a file is
///   applied completely or not at all.
/// - A session advisory lock serialises concurrent callers (two processes starting at once): the
///   second waits, then finds everything applied.
/// - Idempotent: applied files are skipped; a file changed after it was applied is an error.
package struct Migrator: Sendable {
    package struct Migration: Sendable, Hashable {
        package var version: Int
        package var name: String
        package var sql: String
        package var checksum: String
    }

    /// The schema version this release's statements are written for: the newest file in `sql/`
    /// (a test keeps the two in step). `livedelivery run` refuses any other.
    package static let schemaVersion = 128

    /// The newest migration recorded in `schema_migrations`; 0 on a database never migrated.
    package static func appliedVersion(_ client: PostgresClient) async throws -> Int {
        try await SchemaMigrations.newestVersion(client)
    }

    package let directory: String

    package init(directory: String) { self.directory = directory }

    /// The migration files, in version order.
    package func migrations() throws(LiveDeliveryError) -> [Migration] {
        let names: [String]
        do {
            names = try FileManager.default.contentsOfDirectory(atPath: directory)
        } catch {
            throw LiveDeliveryError(.migration, "cannot list the migrations folder \(directory)")
        }
        var migrations: [Migration] = []
        for name in names.sorted() where name.hasSuffix(".sql") {
            guard let version = Int(name.prefix { $0.isNumber }), name.first?.isNumber == true else {
                throw LiveDeliveryError(.migration, "\(name) does not start with a version number (NNN_name.sql)")
            }
            let path = URL(fileURLWithPath: directory).appendingPathComponent(name).path
            guard let data = FileManager.default.contents(atPath: path) else {
                throw LiveDeliveryError(.migration, "cannot read \(path)")
            }
            if migrations.contains(where: { $0.version == version }) {
                throw LiveDeliveryError(.migration, "two migrations have version \(version)")
            }
            migrations.append(
                Migration(
                    version: version, name: name, sql: String(decoding: data, as: UTF8.self),
                    checksum: Self.checksum(Array(data))))
        }
        return migrations.sorted { $0.version < $1.version }
    }

    /// Applies what is missing; returns the names applied now (empty when all were applied). With
    /// `before`, only the files numbered below it: the schema of an earlier release, for upgrade tests
    /// and benchmarks.
    @discardableResult
    package func migrate(client: PostgresClient, logger: Logger, before version: Int? = nil) async throws -> [String] {
        let migrations = try migrations().filter { $0.version < (version ?? .max) }
        return try await client.withConnection { connection in
            try await SchemaMigrations.lock(on: connection)
            do {
                let applied = try await apply(migrations, on: connection, logger: logger)
                // Documents an earlier release stored as JSON, rewritten once, at an upgrade.
                if !applied.isEmpty, version == nil {
                    _ = try await StoredDocumentUpgrade.run(on: connection, logger: logger)
                }
                // The history tables' partitions for today and the days ahead (sql/112), so that a
                // migrated database takes rows before any worker runs.
                if try await HistoryPartitions.known(on: connection) {
                    _ = try await HistoryPartitions.upkeep(now: Date(), on: connection)
                }
                try await SchemaMigrations.unlock(on: connection)
                return applied
            } catch {
                if !connection.isClosed { try? await SchemaMigrations.unlock(on: connection) }
                throw error
            }
        }
    }

    private func apply(
        _ migrations: [Migration], on connection: PostgresConnection, logger: Logger
    ) async throws
        -> [String]
    {
        let done = try await SchemaMigrations.applied(on: connection)
        if migrations.contains(where: { done[$0.version] == nil }) { try await checkRoles(on: connection) }
        var applied: [String] = []
        for migration in migrations {
            if let checksum = done[migration.version] {
                guard checksum == migration.checksum else {
                    throw LiveDeliveryError(
                        .migration, "\(migration.name) was changed after it was applied; add a new migration instead")
                }
                continue
            }
            do {
                try await SchemaMigrations.apply(migration, on: connection)
            } catch {
                if let error = error as? PostgresError, error.code == .server {
                    var text = "\(migration.name) failed: \(error.sqlState?.description ?? "")"
                    // A migration's own RAISE EXCEPTION (P0001) says what to do; other server messages
                    // may quote row values, so only their SQLSTATE is repeated.
                    if error.sqlState?.rawValue == "P0001", let message = error.message { text += ": \(message)" }
                    throw LiveDeliveryError(.migration, text)
                }
                throw error
            }
            logger.info("migration applied", metadata: [LiveDeliveryLoggingKeys.migration: "\(migration.name)"])
            applied.append(migration.name)
        }
        return applied
    }

    /// The group roles the migrations grant to (sql/090, sql/117) are cluster-wide, and an administrator
    /// creates them (docs/operations.md, Roles and privileges) unless the migrating login may create roles.
    private func checkRoles(on connection: PostgresConnection) async throws {
        let (missing, mayCreate) = try await SchemaMigrations.missingRoles(
            ["livedelivery_reporting", "livedelivery_worker"], on: connection)
        guard !missing.isEmpty, !mayCreate else { return }
        throw LiveDeliveryError(
            .migration,
            "the roles \(missing.joined(separator: ", ")) do not exist, and this login may not create roles: an "
                + "administrator creates them once per server (CREATE ROLE livedelivery_worker NOLOGIN; CREATE ROLE "
                + "livedelivery_reporting NOLOGIN; docs/operations.md, Roles and privileges), then migrate again")
    }

    /// FNV-1a 64 of the file (changes are what matters, not cryptographic strength).
    static func checksum(_ bytes: [UInt8]) -> String {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in bytes { hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01b3 }
        return String(hash, radix: 16)
    }
}
