import Foundation
import Logging
import Postgres
import TestSupport

enum PostgresTestSupport {
    static let logger = Logger(label: "PostgresTests")

    /// The wrapper's tests make tables of their own: they log in as the owner of the services' database.
    static var ownerURL: String { PostgresLogin.owner.url(TestEnvironment.postgresURL) }

    static func client(url: String = ownerURL, poolSize: Int = 4) throws -> PostgresClient {
        var configuration = try PostgresConfiguration(url)
        configuration.poolSize = poolSize
        configuration.applicationName = "PostgresTests"
        return PostgresClient(configuration: configuration, logger: logger)
    }

    /// A table name no other test uses (a valid unquoted identifier).
    static func tableName(_ prefix: String) -> String {
        TestEnvironment.uniqueName(prefix).replacingOccurrences(of: "-", with: "_")
    }

    /// Runs `body` with a client and always shuts it down.
    static func withClient<Result>(
        url: String = ownerURL,
        poolSize: Int = 4,
        _ body: (PostgresClient) async throws -> Result
    ) async throws -> Result {
        let client = try client(url: url, poolSize: poolSize)
        do {
            let result = try await body(client)
            await client.shutdown()
            return result
        } catch {
            await client.shutdown()
            throw error
        }
    }
}

struct ExpectedFailure: Error {}
