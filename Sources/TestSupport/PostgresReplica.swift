import Foundation

/// The PostgreSQL primary (127.0.0.1:55451) and its streaming hot standby (55452, `application_name` standby1) of
/// `scripts/services replica`, under `.state/replica`, and the failover the tests play on them: the primary's
/// crash and the standby's promotion.
package struct PostgresReplica: Sendable {
    /// The pair `scripts/services replica start` runs.
    package static let local = PostgresReplica()

    /// Starts the pair if it does not run (`scripts/services replica start`, a fresh pair after ``reset()``), waits
    /// until the standby streams, and makes it synchronous (`synchronous_standby_names`) or not.
    package func start(synchronous: Bool) async throws {
        try await LocalServers.script(["replica", "start"] + (synchronous ? ["--sync"] : []))
    }

    /// Stops both and deletes their state (`scripts/services replica reset`): the next start makes a fresh pair.
    package func reset() async throws {
        try await LocalServers.script(["replica", "reset"])
    }

    /// Stops the primary as a crash would (`pg_ctl stop -m immediate`); returns once it is down.
    package func stopPrimary() async throws {
        guard await running("primary") else { return }
        LocalServers.log("stopping PostgreSQL primary (immediate)")
        try await pgCtl("primary", ["-m", "immediate", "-w", "-t", "60", "stop"])
    }

    /// Promotes the standby (`pg_ctl promote`) and waits until it accepts writes (out of recovery).
    package func promote() async throws {
        guard await running("standby") else { throw ServerFixtureError("the standby does not run") }
        if FileManager.default.fileExists(atPath: "\(Self.state)/standby/standby.signal") {
            LocalServers.log("promoting the standby")
            try await pgCtl("standby", ["-w", "-t", "60", "promote"])
        }
        _ = try await LocalServers.poll("the standby out of recovery", timeout: .seconds(60), every: .milliseconds(200))
        {
            () -> Bool? in
            (try? await sql("standby", "SELECT pg_is_in_recovery()"))?.trimmingCharacters(in: .whitespacesAndNewlines)
                == "f" ? true : nil
        }
    }

    static var state: String { LocalServers.stateDirectory + "/replica" }
    static func port(_ server: String) -> Int { server == "primary" ? 55451 : 55452 }

    private func pgCtl(_ server: String, _ arguments: [String]) async throws {
        try await LocalServers.run(
            LocalServers.postgresBin + "/pg_ctl", ["-D", "\(Self.state)/\(server)"] + arguments, asPostgres: true,
            timeout: .seconds(90))
    }

    private func running(_ server: String) async -> Bool {
        (try? await pgCtl(server, ["status"])) != nil
    }

    /// psql as the bootstrap superuser over the server's socket (local connections are trusted).
    private func sql(_ server: String, _ statement: String) async throws -> String {
        try await LocalServers.run(
            LocalServers.postgresBin + "/psql",
            [
                "-h", Self.state, "-p", "\(Self.port(server))", "-U", "postgres", "-d", "postgres", "-XtAq", "-c",
                statement,
            ])
    }
}
