import Foundation
import LiveDelivery
package import Logging
package import Postgres

/// A logger that drops everything, for the parts under test.
package let quietLogger = Logger(label: "livedelivery-test") { _ in SwiftLogNoOpLogHandler() }

/// A fresh database (`ld_test_<unique>`) on a test server (the main PostgreSQL unless told), migrated
/// with the project's `sql/` unless told not to; dropped by `drop()`.
///
/// Each role does its own job, as in production (docs/operations.md, Roles and privileges): the superuser
/// creates and drops the database, the owner owns it and migrates it, and `client`, what the code under
/// test is given, is the worker's login. `owner` is for fixtures that set up what the worker may not.
package struct TestDatabase: Sendable {
    package let name: String
    /// The worker's login on this database.
    package let url: String
    /// The worker's login: what the worker's code under test runs as.
    package let client: PostgresClient
    /// The owner's login on this database.
    package let ownerURL: String
    /// The owner's login: migrations, and fixtures beyond the worker's rights.
    package let owner: PostgresClient
    package var serverURL = TestEnvironment.postgresURL

    /// `options` are appended to `CREATE DATABASE` (a locale, say).
    package static func create(
        migrate: Bool = true, serverURL: String = TestEnvironment.postgresURL, options: String = ""
    ) async throws -> TestDatabase {
        let name = "ld_test_" + UUID().uuidString.prefix(12).lowercased().replacingOccurrences(of: "-", with: "")
        try await TestEnvironment.asSuperuser(on: serverURL) {
            try await $0.execute(unsafeSQL: "CREATE DATABASE \(name) OWNER \(PostgresLogin.owner.rawValue) \(options)")
        }
        let url = PostgresLogin.worker.url(serverURL, database: name)
        let ownerURL = PostgresLogin.owner.url(serverURL, database: name)
        let database = TestDatabase(
            name: name, url: url,
            client: PostgresClient(configuration: try PostgresConfiguration(url), logger: quietLogger),
            ownerURL: ownerURL,
            owner: PostgresClient(configuration: try PostgresConfiguration(ownerURL), logger: quietLogger),
            serverURL: serverURL)
        if migrate {
            do {
                try await Migrator(directory: migrationsDirectory).migrate(client: database.owner, logger: quietLogger)
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
        await owner.shutdown()
        try? await TestEnvironment.asSuperuser(on: serverURL) {
            try await $0.execute(unsafeSQL: "DROP DATABASE IF EXISTS \(name) WITH (FORCE)")
        }
    }

    /// Runs `body` with a client of a new login that is a member of `roles` and nothing else, as an
    /// administrator would create one for a BI tool; `temporary` also grants it TEMP on this database. The
    /// login is dropped afterwards, with whatever it created.
    package func withLogin<Result: Sendable>(
        in roles: [String], temporary: Bool = false, _ body: (PostgresClient) async throws -> Result
    ) async throws -> Result {
        let login = "ld_login_" + UUID().uuidString.prefix(8).lowercased()
        let password = UUID().uuidString
        try await TestEnvironment.asSuperuser(on: serverURL) {
            try await $0.execute(
                unsafeSQL: "CREATE ROLE \(login) LOGIN PASSWORD '\(password)' IN ROLE \(roles.joined(separator: ", "))")
        }
        if temporary {
            try await TestEnvironment.asSuperuser(on: serverURL, database: name) {
                try await $0.execute(unsafeSQL: "GRANT TEMPORARY ON DATABASE \(name) TO \(login)")
            }
        }
        let url = replacingCredentials(in: self.url, user: login, password: password)
        let client = PostgresClient(configuration: try PostgresConfiguration(url), logger: quietLogger)
        func dropLogin() async {
            await client.shutdown()
            _ = try? await TestEnvironment.asSuperuser(on: serverURL, database: name) {
                try await $0.execute(unsafeSQL: "DROP OWNED BY \(login)")
            }
            _ = try? await TestEnvironment.asSuperuser(on: serverURL) {
                try await $0.execute(unsafeSQL: "DROP ROLE IF EXISTS \(login)")
            }
        }
        do {
            let result = try await body(client)
            await dropLogin()
            return result
        } catch {
            await dropLogin()
            throw error
        }
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

    /// The first column of the first row as an integer (0 when there is no row); read as the owner, since a
    /// test looks at what the worker wrote, wherever it is.
    package func count(_ query: PostgresQuery) async throws -> Int {
        let rows = try await owner.query(query)
        return try rows.first.map { try $0.decode(Int.self, at: 0) } ?? 0
    }

    /// The first column of every row as text, read as the owner.
    package func strings(_ query: PostgresQuery) async throws -> [String] {
        try await owner.query(query).map { try $0.decode(String.self, at: 0) }
    }
}

/// A fixture that could not be set up.
package struct TestSupportError: Error, CustomStringConvertible {
    package let description: String
    package init(_ description: String) { self.description = description }
}
