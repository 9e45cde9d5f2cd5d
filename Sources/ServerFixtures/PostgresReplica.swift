import Foundation

/// A PostgreSQL primary (127.0.0.1:55451) and its streaming hot standby (55452, `application_name` standby1), built
/// from it with `pg_basebackup`, under `.state/replica` (whatever `LIVEDELIVERY_INSTANCE` says: the ports are
/// fixed; both sockets there too), for the failover tests and benchmark; and the failover played on them: the
/// primary's crash and the standby's promotion. `livedelivery-servers replica …` runs the same.
package struct PostgresReplica: Sendable {
    /// The pair on this machine.
    package static let local = PostgresReplica()

    /// Starts the pair if it does not run (a fresh one after ``reset()``), waits until the standby streams, and
    /// makes it synchronous (`synchronous_standby_names`) or not. Refuses a pair whose standby was promoted: the old
    /// primary must not come back as a primary beside it.
    package func start(synchronous: Bool) async throws {
        if FileManager.default.fileExists(atPath: "\(Self.state)/standby/PG_VERSION"),
            !FileManager.default.fileExists(atPath: "\(Self.state)/standby/standby.signal")
        {
            throw ServerFixtureError(
                "the standby was promoted; `livedelivery-servers replica reset` makes a fresh pair")
        }
        let primaryRuns = await running("primary")
        let standbyRuns = await running("standby")
        if !primaryRuns || !standbyRuns {
            LocalServers.reservePorts()
            try LocalServers.makeDirectories(forPostgres: [Self.state])
            try await initPrimary()
            try await startServer("primary")
            try await LocalServers.createRolesAndDatabase(host: Self.state, port: Self.port("primary"))
            try await initStandby()
            try await startServer("standby")
        }
        try await awaitReplication("state", is: "streaming", timeout: .seconds(60))
        let want = synchronous ? "sync" : "async"
        if synchronous, try LocalServers.durabilityOptions().contains("=off") {
            LocalServers.log("warning: with LIVEDELIVERY_PG_DURABILITY=off commits do not wait for the standby")
        }
        try await sql(
            "primary",
            synchronous
                ? "ALTER SYSTEM SET synchronous_standby_names = '\(Self.application)'"
                : "ALTER SYSTEM RESET synchronous_standby_names")
        try await sql("primary", "SELECT pg_reload_conf()")
        // In force once the primary's walsender reports it.
        try await awaitReplication("sync_state", is: want, timeout: .seconds(30))
    }

    /// Stops both, the primary first (at a clean shutdown it sends the standby all its WAL); the state is kept.
    package func stop() async throws {
        for server in ["primary", "standby"] where await running(server) {
            LocalServers.log("stopping PostgreSQL \(server)")
            try await pgCtl(server, ["-m", "fast", "-w", "-t", "60", "stop"])
        }
    }

    /// Stops both (immediate) and deletes their state: the next start makes a fresh pair.
    package func reset() async throws {
        for server in ["primary", "standby"] where await running(server) {
            try await pgCtl(server, ["-m", "immediate", "-w", "-t", "60", "stop"])
        }
        try? FileManager.default.removeItem(atPath: Self.state)
    }

    /// One line per server: running or stopped, primary or standby.
    package func summary() async -> String {
        var lines: [String] = []
        for server in ["primary", "standby"] {
            guard await running(server) else {
                lines.append("replica \(server): stopped")
                continue
            }
            let role =
                switch (try? await sql(server, "SELECT pg_is_in_recovery()")) ?? "" {
                case "t": "standby"
                case "f": "primary"
                default: "role unknown"
                }
            lines.append("replica \(server): running on 127.0.0.1:\(Self.port(server)), \(role)")
        }
        return lines.joined(separator: "\n")
    }

    /// The variables the tests and the benchmark read: each server's URL, and both in one that follows a failover.
    package var environment: KeyValuePairs<String, String> {
        let base = "postgresql://\(LocalServers.login):\(LocalServers.login)@127.0.0.1"
        let database = LocalServers.login
        return [
            "LIVEDELIVERY_REPLICA_PRIMARY_URL": "\(base):\(Self.port("primary"))/\(database)",
            "LIVEDELIVERY_REPLICA_STANDBY_URL": "\(base):\(Self.port("standby"))/\(database)",
            "LIVEDELIVERY_REPLICA_URL":
                "\(base):\(Self.port("primary")),127.0.0.1:\(Self.port("standby"))/\(database)"
                + "?target_session_attrs=read-write",
        ]
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
            (try? await sql("standby", "SELECT pg_is_in_recovery()")) == "f" ? true : nil
        }
    }

    static var state: String { LocalServers.stateDirectory + "/replica" }
    static func port(_ server: String) -> Int { server == "primary" ? 55451 : 55452 }
    static let application = "standby1"

    /// initdb, as the main instance with a smaller shared_buffers (two servers, tests rather than benchmarks) and
    /// what streaming replication needs; wal_keep_size lets a standby that was down for a while catch up from the
    /// primary's WAL instead of needing a new base backup.
    private func initPrimary() async throws {
        let data = "\(Self.state)/primary"
        guard !FileManager.default.fileExists(atPath: "\(data)/PG_VERSION") else { return }
        LocalServers.log("initialising the PostgreSQL primary in \(data)")
        let passwordFile = "\(Self.state)/pwfile"
        try "\(LocalServers.superuser)\n".write(toFile: passwordFile, atomically: false, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: passwordFile) }
        try LocalServers.giveToPostgres(passwordFile)
        try await LocalServers.run(
            LocalServers.postgresBin + "/initdb",
            [
                "-D", data, "-U", LocalServers.superuser, "--pwfile=\(passwordFile)", "--auth-local=trust",
                "--auth-host=scram-sha-256", "-E", "UTF8", "--locale=C.UTF-8",
            ], asPostgres: true)
        try append(
            """
            listen_addresses = '127.0.0.1'
            port = \(Self.port("primary"))
            unix_socket_directories = '\(Self.state)'
            max_connections = 300
            shared_buffers = 256MB
            log_min_messages = warning
            idle_in_transaction_session_timeout = '5min'
            wal_level = replica
            max_wal_senders = 10
            wal_keep_size = '256MB'
            hot_standby = on
            hot_standby_feedback = on

            """, to: "\(data)/postgresql.conf")
        try append("host replication \(LocalServers.superuser) 127.0.0.1/32 scram-sha-256\n", to: "\(data)/pg_hba.conf")
    }

    /// A base backup of the running primary, into a temporary folder first so that a failed one never passes for a
    /// standby. -R writes standby.signal and primary_conninfo, with the application_name that names the standby in
    /// synchronous_standby_names.
    private func initStandby() async throws {
        let data = "\(Self.state)/standby"
        let temporary = "\(Self.state)/standby.tmp"
        guard !FileManager.default.fileExists(atPath: "\(data)/PG_VERSION") else { return }
        for path in [data, temporary] { try? FileManager.default.removeItem(atPath: path) }
        LocalServers.log("building the PostgreSQL standby in \(data) from the primary")
        let source =
            "host=127.0.0.1 port=\(Self.port("primary")) user=\(LocalServers.superuser) "
            + "application_name=\(Self.application)"
        try await LocalServers.run(
            "/usr/bin/env",
            [
                "PGPASSWORD=\(LocalServers.superuser)", LocalServers.postgresBin + "/pg_basebackup", "-d", source,
                "-D", temporary, "-R", "-X", "stream", "-c", "fast",
            ], asPostgres: true)
        // The primary's synchronous_standby_names would come along; on the standby once promoted it would make
        // every commit wait for a standby that does not exist. Rewritten in place: the file stays postgres's.
        let auto = "\(temporary)/postgresql.auto.conf"
        let settings = try String(contentsOfFile: auto, encoding: .utf8)
        guard settings.contains("application_name=\(Self.application)") else {
            throw ServerFixtureError("pg_basebackup left application_name out of primary_conninfo")
        }
        try settings.split(separator: "\n", omittingEmptySubsequences: false)
            .filter { !$0.hasPrefix("synchronous_standby_names") }.joined(separator: "\n")
            .write(toFile: auto, atomically: false, encoding: .utf8)
        try append("port = \(Self.port("standby"))\n", to: "\(temporary)/postgresql.conf")
        try FileManager.default.moveItem(atPath: temporary, toPath: data)
    }

    private func startServer(_ server: String) async throws {
        guard await !running(server) else { return }
        LocalServers.log("starting PostgreSQL \(server) on 127.0.0.1:\(Self.port(server))")
        try await LocalServers.pgCtlStart(
            data: "\(Self.state)/\(server)", log: "\(Self.state)/\(server).log",
            options: "-c huge_pages=off \(try LocalServers.durabilityOptions())")
    }

    /// Waits until the primary's walsender for the standby reports `column` = `value` (`pg_stat_replication`).
    private func awaitReplication(_ column: String, is value: String, timeout: Duration) async throws {
        var last = ""
        do {
            _ = try await LocalServers.poll(
                "the standby's \(column) \(value)", timeout: timeout, every: .milliseconds(200)
            ) { () -> Bool? in
                last =
                    (try? await sql(
                        "primary",
                        "SELECT \(column) FROM pg_stat_replication WHERE application_name = '\(Self.application)'"))
                    ?? ""
                return last == value ? true : nil
            }
        } catch {
            throw ServerFixtureError(
                "the standby's \(column) is '\(last)', not \(value); the end of its log:\n"
                    + LocalServers.lastLines(of: "\(Self.state)/standby.log"))
        }
    }

    /// Appends to a file of the server's (opened in place, so that it stays the postgres user's).
    private func append(_ text: String, to path: String) throws {
        guard let file = FileHandle(forWritingAtPath: path) else { throw ServerFixtureError("cannot open \(path)") }
        defer { try? file.close() }
        try file.seekToEnd()
        try file.write(contentsOf: Data(text.utf8))
    }

    private func pgCtl(_ server: String, _ arguments: [String]) async throws {
        try await LocalServers.run(
            LocalServers.postgresBin + "/pg_ctl", ["-D", "\(Self.state)/\(server)"] + arguments, asPostgres: true,
            timeout: .seconds(90))
    }

    private func running(_ server: String) async -> Bool {
        (try? await pgCtl(server, ["status"])) != nil
    }

    /// psql as the bootstrap superuser over the server's socket (local connections are trusted); what it printed,
    /// trimmed.
    @discardableResult
    private func sql(_ server: String, _ statement: String) async throws -> String {
        try await LocalServers.psql(host: Self.state, port: Self.port(server), statement)
            .trimmingCharacters(in: .whitespacesAndNewlines)
    }
}
