import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// What starting the failover topologies shares with `scripts/services start` (which does the same for the main
/// and fault pairs, in bash): the logins, the durability settings, the reserved ports, the state folders' owner,
/// and the product's roles and database on every PostgreSQL server.
extension LocalServers {
    /// RabbitMQ's user, and the PostgreSQL worker login: each one's password is its name (loopback, tests only).
    package static let login = "livedelivery"
    /// The PostgreSQL bootstrap superuser (these fixtures and `scripts/services` only: it creates databases).
    package static let superuser = "postgres"

    /// `-c` options for PostgreSQL's durability (fsync, synchronous_commit, full_page_writes): on unless
    /// `LIVEDELIVERY_PG_DURABILITY=off` (quick local runs); any other value is an error. Passed at every start.
    package static func durabilityOptions() throws -> String {
        let value = environment["LIVEDELIVERY_PG_DURABILITY"].flatMap { $0.isEmpty ? nil : $0 } ?? "on"
        guard value == "on" || value == "off" else {
            throw ServerFixtureError("LIVEDELIVERY_PG_DURABILITY must be on or off (unset means on)")
        }
        return ["fsync", "synchronous_commit", "full_page_writes"].map { "-c \($0)=\(value)" }
            .joined(separator: " ")
    }

    /// As root, takes the servers' fixed ports out of Linux's ephemeral range (`ip_local_reserved_ports`, as
    /// `scripts/services start` does), so that no client socket or port-0 listener takes one before a server
    /// restarts on it. Additive; nothing when not root.
    package static func reservePorts() {
        let file = "/proc/sys/net/ipv4/ip_local_reserved_ports"
        let ports = "55432-55460,56720-56760"
        guard getuid() == 0, let current = procFile(file)?.trimmingCharacters(in: .whitespacesAndNewlines),
            !",\(current),".contains(",\(ports),")
        else { return }
        try? (current.isEmpty ? ports : "\(current),\(ports)").write(toFile: file, atomically: false, encoding: .utf8)
    }

    /// Makes `directories` (with their parents) and, as root, gives them to the `postgres` user, whose servers
    /// write there; the state folder and its parent become traversable by it.
    package static func makeDirectories(forPostgres directories: [String]) throws {
        for directory in directories {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            try giveToPostgres(directory)
        }
        let state = URL(fileURLWithPath: stateDirectory)
        for path in [state.path, state.deletingLastPathComponent().path] {
            try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: path)
        }
        // And each folder above searchable by postgres, as root: root's checkout in /root (0700 on Debian) is not.
        guard getuid() == 0 else { return }
        var folder = state.deletingLastPathComponent()
        while folder.path != "/" {
            folder = folder.deletingLastPathComponent()
            let mode = try FileManager.default.attributesOfItem(atPath: folder.path)[.posixPermissions] as? Int ?? 0
            if mode & 0o001 == 0 {
                try FileManager.default.setAttributes([.posixPermissions: mode | 0o001], ofItemAtPath: folder.path)
            }
        }
    }

    /// As root, makes `postgres` the owner of `path` (PostgreSQL's programs refuse to run as root).
    package static func giveToPostgres(_ path: String) throws {
        guard getuid() == 0 else { return }
        guard let user = getpwnam("postgres") else { throw ServerFixtureError("there is no postgres user") }
        guard chown(path, user.pointee.pw_uid, user.pointee.pw_gid) == 0 else {
            throw ServerFixtureError("chown postgres \(path): \(String(cString: strerror(errno)))")
        }
    }

    /// `pg_ctl start` (as `postgres`) with `options`; on failure, the end of the server's log, which says why.
    package static func pgCtlStart(data: String, log: String, options: String) async throws {
        do {
            try await run(
                postgresBin + "/pg_ctl", ["-D", data, "-l", log, "-w", "-t", "60", "-o", options, "start"],
                asPostgres: true, timeout: .seconds(90))
        } catch {
            throw ServerFixtureError("PostgreSQL in \(data) did not start; the end of \(log):\n\(lastLines(of: log))")
        }
    }

    /// `psql` as the bootstrap superuser to `host` (a socket's folder or 127.0.0.1, where it is trusted): what the
    /// statements (each `-c` its own transaction) printed, unaligned and without headers.
    @discardableResult
    package static func psql(
        host: String, port: Int, database: String = "postgres", _ statements: String...
    ) async throws -> String {
        try await run(
            postgresBin + "/psql",
            ["-h", host, "-p", "\(port)", "-U", superuser, "-d", database, "-XtAq", "-v", "ON_ERROR_STOP=1"]
                + statements.flatMap { ["-c", $0] })
    }

    /// The product's roles and its database, idempotently, as on every PostgreSQL server here (docs/operations.md,
    /// Roles and privileges): the owner `livedelivery_owner` (`livedelivery migrate`), the worker login
    /// `livedelivery` in `livedelivery_worker` (DML only, granted by the migrations), the certificate login
    /// `livedelivery_cert`, and the NOLOGIN group `livedelivery_reporting`. None of them is a superuser.
    package static func createRolesAndDatabase(host: String, port: Int) async throws {
        func role(_ name: String, _ options: String) -> String {
            "IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '\(name)') THEN CREATE ROLE \(name) \(options); END IF;"
        }
        let roles = [
            role("livedelivery_owner", "LOGIN PASSWORD 'livedelivery_owner'"),
            role("livedelivery_worker", "NOLOGIN"), role("livedelivery_reporting", "NOLOGIN"),
            role(login, "LOGIN PASSWORD '\(login)' IN ROLE livedelivery_worker"),
            role("livedelivery_cert", "LOGIN IN ROLE livedelivery_worker"),
        ]
        try await psql(
            host: host, port: port,
            "SET client_min_messages = warning; DO $$ BEGIN \(roles.joined(separator: " ")) END $$")
        let exists = try await psql(
            host: host, port: port, "SELECT 1 FROM pg_database WHERE datname = '\(login)'")
        if exists.trimmingCharacters(in: .whitespacesAndNewlines) != "1" {
            try await psql(host: host, port: port, "CREATE DATABASE \(login) OWNER livedelivery_owner")
        }
    }

    /// A string of random hex digits, for an Erlang cookie.
    package static func randomHex(bytes: Int) -> String {
        (0..<bytes).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined()
    }

    /// `export NAME='value'` lines, for a shell's `eval`.
    package static func exports(_ variables: KeyValuePairs<String, String>) -> String {
        variables.map { "export \($0.key)='\($0.value)'" }.joined(separator: "\n")
    }
}
