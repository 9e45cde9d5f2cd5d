package import ChildProcesses
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// What the server fixtures (``RabbitMQCluster``, ``PostgresReplica``, ``ManagedPostgres``, and TestSupport's
/// `RabbitMQBroker` and `PostgresServer`) share: where the servers keep their state, the servers' own tools, and
/// running them.
///
/// `scripts/services` installs the servers and runs the main and fault pairs (what a person types); the failover
/// topologies are started, stopped, reset and described here (`livedelivery-servers` gives a person and the
/// scripts the same), and the faults the tests play on them (a crash, a promotion, a switchover) are these
/// fixtures' too, through the servers' own tools (`rabbitmqctl`, `pg_ctl`, `pg_autoctl`, `psql`) and signals.
/// Every tool is run as a ``ChildProcess``: off the cooperative pool, with an empty signal mask (a daemon started
/// here sees the signals that stop it).
package enum LocalServers {
    /// The servers' state folder: `LIVEDELIVERY_STATE_DIR`, else `.state` in the checkout of `LIVEDELIVERY_SERVICES`
    /// (the `scripts/services` that started the main pair), else in this checkout.
    package static var stateDirectory: String {
        if let value = environment["LIVEDELIVERY_STATE_DIR"], !value.isEmpty { return value }
        let root =
            environment["LIVEDELIVERY_SERVICES"].flatMap { $0.isEmpty ? nil : URL(fileURLWithPath: $0) }?
            .deletingLastPathComponent().deletingLastPathComponent()
            ?? URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        return root.appendingPathComponent(".state").path
    }

    /// PostgreSQL 15's programs (Debian's `postgresql-15` and `postgresql-client-15`).
    package static let postgresBin = "/usr/lib/postgresql/15/bin"

    /// RabbitMQ's `sbin` folder (Debian's `rabbitmq-server`), the newest version installed.
    package static func rabbitMQSbin() throws -> String {
        let lib = "/usr/lib/rabbitmq/lib"
        let versions = ((try? FileManager.default.contentsOfDirectory(atPath: lib)) ?? [])
            .filter { $0.hasPrefix("rabbitmq_server-") }.sorted()
        guard let newest = versions.last else {
            throw ServerFixtureError("RabbitMQ is not installed (scripts/services install installs it)")
        }
        return "\(lib)/\(newest)/sbin"
    }

    package static var environment: [String: String] { ProcessInfo.processInfo.environment }

    /// The environment `rabbitmqctl` and `rabbitmq-server` need for one local node: its name, loopback ports, and
    /// its configuration, data, logs and pid file under `directory`.
    package static func rabbitMQEnvironment(
        home: String, directory: String, nodeName: String, port: Int, distributionPort: Int
    ) -> [String: String] {
        environment.merging([
            "HOME": home,
            "RABBITMQ_NODENAME": nodeName,
            "RABBITMQ_NODE_IP_ADDRESS": "127.0.0.1",
            "RABBITMQ_NODE_PORT": "\(port)",
            "RABBITMQ_DIST_PORT": "\(distributionPort)",
            "RABBITMQ_CONFIG_FILE": "\(directory)/rabbitmq",
            "RABBITMQ_ADVANCED_CONFIG_FILE": "\(directory)/advanced.config",
            "RABBITMQ_MNESIA_BASE": "\(directory)/mnesia",
            "RABBITMQ_LOG_BASE": "\(directory)/log",
            "RABBITMQ_ENABLED_PLUGINS_FILE": "\(directory)/enabled_plugins",
            "RABBITMQ_PID_FILE": "\(directory)/rabbitmq.pid",
        ]) { $1 }
    }

    /// Runs a program to completion and returns what it printed (its standard output and error, in one);
    /// throws, with the end of that output, when it exits with another status than 0.
    @discardableResult
    package static func run(
        _ executable: String, _ arguments: [String], environment: [String: String] = environment,
        asPostgres: Bool = false, timeout: Duration = .seconds(120), appendingTo log: String? = nil
    ) async throws -> String {
        let (executable, arguments) = asPostgres ? Self.asPostgres(executable, arguments) : (executable, arguments)
        let outputPath =
            log ?? FileManager.default.temporaryDirectory.appendingPathComponent("fixture-\(UUID().uuidString)").path
        defer { if log == nil { try? FileManager.default.removeItem(atPath: outputPath) } }
        let child = try spawn(
            URL(fileURLWithPath: executable).lastPathComponent, executable, arguments, environment: environment,
            outputPath: outputPath, truncate: log == nil, session: false)
        let status: Int32
        do {
            status = try await child.waitForExit(timeout: timeout)
        } catch {
            await child.stop()
            throw error
        }
        let output = log == nil ? child.output : ""
        guard status == 0 else {
            let command = ([executable] + arguments).joined(separator: " ")
            let tail = log.map { lastLines(of: $0) } ?? output
            throw ServerFixtureError("\(command) exited with status \(status):\n\(tail)")
        }
        return output
    }

    /// Starts a daemon in a session of its own (its processes can be killed together, and a terminal's signals
    /// never reach it), its output in `log`, and returns it; its pid is its session's id.
    package static func daemon(
        _ name: String, _ executable: String, _ arguments: [String], environment: [String: String],
        log: String, truncateLog: Bool
    ) async throws -> ChildProcess {
        let child = try spawn(
            name, executable, arguments, environment: environment, outputPath: log, truncate: truncateLog,
            session: true)
        _ = try await poll("\(name) in a session of its own", timeout: .seconds(10), every: .milliseconds(100)) {
            () -> Bool? in
            if !child.isRunning {
                throw ServerFixtureError("\(name) exited with status \(child.exitStatus ?? -1):\n\(lastLines(of: log))")
            }
            return session(of: child.pid) == child.pid ? true : nil
        }
        return child
    }

    /// Starts `executable` as a ``ChildProcess`` (an empty signal mask, default handlers), through Python, which
    /// first closes every descriptor but 0-2 and, for a daemon, makes a session: a server started from a test must
    /// not hold the test process's sockets, pipes and listeners (Foundation's `Process` learns that a child exited
    /// when a socket it handed over closes; a daemon holding a copy would make its caller wait for ever).
    private static func spawn(
        _ name: String, _ executable: String, _ arguments: [String], environment: [String: String],
        outputPath: String, truncate: Bool, session: Bool
    ) throws -> ChildProcess {
        let prelude = """
            import os, sys
            os.closerange(3, os.sysconf("SC_OPEN_MAX"))
            if sys.argv[1] == "session": os.setsid()
            os.execv(sys.argv[2], sys.argv[2:])
            """
        return try ChildProcess(
            name: name, executable: "/usr/bin/python3",
            arguments: ["-c", prelude, session ? "session" : "same", executable] + arguments,
            environment: environment, outputPath: outputPath, truncateOutput: truncate)
    }

    /// PostgreSQL's programs refuse root: as root, a command runs as the `postgres` user (`runuser`).
    package static func asPostgres(_ executable: String, _ arguments: [String]) -> (String, [String]) {
        getuid() == 0
            ? ("/sbin/runuser", ["-u", "postgres", "--", executable] + arguments) : (executable, arguments)
    }

    /// Polls until `produce` returns a value (nil means "not yet") and returns it; `every` paces the checks.
    package static func poll<Value>(
        _ what: String, timeout: Duration, every interval: Duration, _ produce: () async throws -> Value?
    ) async throws -> Value {
        let clock = ContinuousClock()
        let deadline = clock.now + timeout
        while true {
            if let value = try await produce() { return value }
            if clock.now >= deadline { throw ServerFixtureError("\(what): not so after \(timeout)") }
            try await Task.sleep(for: interval)
        }
    }

    /// Says what a fixture does, on standard error, as `scripts/services` does.
    package static func log(_ message: String) {
        FileHandle.standardError.write(Data("fixture: \(message)\n".utf8))
    }

    /// The last lines of a log file, for an error.
    package static func lastLines(of path: String, _ count: Int = 20) -> String {
        let text = (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
        return text.split(separator: "\n", omittingEmptySubsequences: false).suffix(count).joined(separator: "\n")
    }

    // MARK: Processes and ports, from /proc

    /// Whether a process exists and is not a zombie.
    package static func processAlive(_ pid: Int32) -> Bool {
        guard let fields = statFields(pid), let state = fields.first else { return false }
        return state != "Z"
    }

    /// A process's session id (`/proc/PID/stat`), nil when it is gone.
    package static func session(of pid: Int32) -> Int32? {
        guard let fields = statFields(pid), fields.count > 3 else { return nil }
        return Int32(fields[3])
    }

    /// The fields of `/proc/PID/stat` after the command's name: state, ppid, pgrp, session, …
    private static func statFields(_ pid: Int32) -> [Substring]? {
        guard let stat = procFile("/proc/\(pid)/stat"),
            let end = stat.lastIndex(of: ")")
        else { return nil }
        return stat[stat.index(after: end)...].split(separator: " ")
    }

    /// The pids of every process now.
    package static func allPids() -> [Int32] {
        ((try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []).compactMap { Int32($0) }
    }

    /// The pids of every process of a session.
    package static func sessionPids(_ session: Int32) -> [Int32] {
        allPids().filter { Self.session(of: $0) == session }
    }

    /// Whether something listens on a loopback TCP port, read from the kernel's table rather than probed with a
    /// connection: a probe would show up, however briefly, among a broker's client connections.
    package static func portListening(_ port: Int) -> Bool {
        let suffix = ":" + String(format: "%04X", port)
        for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
            guard let text = procFile(table) else { continue }
            for line in text.split(separator: "\n").dropFirst() {
                let fields = line.split(separator: " ")
                if fields.count > 3, fields[3] == "0A", fields[1].hasSuffix(suffix) { return true }
            }
        }
        return false
    }

    /// A file of `/proc`, read to its end. `String(contentsOfFile:)` and `Data(contentsOf:)` stop after the first
    /// read of a file whose size says 0, as every `/proc` file's does: `/proc/net/tcp` then ends after 27 sockets,
    /// and under the whole test run the cluster's listeners were past them.
    package static func procFile(_ path: String) -> String? {
        guard let file = FileHandle(forReadingAtPath: path) else { return nil }
        defer { try? file.close() }
        return String(decoding: (try? file.readToEnd()) ?? Data(), as: UTF8.self)
    }
}

/// A server fixture's operation that failed: what, and what the server's tool said.
package struct ServerFixtureError: Error, CustomStringConvertible {
    package var description: String
    package init(_ description: String) { self.description = description }
}
