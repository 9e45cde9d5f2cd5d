import Foundation
import ServerFixtures

/// The fault instance's PostgreSQL of `scripts/services` (`LIVEDELIVERY_INSTANCE=fault`, 127.0.0.1:55442, state
/// under `.state/fault/postgres`), and the faults the tests play on it: a stop, a start and a restart, each with
/// `pg_ctl`. A start runs the server with the options it last ran with (`postmaster.opts`: the durability settings
/// `scripts/services start` gave it), so nothing here describes the server a second time.
package struct PostgresServer: Sendable {
    /// The server `LIVEDELIVERY_INSTANCE=fault scripts/services start` runs (`LIVEDELIVERY_FAULT_POSTGRES_URL`).
    package static let fault = PostgresServer()

    /// A fast shutdown (`pg_ctl stop -m fast`: clients are disconnected, nothing committed is lost); returns once
    /// the server is down.
    package func stop() async throws {
        LocalServers.log("stopping PostgreSQL (fault instance)")
        try await pgCtl(["-m", "fast", "-w", "-t", "60", "stop"])
    }

    /// Starts the stopped server again and returns once it accepts connections. `pg_ctl restart` on a stopped
    /// server says so and starts it with its last options, which `pg_ctl start` would not read.
    package func start() async throws {
        LocalServers.log("starting PostgreSQL (fault instance)")
        try await pgCtl(["-l", "\(Self.directory)/server.log", "-w", "-t", "60", "restart"])
    }

    /// ``stop()`` then ``start()`` in one `pg_ctl restart`.
    package func restart() async throws {
        LocalServers.log("restarting PostgreSQL (fault instance)")
        try await pgCtl(["-m", "fast", "-l", "\(Self.directory)/server.log", "-w", "-t", "60", "restart"])
    }

    static var directory: String { LocalServers.stateDirectory + "/fault/postgres" }

    private func pgCtl(_ arguments: [String]) async throws {
        try await LocalServers.run(
            LocalServers.postgresBin + "/pg_ctl", ["-D", "\(Self.directory)/data"] + arguments, asPostgres: true,
            timeout: .seconds(90))
    }
}
