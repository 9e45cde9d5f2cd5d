import ChildProcesses
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// The PostgreSQL pair that pg_auto_failover manages (`scripts/services managed`): a monitor (127.0.0.1:55455)
/// and two nodes, node1 (55456) and node2 (55457), each run by its own `pg_autoctl run` in a session of its own,
/// under `.state/managed`. Which node is the primary is the monitor's to decide: the operations here ask it
/// (`pgautofailover.node`) rather than assume. The faults: a node's crash (kill -9 of its whole session: its
/// pg_autoctl, PostgreSQL and backends), a switchover, and the nodes' return.
package struct ManagedPostgres: Sendable {
    /// The pair `scripts/services managed start` runs.
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

    /// Creates or starts the monitor and both nodes and waits until one is the primary and the other the
    /// secondary (`scripts/services managed start`); a no-op on a healthy pair.
    package func start() async throws {
        try await LocalServers.script(["managed", "start"])
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
            LocalServers.log("starting pg_autoctl for \(node) (127.0.0.1:\(node.port))")
            try await launch(node)
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

    /// The settings `scripts/services managed start` gives the monitor (docs/scaling.md, Managed failover).
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
        try await LocalServers.run(
            LocalServers.postgresBin + "/psql",
            ["-h", "127.0.0.1", "-p", "55455", "-U", "postgres", "-d", "pg_auto_failover", "-XtAq", "-c", statement])
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

    /// `pg_autoctl run` for a node created before, as a daemon in a session of its own, its output appended to
    /// NODE.log and its session's id written to NODE.sid.
    private func launch(_ node: Node) async throws {
        let sidFile = "\(Self.state)/\(node.name).sid"
        try? FileManager.default.removeItem(atPath: sidFile)
        let child = try await LocalServers.daemon(
            "pg_autoctl-\(node.name)", Self.autoctl.executable,
            Self.autoctl.arguments + ["run", "--pgdata", "\(Self.state)/\(node.name)"],
            environment: Self.autoctlEnvironment, log: "\(Self.state)/\(node.name).log",
            truncateLog: false)
        try "\(child.pid)\n".write(toFile: sidFile, atomically: true, encoding: .utf8)
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

    /// pg_auto_failover (`scripts/services managed install`) and PostgreSQL are installed.
    static func needAutoFailover() throws {
        let path = (LocalServers.environment["PATH"] ?? "").split(separator: ":").map(String.init) + ["/usr/bin"]
        guard path.contains(where: { FileManager.default.isExecutableFile(atPath: "\($0)/pg_autoctl") }),
            FileManager.default.isExecutableFile(atPath: LocalServers.postgresBin + "/postgres")
        else {
            throw ServerFixtureError("pg_auto_failover is not installed (scripts/services managed install installs it)")
        }
    }
}
