import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A three-node RabbitMQ cluster on loopback for the failover tests and benchmark (nodes `livedelivery-1…3@localhost`,
/// AMQP on 127.0.0.1:56741–56743, distribution on 56751–56753, state under `.state/cluster`, whatever
/// `LIVEDELIVERY_INSTANCE` says, since its ports are fixed), and the faults played on it: a node's crash, its
/// return, and which node leads a queue or holds the clients' connections. Each node has its own mnesia, logs, pid
/// file and configuration under `.state/cluster/N`; they share one HOME, `.state/cluster`, for its `.erlang.cookie`
/// (nodes and rabbitmqctl only talk when their cookies match). `livedelivery-servers cluster …` runs the same.
package struct RabbitMQCluster: Sendable {
    /// The cluster on this machine.
    package static let local = RabbitMQCluster()

    /// The node numbers.
    package static let nodes = 1...3

    /// Starts the nodes that do not run (all at once: a node started alone after the whole cluster stopped waits
    /// for its peers' tables), joins each that is not a member to node 1, and waits until the cluster lists all
    /// three as running; a no-op on a running cluster.
    package func start() async throws {
        LocalServers.reservePorts()
        try Self.prepare()
        try await startNodes(Array(Self.nodes))
        LocalServers.log("cluster ready")
    }

    /// Stops the three nodes at once, each cleanly (`rabbitmqctl stop`) or, if its VM has not gone within a minute,
    /// with SIGTERM and then SIGKILL. The state is kept.
    package func stop() async throws {
        try await withThrowingTaskGroup(of: Void.self) { group in
            for node in Self.nodes { group.addTask { try await stop(node: node) } }
            try await group.waitForAll()
        }
    }

    /// Stops the nodes and deletes their state: the next start makes a fresh cluster.
    package func reset() async throws {
        try await stop()
        try? FileManager.default.removeItem(atPath: Self.state)
    }

    /// One line per node: running, or stopped (its VM up or not).
    package func summary() -> String {
        Self.nodes.map { node in
            let name = "cluster node \(node) (\(Self.nodeName(node)))"
            if Self.serving(node) { return "\(name): running on 127.0.0.1:\(Self.amqpPort(node))" }
            if Self.beamPid(node) != nil { return "\(name): stopped (its VM is up: booting, or the app is stopped)" }
            return "\(name): stopped"
        }.joined(separator: "\n")
    }

    /// The variables the tests and the benchmark read: `LIVEDELIVERY_CLUSTER_AMQP_URLS`, comma-separated.
    package var environment: KeyValuePairs<String, String> {
        let login = LocalServers.login
        let urls = Self.nodes.map { "amqp://\(login):\(login)@127.0.0.1:\(Self.amqpPort($0))/%2F" }
        return ["LIVEDELIVERY_CLUSTER_AMQP_URLS": urls.joined(separator: ",")]
    }

    /// A crash: SIGKILL to node `node`'s Erlang VM, no clean shutdown. Returns once the process is gone and its
    /// AMQP port no longer listens, so that the caller knows the node's clients have lost it.
    package func kill(node: Int) async throws {
        try Self.check(node)
        guard let pid = Self.beamPid(node) else {
            if Self.serving(node) {
                throw ServerFixtureError(
                    "127.0.0.1:\(Self.amqpPort(node)) is served by something that is not node \(node)")
            }
            LocalServers.log("cluster node \(node) is not running")
            return
        }
        LocalServers.log("killing cluster node \(node) (beam.smp pid \(pid))")
        _ = Glibc.kill(pid, SIGKILL)
        _ = try await LocalServers.poll(
            "cluster node \(node) gone after kill -9", timeout: .seconds(30), every: .milliseconds(200)
        ) { () -> Bool? in
            LocalServers.processAlive(pid) || Self.serving(node) ? nil : true
        }
    }

    /// Starts node `node` again (its VM, unless one still runs with the application stopped), joins it to node 1
    /// if it is not a member, and waits until the cluster lists it as running.
    package func startNode(_ node: Int) async throws {
        try Self.check(node)
        let directory = "\(Self.state)/\(node)"
        guard FileManager.default.fileExists(atPath: "\(directory)/rabbitmq.conf") else {
            throw ServerFixtureError("cluster node \(node) was never set up (livedelivery-servers cluster start)")
        }
        try await startNodes([node])
    }

    /// Starts those of `nodes` that do not run (their VMs all at once), joins each that is not a member to node 1,
    /// and waits until node 1 (or, while it is down, the first running node) lists them all as running.
    private func startNodes(_ nodes: [Int]) async throws {
        var launched: [Int] = []
        for node in nodes where !Self.serving(node) {
            // A VM without its AMQP listener is booting or has its application stopped: a second would crash.
            if Self.beamPid(node) == nil { try await launch(node) }
            launched.append(node)
        }
        for node in launched { try await awaitStartup(node) }
        let viewer = Self.serving(1) ? 1 : try firstServing()
        var status = try await Self.clusterStatus(viewer)
        let members = Self.nodes(in: "disk_nodes", of: status)
        for node in nodes where node != 1 && !members.contains(node) {
            LocalServers.log("joining cluster node \(node) to livedelivery-1@localhost")
            try await rabbitmqctl(node: node, ["-q", "stop_app"])
            // The join logs errors about connection tracking tables on the stopped node even when it succeeds:
            // its output is shown only when it fails (in the thrown error).
            try await rabbitmqctl(node: node, ["-q", "join_cluster", "livedelivery-1@localhost"])
            try await rabbitmqctl(node: node, ["-q", "start_app"])
        }
        _ = try await LocalServers.poll(
            "cluster node(s) \(nodes) running in the cluster as node \(viewer) sees it", timeout: .seconds(120),
            every: .seconds(1)
        ) { () -> Bool? in
            if Set(nodes).isSubset(of: Self.nodes(in: "running_nodes", of: status)) { return true }
            status = (try? await Self.clusterStatus(viewer)) ?? ""
            return nil
        }
    }

    /// The node (1…3) that leads quorum queue `queue`. Throws when the queue is not listed (it does not exist,
    /// or no majority of its members runs) or names a leader that does not serve (right after the leader's node
    /// died, until a new leader is elected).
    package func leader(of queue: String) async throws -> Int {
        let listing = try await rabbitmqctl(
            node: try firstServing(), ["-q", "list_queues", "--no-table-headers", "name", "leader"])
        guard
            let row = listing.split(separator: "\n").map({ $0.split(separator: "\t", omittingEmptySubsequences: false) }
            )
            .first(where: { $0.count == 2 && $0[0] == queue })
        else {
            throw ServerFixtureError(
                "queue \(queue) is not listed: it does not exist, or it has no leader (no majority of its members runs)"
            )
        }
        guard let leader = Self.nodeNumber(row[1]), Self.serving(leader) else {
            throw ServerFixtureError("queue \(queue) has no leader")
        }
        return leader
    }

    /// The client connections each running node holds, by node number. `list_connections` on any node lists the
    /// whole cluster's; each is counted for the node whose AMQP port it reached.
    package func connections() async throws -> [Int: Int] {
        let ports = try await rabbitmqctl(
            node: try firstServing(), ["-q", "list_connections", "--no-table-headers", "port"]
        ).split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }
        var counts: [Int: Int] = [:]
        for node in Self.nodes where Self.serving(node) {
            counts[node] = ports.filter { $0 == "\(Self.amqpPort(node))" }.count
        }
        return counts
    }

    /// `rabbitmqctl ARGS` against node `node`, with the node's environment (its cookie); what it printed.
    @discardableResult
    package func rabbitmqctl(node: Int, _ arguments: [String]) async throws -> String {
        try Self.check(node)
        return try await LocalServers.run(
            try LocalServers.rabbitMQSbin() + "/rabbitmqctl", ["-n", Self.nodeName(node)] + arguments,
            environment: Self.environment(node))
    }

    // MARK: The nodes

    static var state: String { LocalServers.stateDirectory + "/cluster" }
    static func nodeName(_ node: Int) -> String { "livedelivery-\(node)@localhost" }
    static func amqpPort(_ node: Int) -> Int { 56740 + node }

    static func check(_ node: Int) throws {
        guard nodes.contains(node) else { throw ServerFixtureError("cluster node must be 1, 2 or 3, not \(node)") }
    }

    /// The broker listens for AMQP only while its rabbit application runs: after boot, before `stop_app`.
    static func serving(_ node: Int) -> Bool { LocalServers.portListening(amqpPort(node)) }

    func firstServing() throws -> Int {
        guard let node = Self.nodes.first(where: Self.serving) else { throw ServerFixtureError("no cluster node runs") }
        return node
    }

    /// `livedelivery-N@localhost` → N.
    static func nodeNumber(_ name: Substring) -> Int? {
        guard name.hasPrefix("livedelivery-"), name.hasSuffix("@localhost") else { return nil }
        return Int(name.dropFirst("livedelivery-".count).dropLast("@localhost".count))
    }

    /// A node's environment: one HOME for the nodes' shared `.erlang.cookie`, and
    /// the node's own ports, configuration, data, logs and pid file.
    static func environment(_ node: Int) -> [String: String] {
        let directory = "\(state)/\(node)"
        var environment = LocalServers.rabbitMQEnvironment(
            home: state, directory: directory, nodeName: nodeName(node), port: amqpPort(node),
            distributionPort: 56750 + node)
        // Erlang distribution on loopback too; without this it listens on every interface.
        environment["RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS"] = "-kernel inet_dist_use_interface {127,0,0,1}"
        return environment
    }

    /// The pid of node `node`'s VM: the one in its pid file, else found by node name.
    static func beamPid(_ node: Int) -> Int32? {
        if let text = try? String(contentsOfFile: "\(state)/\(node)/rabbitmq.pid", encoding: .utf8),
            let pid = Int32(text.trimmingCharacters(in: .whitespacesAndNewlines)), isBeam(pid, node)
        {
            return pid
        }
        return LocalServers.allPids().first { isBeam($0, node) }
    }

    /// A node's Erlang VM: beam.smp started by rabbitmq-server (not a rabbitmqctl, which is a beam.smp too, with
    /// the same RABBITMQ_NODENAME in its environment) for that node name, on this checkout's state. Never the main
    /// or fault broker, nor a node of the same name of another checkout, which /proc shows too when it runs in a
    /// container or another pid namespace on this machine.
    static func isBeam(_ pid: Int32, _ node: Int) -> Bool {
        func read(_ file: String) -> String? { LocalServers.procFile("/proc/\(pid)/\(file)") }
        guard read("comm")?.trimmingCharacters(in: .newlines) == "beam.smp",
            let environ = read("environ")?.split(separator: "\0"),
            environ.contains("RABBITMQ_NODENAME=\(nodeName(node))"),
            environ.contains("RABBITMQ_MNESIA_BASE=\(state)/\(node)/mnesia"),
            let cmdline = read("cmdline")
        else { return false }
        return cmdline.replacingOccurrences(of: "\0", with: " ").contains(" -s rabbit boot ")
    }

    /// The node numbers in one list (`disk_nodes`, `running_nodes`) of `cluster_status --formatter json`.
    static func nodes(in list: String, of status: String) -> Set<Int> {
        guard let object = try? JSONSerialization.jsonObject(with: Data(status.utf8)) as? [String: Any],
            let names = object[list] as? [String]
        else { return [] }
        return Set(names.compactMap { nodeNumber(Substring($0)) })
    }

    static func clusterStatus(_ viewer: Int) async throws -> String {
        let output = try await RabbitMQCluster.local.rabbitmqctl(
            node: viewer, ["-q", "cluster_status", "--formatter", "json"])
        // Only the JSON object: anything the tool said around it is not the status.
        guard let start = output.firstIndex(of: "{"), let end = output.lastIndex(of: "}") else { return "" }
        return String(output[start...end])
    }

    /// The shared cookie (made once) and each node's folders and configuration (written at every start).
    static func prepare() throws {
        let files = FileManager.default
        try files.createDirectory(atPath: state, withIntermediateDirectories: true)
        let cookie = "\(state)/.erlang.cookie"
        if !files.fileExists(atPath: cookie) {
            try LocalServers.randomHex(bytes: 32).write(toFile: cookie, atomically: false, encoding: .utf8)
            try files.setAttributes([.posixPermissions: 0o400], ofItemAtPath: cookie)
        }
        let login = LocalServers.login
        for node in nodes {
            let directory = "\(state)/\(node)"
            for folder in ["mnesia", "log"] {
                try files.createDirectory(atPath: "\(directory)/\(folder)", withIntermediateDirectories: true)
            }
            let configuration = """
                listeners.tcp.1 = 127.0.0.1:\(amqpPort(node))
                loopback_users = none
                default_user = \(login)
                default_pass = \(login)
                default_vhost = /
                heartbeat = 60
                log.console = false
                log.file.level = warning
                vm_memory_high_watermark.relative = 0.6
                disk_free_limit.absolute = 200MB

                """
            try configuration.write(toFile: "\(directory)/rabbitmq.conf", atomically: true, encoding: .utf8)
            try "[].\n".write(toFile: "\(directory)/advanced.config", atomically: true, encoding: .utf8)
            try "[rabbitmq_consistent_hash_exchange].\n".write(
                toFile: "\(directory)/enabled_plugins", atomically: true, encoding: .utf8)
        }
    }

    private func stop(node: Int) async throws {
        guard let pid = Self.beamPid(node) else { return }
        LocalServers.log("stopping RabbitMQ cluster node \(node)")
        _ = try? await rabbitmqctl(node: node, ["-q", "stop"])
        for (signal, timeout) in [(SIGTERM, 60), (SIGKILL, 30), (0, 30)] {
            let gone = try? await LocalServers.poll(
                "cluster node \(node) stopped", timeout: .seconds(timeout), every: .milliseconds(500)
            ) { () -> Bool? in LocalServers.processAlive(pid) ? nil : true }
            if gone != nil { return }
            guard signal != 0 else { throw ServerFixtureError("cluster node \(node) (pid \(pid)) does not stop") }
            LocalServers.log("cluster node \(node) did not stop; signal \(signal) to it")
            _ = Glibc.kill(pid, signal)
        }
    }

    private func launch(_ node: Int) async throws {
        LocalServers.log(
            "starting RabbitMQ cluster node \(node) on 127.0.0.1:\(Self.amqpPort(node)) (node \(Self.nodeName(node)))")
        _ = try await LocalServers.daemon(
            "cluster-node-\(node)", try LocalServers.rabbitMQSbin() + "/rabbitmq-server", [],
            environment: Self.environment(node), log: "\(Self.state)/\(node)/log/stdout.log", truncateLog: true)
    }

    /// `await_startup` fails at once while the node has not registered with epmd yet, so it is polled. A node
    /// restarted alone after the whole cluster stopped may wait minutes for its peers' tables.
    private func awaitStartup(_ node: Int) async throws {
        let clock = ContinuousClock()
        let grace = clock.now + .seconds(15)
        do {
            _ = try await LocalServers.poll("cluster node \(node) to start", timeout: .seconds(300), every: .seconds(1))
            {
                () -> Bool? in
                if (try? await rabbitmqctl(node: node, ["-q", "await_startup", "--timeout", "5"])) != nil {
                    return true
                }
                if clock.now >= grace, Self.beamPid(node) == nil {
                    throw ServerFixtureError("its VM is gone")
                }
                return nil
            }
        } catch {
            throw ServerFixtureError(
                "cluster node \(node) did not start (\(error)); the end of its stdout.log:\n"
                    + LocalServers.lastLines(of: "\(Self.state)/\(node)/log/stdout.log", 30))
        }
    }
}
