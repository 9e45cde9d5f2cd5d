package import APNsSimulator
package import ChildProcesses
import Crypto
package import Foundation
package import Logging
import Postgres
import RabbitMQ
import Synchronization
import TestSupport

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// One private deployment of `livedelivery` on the local servers, for an end-to-end test or a benchmark
/// (the one harness both use):
/// - a fresh database, created by the superuser and owned by the owner's role, migrated by
///   `livedelivery migrate` as the owner; the workers log in as the worker's login;
/// - its own exchange and queue names;
/// - an in-process APNs simulator that trusts a generated provider key, and an apps file naming it;
/// - a folder for those files and the processes' logs;
/// - the `livedelivery run` processes it starts, each found by its HTTP port.
///
/// ``shutdown(keepLogs:)`` removes all of it.
package final class WorkerDeployment: Sendable {
    package let name: String
    package let databaseName: String
    /// One AMQP URL, or a cluster's nodes, comma-separated.
    package let amqpURL: String
    /// The workers' login on this database (through the failover URL, when one was given).
    package let postgresURL: String
    /// The server the database was created on.
    package let serverPostgresURL: String
    package let exchange: String
    package let queue: String
    package let directory: URL
    package let simulator: RunningSimulator
    package let keyID: String
    package let teamID: String
    /// The `livedelivery` executable.
    package let executable: String
    package let workerLogLevel: String
    private let workers = Mutex<[ChildProcess]>([])

    private init(
        name: String, databaseName: String, amqpURL: String, postgresURL: String, serverPostgresURL: String,
        directory: URL, simulator: RunningSimulator, keyID: String, teamID: String, executable: String,
        workerLogLevel: String
    ) {
        self.name = name
        self.databaseName = databaseName
        self.amqpURL = amqpURL
        self.postgresURL = postgresURL
        self.serverPostgresURL = serverPostgresURL
        self.exchange = "\(name).events"
        self.queue = "\(name).queue"
        self.directory = directory
        self.simulator = simulator
        self.keyID = keyID
        self.teamID = teamID
        self.executable = executable
        self.workerLogLevel = workerLogLevel
    }

    /// Creates the database on `serverURL`'s server (the workers reach it through `workerServerURL`, a
    /// failover URL naming the primary and its standby, or the same server), the key, the simulator
    /// (`simulator` adjusts its configuration; the key is set here) and the apps file for `bundleID`,
    /// then migrates.
    package static func start(
        name: String, amqpURL: String, serverURL: String, workerServerURL: String? = nil, bundleID: String,
        keyID: String, teamID: String, executable: String, workerLogLevel: String, logger: Logger,
        simulator adjust: (inout SimulatorConfiguration) throws -> Void = { _ in }
    ) async throws -> WorkerDeployment {
        let databaseName = name.replacingOccurrences(of: "-", with: "_")
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(name)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        try await TestEnvironment.asSuperuser(on: serverURL) {
            try await $0.execute(unsafeSQL: "CREATE DATABASE \(databaseName) OWNER \(PostgresLogin.owner.rawValue)")
        }

        // The provider key the workers sign with, and the simulator trusts.
        let key = P256.Signing.PrivateKey()
        let keyFile = directory.appendingPathComponent("AuthKey.p8")
        try Data(key.pemRepresentation.utf8).write(to: keyFile)
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: keyFile.path)
        var configuration = SimulatorConfiguration()
        configuration.threads = 1
        try adjust(&configuration)
        configuration.keys = [.init(keyID: keyID, teamID: teamID, publicKey: key.publicKey)]
        let simulator = try await APNsSimulator.start(configuration, logger: logger)
        let apps = [
            [
                "bundleID": bundleID, "teamID": teamID, "keyID": keyID, "keyFile": keyFile.path,
                "environment": "production",
            ]
        ]
        try JSONSerialization.data(withJSONObject: apps, options: [.prettyPrinted, .sortedKeys])
            .write(to: directory.appendingPathComponent("apns-apps.json"))

        let deployment = WorkerDeployment(
            name: name, databaseName: databaseName, amqpURL: amqpURL,
            postgresURL: PostgresLogin.worker.url(workerServerURL ?? serverURL, database: databaseName),
            serverPostgresURL: serverURL, directory: directory, simulator: simulator, keyID: keyID, teamID: teamID,
            executable: executable, workerLogLevel: workerLogLevel)
        try await deployment.migrate()
        return deployment
    }

    /// The owner's login on this database: `livedelivery migrate` runs as it.
    package var ownerPostgresURL: String { PostgresLogin.owner.url(postgresURL) }

    /// The settings of a `livedelivery` process named `worker` (docs/configuration.md).
    package func environment(worker: String) -> [String: String] {
        let root = TestEnvironment.projectRoot
        return [
            "LIVEDELIVERY_CONFIG_DIR": root.appendingPathComponent("Config").path,
            "LIVEDELIVERY_MIGRATIONS_DIR": root.appendingPathComponent("sql").path,
            amqpURL.contains(",") ? "LIVEDELIVERY_AMQP_URLS" : "LIVEDELIVERY_AMQP_URL": amqpURL,
            "LIVEDELIVERY_AMQP_EXCHANGE": exchange,
            "LIVEDELIVERY_AMQP_QUEUE": queue,
            "LIVEDELIVERY_POSTGRES_URL": postgresURL,
            "LIVEDELIVERY_APNS_BASE_URL": simulator.baseURL,
            "LIVEDELIVERY_APNS_CA_FILE": simulator.certificatePEMPath,
            "LIVEDELIVERY_APNS_APPS_FILE": directory.appendingPathComponent("apns-apps.json").path,
            "LIVEDELIVERY_HTTP_HOST": "127.0.0.1",
            "LIVEDELIVERY_HTTP_PORT": "0",
            "LIVEDELIVERY_HTTP_PORT_FILE": directory.appendingPathComponent("\(worker).port").path,
            "LIVEDELIVERY_WORKER_ID": "\(name)-\(worker)",
            "LIVEDELIVERY_LOG_LEVEL": workerLogLevel,
        ]
    }

    /// Starts `livedelivery ARGS` with `environment` over this process's own (whose `LIVEDELIVERY_*`
    /// settings, the servers' URLs of the caller, never reach it), its output in the folder's `NAME.log`.
    package func process(name: String, arguments: [String], environment: [String: String]) throws -> ChildProcess {
        try ChildProcess(
            name: name, executable: executable, arguments: arguments,
            environment: Self.childEnvironment(environment),
            outputPath: directory.appendingPathComponent("\(name).log").path)
    }

    /// This process's environment without its `LIVEDELIVERY_*` settings (but `LIVEDELIVERY_BIN`), with
    /// `environment` over it.
    package static func childEnvironment(_ environment: [String: String]) -> [String: String] {
        var merged = ProcessInfo.processInfo.environment
        for key in merged.keys where key.hasPrefix("LIVEDELIVERY_") && key != "LIVEDELIVERY_BIN" { merged[key] = nil }
        merged.merge(environment) { $1 }
        return merged
    }

    /// `livedelivery migrate` on this database, as the owner.
    package func migrate() async throws {
        let child = try process(
            name: "migrate-\(UUID().uuidString.prefix(4))", arguments: ["migrate"],
            environment: environment(worker: "migrate").merging(["LIVEDELIVERY_POSTGRES_URL": ownerPostgresURL]) {
                $1
            })
        let status = try await child.waitForExit(timeout: .seconds(120))
        guard status == 0 else { throw HarnessError("livedelivery migrate exited \(status):\n\(child.tail())") }
    }

    /// Starts `livedelivery run` and waits until its `/readyz` answers 200 (with `ready: false`, only until
    /// its HTTP endpoint has a port: a worker whose servers are unreachable).
    @discardableResult
    package func startWorker(
        _ worker: String, extraEnvironment: [String: String] = [:], ready: Bool = true
    ) async throws -> RunningWorker {
        let portFile = directory.appendingPathComponent("\(worker).port")
        try? FileManager.default.removeItem(at: portFile)
        let child = try process(
            name: worker, arguments: ["run"],
            environment: environment(worker: worker).merging(extraEnvironment) { $1 })
        workers.withLock { $0.append(child) }
        let port = try await eventuallyValue("\(worker) to write its HTTP port", timeout: .seconds(120)) {
            () -> Int? in
            if let status = child.exitStatus { throw HarnessError("\(worker) exited \(status):\n\(child.tail())") }
            guard let text = try? String(contentsOf: portFile, encoding: .utf8) else { return nil }
            return Int(text.trimmingCharacters(in: .whitespacesAndNewlines))
        }
        let running = RunningWorker(process: child, metricsPort: port)
        guard ready else { return running }
        _ = try await eventuallyValue("\(worker) to be ready", timeout: .seconds(120)) { () -> Bool? in
            if let status = child.exitStatus { throw HarnessError("\(worker) exited \(status):\n\(child.tail())") }
            return try await running.get("/readyz").status == 200 ? true : nil
        }
        return running
    }

    /// The workers started, running or not.
    package var startedWorkers: [ChildProcess] { workers.withLock { $0 } }

    /// Forgets the workers started (after the caller stopped them).
    package func forgetWorkers() { workers.withLock { $0.removeAll() } }

    /// Stops every worker still running (SIGKILL), drops the database and the queues, stops the
    /// simulator, and removes the folder unless `keepLogs`.
    package func shutdown(keepLogs: Bool = false, logger: Logger) async {
        for worker in startedWorkers { await worker.stop() }
        _ = try? await TestEnvironment.asSuperuser(on: serverPostgresURL) {
            try await $0.execute(unsafeSQL: "DROP DATABASE IF EXISTS \(databaseName) WITH (FORCE)")
        }
        if let endpoints = try? AMQPEndpoints(urls: amqpURL),
            let (connection, _) = try? await RabbitMQConnection.connect(to: endpoints, logger: logger)
        {
            for queue in [queue, "\(queue).dead-letter"] { _ = try? await connection.deleteQueue(queue) }
            for exchange in [exchange, "\(exchange).dlx", "\(exchange).cells"] {
                try? await connection.deleteExchange(exchange)
            }
            await connection.close()
        }
        try? await simulator.shutdown()
        if keepLogs {
            print("logs kept in \(directory.path)")
        } else {
            try? FileManager.default.removeItem(at: directory)
        }
    }
}

/// A running `livedelivery run` and its HTTP endpoint.
package struct RunningWorker: Sendable {
    package let process: ChildProcess
    package let metricsPort: Int

    package struct Response: Sendable {
        package var status: Int
        package var body: String
    }

    package func get(_ path: String) async throws -> Response {
        var request = URLRequest(url: URL(string: "http://127.0.0.1:\(metricsPort)\(path)")!)
        request.timeoutInterval = 10
        let (data, response) = try await URLSession.shared.data(for: request)
        return Response(
            status: (response as? HTTPURLResponse)?.statusCode ?? 0, body: String(decoding: data, as: UTF8.self))
    }
}

package struct HarnessError: Error, CustomStringConvertible {
    package var description: String
    package init(_ description: String) { self.description = description }
}

/// A condition that did not hold by its deadline.
package struct DeadlineExceeded: Error, CustomStringConvertible {
    package var what: String
    package var timeout: Duration
    package var last: String?
    package var description: String {
        "timed out after \(timeout) waiting for \(what)" + (last.map { " (last seen: \($0))" } ?? "")
    }
}

/// Polls until `produce` returns a value (nil, or a thrown error, means "not yet"; the last error is
/// reported on timeout) and returns it. Waiting for a condition, never for time: the interval only
/// paces the checks, and the deadline is generous, so a loaded machine is slower, not flaky.
package func eventuallyValue<Value>(
    _ what: String, timeout: Duration = .seconds(90), every interval: Duration = .milliseconds(100),
    _ produce: () async throws -> Value?
) async throws -> Value {
    let clock = ContinuousClock()
    let deadline = clock.now + timeout
    var last: String?
    while true {
        do {
            if let value = try await produce() { return value }
            last = nil
        } catch {
            last = "\(error)"
        }
        if clock.now >= deadline { throw DeadlineExceeded(what: what, timeout: timeout, last: last) }
        try await Task.sleep(for: interval)
    }
}
