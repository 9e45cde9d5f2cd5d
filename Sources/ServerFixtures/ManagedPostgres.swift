import ChildProcesses
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A PostgreSQL pair that pg_auto_failover manages, for the managed-failover tests and the failover benchmark: a
/// monitor (127.0.0.1:55455) and two nodes, node1 (55456) and node2 (55457), each run by its own `pg_autoctl run`
/// as the postgres user, in a session of its own (so that a node's pg_autoctl, its PostgreSQL and every backend can
/// be killed together, as a machine's crash would, and nothing else), under `.state/managed` (whatever
/// `LIVEDELIVERY_INSTANCE` says). Trust on loopback, no TLS; the product's roles as on the other servers. Which
/// node is the primary is the monitor's to decide: the operations here ask it (`pgautofailover.node`) rather than
/// assume. The faults: a node's crash (kill -9 of its whole session), a switchover, and the nodes' return.
/// `livedelivery-servers managed …` runs the same.
package struct ManagedPostgres: Sendable {
    /// The pair on this machine.
    package static let local = ManagedPostgres()

    /// A node of the pair.
    package struct Node: Hashable, Sendable, CustomStringConvertible {
        package let name: String
        package let port: Int
        package static let node1 = Node(name: "node1", port: 55456)
        package static let node2 = Node(name: "node2", port: 55457)
        package static let all = [node1, node2]
        package var description: String { name }
    }

    /// The monitor's health checks: tightened (a dead primary is failed over in seconds; what the tests expect)
    /// or as pg_auto_failover ships them (about a minute).
    package enum HealthChecks: Sendable {
        case tight
        case asShipped
    }

    /// Creates or starts the monitor and both nodes and waits until one is the primary and the other the secondary,
    /// the monitor's health checks tightened; a no-op on a healthy pair (it also brings back a node that was killed).
    package func start() async throws {
        try Self.needAutoFailover()
        LocalServers.reservePorts()
        let folders = ["", "/home", "/config", "/share", "/run"].map { Self.state + $0 }
        try LocalServers.makeDirectories(forPostgres: folders)
        try FileManager.default.setAttributes([.posixPermissions: 0o700], ofItemAtPath: "\(Self.state)/run")
        // Where pg_autoctl's nodes put their sockets (Debian's default); without systemd nothing makes it.
        if getuid() == 0, !FileManager.default.fileExists(atPath: "/var/run/postgresql") {
            try FileManager.default.createDirectory(
                atPath: "/var/run/postgresql", withIntermediateDirectories: true,
                attributes: [.posixPermissions: 0o2775])
            try LocalServers.giveToPostgres("/var/run/postgresql")
        }
        try await createMonitor()
        if !Self.running("monitor") { try await launch("monitor") }
        _ = try await LocalServers.poll("the monitor answering", timeout: .seconds(60), every: .milliseconds(200)) {
            (try? await monitorSQL("SELECT 1")) != nil ? true : nil
        }
        try await setHealthChecks(.tight)
        // The first node becomes the primary; the second is built from it, so it waits for the first.
        for node in Node.all {
            if !FileManager.default.fileExists(atPath: "\(Self.state)/\(node.name).created") {
                try await create(node)
                if node == .node1 { try await settle(node) }
            } else if !Self.running(node.name) {
                try await launch(node.name)
            }
        }
        try await awaitHealthy(timeout: .seconds(180))
        guard let primary = try await primary() else { throw ServerFixtureError("the managed pair has no primary") }
        try await LocalServers.createRolesAndDatabase(host: "127.0.0.1", port: primary.port)
    }

    /// Stops the nodes, the secondary first (so that the monitor never fails over to a node that is going), then
    /// the monitor, each with `pg_autoctl stop`; the state is kept.
    package func stop() async throws {
        let secondary = (try? await nodes())?.first { $0.reported == "secondary" }?.node.name
        for member in [secondary].compactMap({ $0 }) + Node.all.map(\.name) + ["monitor"] {
            try await stopMember(member)
        }
    }

    /// kill -9 of every member, and their state deleted: the next start makes a fresh pair.
    package func reset() async throws {
        for member in Node.all.map(\.name) + ["monitor"] { try await kill(member) }
        try? FileManager.default.removeItem(atPath: Self.state)
    }

    /// One line per member: running or stopped, and a node's state as the monitor has it.
    package func summary() async -> String {
        let rows = (try? await nodes()) ?? []
        let monitor = Self.running("monitor") ? "running on 127.0.0.1:55455" : "stopped (127.0.0.1:55455)"
        return
            (["managed monitor: \(monitor)"]
            + Node.all.map { node in
                guard Self.running(node.name) else { return "managed \(node): stopped (127.0.0.1:\(node.port))" }
                let state = rows.first { $0.node == node }.map { "\($0.reported) (goal \($0.goal))" }
                return "managed \(node): running on 127.0.0.1:\(node.port), \(state ?? "not registered")"
            }).joined(separator: "\n")
    }

    /// The variable the tests and the benchmark read: both nodes in one URL that follows the monitor's failovers.
    package var environment: KeyValuePairs<String, String> {
        let login = LocalServers.login
        let hosts = Node.all.map { "127.0.0.1:\($0.port)" }.joined(separator: ",")
        return [
            "LIVEDELIVERY_MANAGED_URL":
                "postgresql://\(login):\(login)@\(hosts)/\(login)?target_session_attrs=read-write"
        ]
    }

    /// kill -9 of the primary's pg_autoctl, PostgreSQL and backends, as a machine's crash would; returns the node
    /// once all its processes are gone. The monitor then fails over.
    @discardableResult
    package func killPrimary() async throws -> Node {
        try Self.needAutoFailover()
        guard let primary = try await primary() else { throw ServerFixtureError("the managed pair has no primary") }
        try await kill(primary.name)
        return primary
    }

    /// kill -9 of the secondary likewise; the primary goes on alone (`wait_primary`). Returns the node.
    @discardableResult
    package func stopSecondary() async throws -> Node {
        try Self.needAutoFailover()
        guard let secondary = try await nodes().first(where: { $0.reported == "secondary" })?.node else {
            throw ServerFixtureError("the managed pair has no secondary")
        }
        try await kill(secondary.name)
        return secondary
    }

    /// `pg_autoctl perform switchover` on a healthy pair; waits until the pair is healthy again and returns the new
    /// primary.
    @discardableResult
    package func switchover() async throws -> Node {
        try Self.needAutoFailover()
        try await awaitHealthy(timeout: .seconds(60))
        LocalServers.log("switchover (pg_autoctl perform switchover)")
        try await LocalServers.run(
            Self.autoctl.executable,
            Self.autoctl.arguments + [
                "perform", "switchover", "--monitor", Self.monitorURL, "--formation", "default", "--group", "0",
            ], environment: Self.autoctlEnvironment, timeout: .seconds(120), appendingTo: "\(Self.state)/switchover.log"
        )
        try await awaitHealthy(timeout: .seconds(60))
        guard let primary = try await primary() else { throw ServerFixtureError("no primary after the switchover") }
        return primary
    }

    /// Starts every node whose pg_autoctl does not run (an old primary comes back as the secondary) and waits until
    /// the pair is healthy: a primary and a secondary, the primary taking writes.
    package func rejoin() async throws {
        try Self.needAutoFailover()
        for node in Node.all where !Self.running(node.name) {
            try await launch(node.name)
        }
        try await awaitHealthy(timeout: .seconds(120))
    }

    /// Each node's state as the monitor has it (`primary`, `secondary`, `wait_primary`, `catchingup`, …), or
    /// `stopped` when its pg_autoctl does not run, or `unregistered` when the monitor does not know it.
    package func status() async throws -> [Node: String] {
        let rows = (try? await nodes()) ?? []
        var states: [Node: String] = [:]
        for node in Node.all {
            states[node] =
                !Self.running(node.name) ? "stopped" : rows.first { $0.node == node }?.reported ?? "unregistered"
        }
        return states
    }

    /// Sets the monitor's health checks (`pgautofailover.*`, `ALTER SYSTEM` and a reload).
    package func setHealthChecks(_ checks: HealthChecks) async throws {
        for (name, value) in Self.tightHealthChecks {
            try await monitorSQL(
                checks == .tight
                    ? "ALTER SYSTEM SET pgautofailover.\(name) = \(value)"
                    : "ALTER SYSTEM RESET pgautofailover.\(name)")
        }
        try await monitorSQL("SELECT pg_reload_conf()")
        LocalServers.log("monitor health checks: \(checks == .tight ? "tight" : "as shipped")")
    }

    // MARK: The monitor's view

    /// The settings ``start()`` gives the monitor (docs/scaling.md, Managed failover): a dead primary is failed over
    /// in seconds rather than about a minute.
    static let tightHealthChecks = [
        ("health_check_period", 1000), ("health_check_timeout", 1000), ("health_check_retry_delay", 500),
        ("health_check_max_retries", 1), ("node_considered_unhealthy_timeout", 3000), ("primary_demote_timeout", 3000),
    ]

    struct NodeRow {
        var node: Node
        var reported: String
        var goal: String
    }

    /// The nodes the monitor knows: each one's reported and goal state.
    func nodes() async throws -> [NodeRow] {
        try await monitorSQL(
            "SELECT nodename, nodeport, reportedstate, goalstate FROM pgautofailover.node ORDER BY nodeid"
        )
        .split(separator: "\n").compactMap { line in
            let fields = line.split(separator: "|").map(String.init)
            guard fields.count == 4, let node = Node.all.first(where: { $0.name == fields[0] }) else { return nil }
            return NodeRow(node: node, reported: fields[2], goal: fields[3])
        }
    }

    /// The node that is the primary now (primary, or wait_primary: alone, still taking writes), in the state it
    /// was assigned.
    func primary() async throws -> Node? {
        try await nodes().first {
            $0.reported == $0.goal && ["primary", "wait_primary", "single"].contains($0.reported)
        }?
        .node
    }

    /// Waits until the monitor sees a primary and a secondary, each in the state it was assigned, and the primary
    /// answers: the monitor's table may still hold the states reported before a stop.
    func awaitHealthy(timeout: Duration) async throws {
        var last: [NodeRow] = []
        do {
            _ = try await LocalServers.poll("the managed pair healthy", timeout: timeout, every: .milliseconds(500)) {
                () -> Bool? in
                last = (try? await nodes()) ?? []
                let settled = last.filter { $0.reported == $0.goal }.map(\.reported)
                guard settled.filter({ $0 == "primary" }).count == 1, settled.filter({ $0 == "secondary" }).count == 1
                else { return nil }
                return await writable() ? true : nil
            }
        } catch {
            let table = last.map { "\($0.node) \($0.reported) (goal \($0.goal))" }.joined(separator: "; ")
            throw ServerFixtureError(
                "the formation is not healthy (a primary and a secondary) after \(timeout): \(table)")
        }
    }

    /// Whether a node takes writes, through the multi-host URL the workers use (as the superuser).
    func writable() async -> Bool {
        let hosts = Node.all.map { "127.0.0.1:\($0.port)" }.joined(separator: ",")
        let url = "postgresql://postgres@\(hosts)/postgres?target_session_attrs=read-write&connect_timeout=2"
        return (try? await LocalServers.run(LocalServers.postgresBin + "/psql", ["-XtAq", "-c", "SELECT 1", url]))
            != nil
    }

    /// psql to the monitor's database, as the superuser over loopback (trust).
    @discardableResult
    func monitorSQL(_ statement: String) async throws -> String {
        try await LocalServers.psql(host: "127.0.0.1", port: 55455, database: "pg_auto_failover", statement)
    }

    // MARK: The members' processes

    static var state: String { LocalServers.stateDirectory + "/managed" }
    static let monitorURL = "postgres://autoctl_node@127.0.0.1:55455/pg_auto_failover"

    /// The session (setsid) in which a member's `pg_autoctl run` was started; its id is in MEMBER.sid.
    static func session(_ member: String) -> Int32? {
        (try? String(contentsOfFile: "\(state)/\(member).sid", encoding: .utf8))
            .flatMap { Int32($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
    }

    /// Every process of a member's session: its pg_autoctl processes, its PostgreSQL and backends.
    static func sessionPids(_ member: String) -> [Int32] {
        session(member).map(LocalServers.sessionPids) ?? []
    }

    static func running(_ member: String) -> Bool { !sessionPids(member).isEmpty }

    /// kill -9 of every process of a member's session, as a machine's crash would; returns once all are gone.
    private func kill(_ member: String) async throws {
        guard Self.running(member) else {
            LocalServers.log("\(member) does not run")
            return
        }
        LocalServers.log("kill -9 of \(member) (pg_autoctl, PostgreSQL and its backends)")
        _ = try await LocalServers.poll(
            "\(member) gone after kill -9", timeout: .seconds(30), every: .milliseconds(100)
        ) { () -> Bool? in
            // A process forked between the listing and the kill (a backend) is killed on the next round.
            let pids = Self.sessionPids(member)
            for pid in pids { _ = Glibc.kill(pid, SIGKILL) }
            return pids.isEmpty ? true : nil
        }
        try? FileManager.default.removeItem(atPath: "\(Self.state)/\(member).sid")
    }

    /// `pg_autoctl run` for a member created before (see ``daemon(_:_:)``).
    private func launch(_ member: String) async throws {
        LocalServers.log("starting pg_autoctl for \(member)")
        try await daemon(member, ["run", "--pgdata", "\(Self.state)/\(member)"])
    }

    /// `pg_autoctl ARGS` as a daemon for a member, in a session of its own, its output appended to MEMBER.log and
    /// its session's id written to MEMBER.sid.
    private func daemon(_ member: String, _ arguments: [String]) async throws {
        let sidFile = "\(Self.state)/\(member).sid"
        try? FileManager.default.removeItem(atPath: sidFile)
        let child = try await LocalServers.daemon(
            "pg_autoctl-\(member)", Self.autoctl.executable, Self.autoctl.arguments + arguments,
            environment: Self.autoctlEnvironment, log: "\(Self.state)/\(member).log", truncateLog: false)
        try "\(child.pid)\n".write(toFile: sidFile, atomically: true, encoding: .utf8)
    }

    /// `pg_autoctl ARGS` to completion, its output appended to `log`.
    private func autoctl(_ arguments: [String], log: String) async throws {
        try await LocalServers.run(
            Self.autoctl.executable, Self.autoctl.arguments + arguments, environment: Self.autoctlEnvironment,
            timeout: .seconds(120), appendingTo: "\(Self.state)/\(log)")
    }

    private func createMonitor() async throws {
        let data = "\(Self.state)/monitor"
        guard !FileManager.default.fileExists(atPath: "\(data)/PG_VERSION") else { return }
        LocalServers.log("creating the pg_auto_failover monitor in \(data)")
        try? FileManager.default.removeItem(atPath: data)
        try await autoctl(
            [
                "create", "monitor", "--pgdata", data, "--pgport", "55455", "--hostname", "127.0.0.1", "--auth",
                "trust",
                "--no-ssl",
            ], log: "monitor.log")
        // The monitor has no --listen: without this it would listen on every interface.
        try await autoctl(
            ["config", "set", "--pgdata", data, "postgresql.listen_addresses", "127.0.0.1"], log: "monitor.log")
    }

    /// `pg_autoctl create postgres … --run` registers a node with the monitor, initialises it (the first as the
    /// primary, the next from a base backup of the primary) and keeps running it.
    private func create(_ node: Node) async throws {
        let data = "\(Self.state)/\(node.name)"
        LocalServers.log("creating pg_auto_failover node \(node) on 127.0.0.1:\(node.port)")
        try? FileManager.default.removeItem(atPath: data)
        try await daemon(
            node.name,
            [
                "create", "postgres", "--pgdata", data, "--pgport", "\(node.port)", "--listen", "127.0.0.1",
                "--hostname", "127.0.0.1", "--name", node.name, "--monitor", Self.monitorURL, "--auth", "trust",
                "--no-ssl", "--run",
            ])
        guard FileManager.default.createFile(atPath: "\(Self.state)/\(node.name).created", contents: nil) else {
            throw ServerFixtureError("cannot write \(Self.state)/\(node.name).created")
        }
    }

    /// pg_autoctl sizes a node for a machine of its own (shared_buffers a quarter of the memory, 8 GB of WAL kept);
    /// here two nodes share the machine with the other servers, so they get the replica pair's sizes and ordinary
    /// pages. remote_apply: a commit returns once the secondary has applied it, so that a database a test creates
    /// on the primary is there on both nodes at once (libpq does not go on to the next host when the first says
    /// the database does not exist); a deployment keeps pg_auto_failover's `on`. Set on the first node while it
    /// runs alone (its postgresql.auto.conf goes into the second node's base backup), then its pg_autoctl is
    /// restarted for shared_buffers to apply.
    private func settle(_ node: Node) async throws {
        try await awaitState(node, "single")
        try await LocalServers.psql(
            host: "127.0.0.1", port: node.port, "ALTER SYSTEM SET shared_buffers = '256MB'",
            "ALTER SYSTEM SET huge_pages = off", "ALTER SYSTEM SET wal_keep_size = '512MB'",
            "ALTER SYSTEM SET max_connections = 200", "ALTER SYSTEM SET synchronous_commit = remote_apply")
        try await stopMember(node.name)
        try await launch(node.name)
        try await awaitState(node, "single")
        _ = try await LocalServers.poll("\(node) taking writes", timeout: .seconds(60), every: .milliseconds(200)) {
            await writable() ? true : nil
        }
    }

    /// Waits until the monitor has `node` in `state`, reported and assigned.
    private func awaitState(_ node: Node, _ state: String) async throws {
        _ = try await LocalServers.poll("\(node) \(state)", timeout: .seconds(120), every: .milliseconds(500)) {
            let row = (try? await nodes())?.first { $0.node == node }
            return row?.reported == state && row?.goal == state ? true : nil
        }
    }

    /// Stops a member's pg_autoctl cleanly (it stops its PostgreSQL too), or kills it if its session has not gone
    /// within a minute.
    private func stopMember(_ member: String) async throws {
        guard Self.running(member) else { return }
        LocalServers.log("stopping \(member)")
        try? await autoctl(["stop", "--pgdata", "\(Self.state)/\(member)"], log: "\(member).log")
        let stopped = try? await LocalServers.poll(
            "\(member) stopped", timeout: .seconds(60), every: .milliseconds(200)
        ) { () -> Bool? in Self.running(member) ? nil : true }
        if stopped == nil { try await kill(member) }
        try? FileManager.default.removeItem(atPath: "\(Self.state)/\(member).sid")
    }

    /// `pg_autoctl`, with no signal blocked and INT, TERM, HUP and QUIT at their defaults (Python clears what a
    /// process that started it may have passed on through `runuser`), and its environment: PostgreSQL's own bin
    /// folder first on PATH (pg_autoctl finds pg_ctl there, and pg_controldata beside it); its configuration, state
    /// and pid files under `.state/managed`; and none of libpq's variables but PGUSER, the superuser. pg_autoctl
    /// takes libpq's variables over its configuration and writes them into it: the PG* that `scripts/services env`
    /// exports (PGUSER=livedelivery_owner) would make a keeper read its standby's timeline as NULL.
    static var autoctl: (executable: String, arguments: [String]) {
        let unblock = """
            import os, signal, sys
            signal.pthread_sigmask(signal.SIG_SETMASK, [])
            for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT): signal.signal(s, signal.SIG_DFL)
            os.execvp(sys.argv[1], sys.argv[1:])
            """
        let path = LocalServers.postgresBin + ":" + (LocalServers.environment["PATH"] ?? "/usr/bin:/bin")
        let variables = [
            "-u", "PGHOST", "-u", "PGPORT", "-u", "PGDATABASE", "-u", "PGPASSWORD", "-u", "PGSSLMODE", "-u",
            "PGCONNECT_TIMEOUT", "PGUSER=postgres", "PATH=\(path)", "HOME=\(state)/home",
            "XDG_CONFIG_HOME=\(state)/config",
            "XDG_DATA_HOME=\(state)/share", "XDG_RUNTIME_DIR=\(state)/run",
        ]
        let (executable, arguments) = LocalServers.asPostgres(
            "/usr/bin/python3", ["-c", unblock, "/usr/bin/env"] + variables + ["pg_autoctl"])
        return (executable, arguments)
    }

    static var autoctlEnvironment: [String: String] { LocalServers.environment }

    /// pg_auto_failover and PostgreSQL are installed (`scripts/services install`).
    static func needAutoFailover() throws {
        let path = (LocalServers.environment["PATH"] ?? "").split(separator: ":").map(String.init) + ["/usr/bin"]
        guard path.contains(where: { FileManager.default.isExecutableFile(atPath: "\($0)/pg_autoctl") }),
            FileManager.default.isExecutableFile(atPath: LocalServers.postgresBin + "/postgres")
        else {
            throw ServerFixtureError("pg_auto_failover is not installed (scripts/services install installs it)")
        }
    }
}
