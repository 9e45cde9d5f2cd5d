import Foundation
import Logging
import Postgres
import TestSupport

enum PostgresTestSupport {
    static let logger = Logger(label: "PostgresTests")

    static func client(url: String = TestEnvironment.postgresURL, poolSize: Int = 4) throws -> PostgresClient {
        var configuration = try PostgresConfiguration(url: url)
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
        url: String = TestEnvironment.postgresURL,
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

extension PostgresTestSupport {
    /// `TestEnvironment.restartFaultPostgres()`, but with every inherited descriptor above stderr closed first.
    ///
    /// Foundation's `Process` on Linux learns that a child exited when a socket it hands to the child closes. The
    /// restarted server is a daemon that would inherit that socket and keep it open, so the termination handler
    /// would never run and the test would hang. Closing the descriptors in a wrapper shell before running the
    /// script avoids that.
    static func restartFaultPostgres() async throws {
        let closeInheritedDescriptors = #"""
            for fd in $(ls /proc/$$/fd); do [ "$fd" -gt 2 ] && eval "exec $fd>&-"; done 2>/dev/null
            exec "$0" "$@"
            """#
        try await TestEnvironment.run(
            "/bin/bash",
            ["-c", closeInheritedDescriptors, TestEnvironment.servicesScript, "restart-postgres"],
            environment: ["LIVEDELIVERY_INSTANCE": "fault"]
        )
    }
}
