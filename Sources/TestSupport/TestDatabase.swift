import Foundation
import LiveDelivery
package import Logging
package import Postgres

/// A logger that drops everything, for the parts under test.
package let quietLogger = Logger(label: "livedelivery-test") { _ in SwiftLogNoOpLogHandler() }

/// A fresh database (`ld_test_<unique>`) on a test server (the main PostgreSQL unless told), migrated
/// with the project's `sql/` unless told not to; dropped by `drop()`.
package struct TestDatabase: Sendable {
    package let name: String
    package let url: String
    package let client: PostgresClient
    package var serverURL = TestEnvironment.postgresURL

    /// `options` are appended to `CREATE DATABASE` (a locale, say).
    package static func create(
        migrate: Bool = true, serverURL: String = TestEnvironment.postgresURL, options: String = ""
    ) async throws -> TestDatabase {
        let name = "ld_test_" + UUID().uuidString.prefix(12).lowercased().replacingOccurrences(of: "-", with: "")
        let admin = PostgresClient(configuration: try PostgresConfiguration(serverURL), logger: quietLogger)
        do {
            try await admin.withConnection { try await $0.execute(unsafeSQL: "CREATE DATABASE \(name) \(options)") }
        } catch {
            await admin.shutdown()
            throw error
        }
        await admin.shutdown()
        guard var components = URLComponents(string: serverURL) else {
            throw TestSupportError("not a URL: the test server's connection string")
        }
        components.path = "/" + name
        guard let url = components.string else { throw TestSupportError("cannot build the test database's URL") }
        let client = PostgresClient(configuration: try PostgresConfiguration(url), logger: quietLogger)
        let database = TestDatabase(name: name, url: url, client: client, serverURL: serverURL)
        if migrate {
            do {
                try await Migrator(directory: migrationsDirectory).migrate(client: client, logger: quietLogger)
            } catch {
                await database.drop()
                throw error
            }
        }
        return database
    }

    /// Runs `body` with a fresh migrated database, dropped afterwards whatever happened.
    package static func with<Result>(_ body: (TestDatabase) async throws -> Result) async throws -> Result {
        let database = try await create()
        do {
            let result = try await body(database)
            await database.drop()
            return result
        } catch {
            await database.drop()
            throw error
        }
    }

    /// The project's migrations.
    package static var migrationsDirectory: String { TestEnvironment.projectRoot.appendingPathComponent("sql").path }

    package func drop() async {
        await client.shutdown()
        guard let admin = try? PostgresClient(configuration: PostgresConfiguration(serverURL), logger: quietLogger)
        else { return }
        _ = try? await admin.withConnection {
            try await $0.execute(unsafeSQL: "DROP DATABASE IF EXISTS \(name) WITH (FORCE)")
        }
        await admin.shutdown()
    }

    /// Runs `body`, then drops the database whatever happened.
    package func using(_ body: () async throws -> Void) async throws {
        do {
            try await body()
        } catch {
            await drop()
            throw error
        }
        await drop()
    }

    /// The first column of the first row as an integer (0 when there is no row).
    package func count(_ query: PostgresQuery) async throws -> Int {
        let rows = try await client.query(query)
        return try rows.first.map { try $0.decode(Int.self, at: 0) } ?? 0
    }

    /// The first column of every row as text.
    package func strings(_ query: PostgresQuery) async throws -> [String] {
        try await client.query(query).map { try $0.decode(String.self, at: 0) }
    }
}

/// A fixture that could not be set up.
package struct TestSupportError: Error, CustomStringConvertible {
    package let description: String
    package init(_ description: String) { self.description = description }
}
