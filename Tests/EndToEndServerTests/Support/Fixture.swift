import APNsSimulator
import ChildProcesses
import Crypto
import Foundation
import LiveDeliveryJSON
import Logging
import Postgres
import RabbitMQ
import Synchronization
import TestSupport

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Everything one end-to-end test needs, private to it: a fresh database, its own exchange and queue names,
/// its own in-process APNs simulator with a generated provider key, a folder for logs and files, and the
/// `livedelivery run` processes it starts. ``shutdown()`` removes all of it (logs are kept when a test fails:
/// their folder is printed).
final class Fixture: Sendable {
    /// `main` and `fault`: a single broker and database (the fault pair may be restarted by the test).
    /// `cluster`: the three-node RabbitMQ cluster, with the main database. `replica`: the main broker,
    /// and the primary/standby pair through one failover URL (`target_session_attrs=read-write`).
    enum Servers: Sendable { case main, fault, cluster, replica }

    let name: String
    let servers: Servers
    /// One AMQP URL, or the cluster's nodes, comma-separated.
    let amqpURL: String
    let postgresURL: String
    let databaseName: String
    let exchange: String
    let queue: String
    let directory: URL
    let simulator: RunningSimulator
    let database: PostgresClient
    let logger: Logger
    let keyID = "E2EKEY0001"
    let teamID = "E2ETEAM001"
    private let serverPostgresURL: String
    private let workers = Mutex<[ChildProcess]>([])

    private init(
        name: String, servers: Servers, amqpURL: String, serverPostgresURL: String, postgresURL: String,
        databaseName: String, directory: URL, simulator: RunningSimulator, database: PostgresClient, logger: Logger
    ) {
        self.name = name
        self.servers = servers
        self.amqpURL = amqpURL
        self.serverPostgresURL = serverPostgresURL
        self.postgresURL = postgresURL
        self.databaseName = databaseName
        self.exchange = "\(name).events"
        self.queue = "\(name).queue"
        self.directory = directory
        self.simulator = simulator
        self.database = database
        self.logger = logger
    }

    /// Creates the database (and applies the migrations with `livedelivery migrate`), the key and the simulator.
    static func start(_ label: String, servers: Servers = .main) async throws -> Fixture {
        let name = TestEnvironment.uniqueName("e2e-\(label)")
        var logger = Logger(label: "e2e.\(label)")
        logger.logLevel = .warning
        let amqpURL: String
        let serverURL: String
        var workerServerURL: String?
        switch servers {
        case .main: (amqpURL, serverURL) = (TestEnvironment.amqpURL, TestEnvironment.postgresURL)
        case .fault: (amqpURL, serverURL) = (TestEnvironment.faultAMQPURL, TestEnvironment.faultPostgresURL)
        case .cluster: (amqpURL, serverURL) = (TestEnvironment.clusterAMQPURLs, TestEnvironment.postgresURL)
        case .replica:
            (amqpURL, serverURL) = (TestEnvironment.amqpURL, TestEnvironment.replicaPrimaryURL)
            workerServerURL = TestEnvironment.replicaURL
        }
        let databaseName = name.replacingOccurrences(of: "-", with: "_")
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(name)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)

        try await TestEnvironment.asSuperuser(on: serverURL) {
            try await $0.execute(unsafeSQL: "CREATE DATABASE \(databaseName) OWNER \(PostgresLogin.owner.rawValue)")
        }
        // The workers run as the worker's login; `migrate` and the test's own reads as the owner's.
        let postgresURL = PostgresLogin.worker.url(workerServerURL ?? serverURL, database: databaseName)
        var databaseConfiguration = try PostgresConfiguration(
            PostgresLogin.owner.url(workerServerURL ?? serverURL, database: databaseName))
        databaseConfiguration.poolSize = 2
        let database = PostgresClient(configuration: databaseConfiguration, logger: logger)

        // The provider key the worker signs with, and the simulator trusts.
        let key = P256.Signing.PrivateKey()
        let keyFile = directory.appendingPathComponent("AuthKey.p8")
        try Data(key.pemRepresentation.utf8).write(to: keyFile)
        var configuration = SimulatorConfiguration()
        configuration.keys = [.init(keyID: "E2EKEY0001", teamID: "E2ETEAM001", publicKey: key.publicKey)]
        configuration.contentStateShape = try ContentStateShape(
            contentsOfFile: TestEnvironment.projectRoot.appendingPathComponent(
                "Config/apns-sim/delivery-attributes.json"
            ).path)
        configuration.threads = 1
        let simulator = try await APNsSimulator.start(configuration, logger: logger)

        let apps: [[String: String]] = [
            [
                "bundleID": Scenario.bundleID, "teamID": "E2ETEAM001", "keyID": "E2EKEY0001", "keyFile": keyFile.path,
                "environment": "production",
            ]
        ]
        try JSONSerialization.data(withJSONObject: apps, options: [.prettyPrinted, .sortedKeys])
            .write(to: directory.appendingPathComponent("apns-apps.json"))

        let fixture = Fixture(
            name: name, servers: servers, amqpURL: amqpURL, serverPostgresURL: serverURL, postgresURL: postgresURL,
            databaseName: databaseName, directory: directory, simulator: simulator, database: database, logger: logger)
        try await fixture.migrate()
        return fixture
    }

    /// The environment of a `livedelivery` child process (see WORKER_CONTRACT.md).
    func environment(worker: String) -> [String: String] {
        [
            "LIVEDELIVERY_CONFIG_DIR": TestEnvironment.projectRoot.appendingPathComponent("Config").path,
            "LIVEDELIVERY_MIGRATIONS_DIR": TestEnvironment.projectRoot.appendingPathComponent("sql").path,
            servers == .cluster ? "LIVEDELIVERY_AMQP_URLS" : "LIVEDELIVERY_AMQP_URL": amqpURL,
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
            "LIVEDELIVERY_LOG_LEVEL": "info",
        ]
    }

    /// The owner's login on this test's database: `livedelivery migrate` runs as it.
    var ownerPostgresURL: String { PostgresLogin.owner.url(postgresURL) }

    /// `livedelivery migrate` on this test's database.
    func migrate() async throws {
        let child = try ChildProcess.livedelivery(
            name: "migrate-\(UUID().uuidString.prefix(4))", arguments: ["migrate"],
            environment: environment(worker: "migrate").merging(["LIVEDELIVERY_POSTGRES_URL": ownerPostgresURL]) { $1 },
            logDirectory: directory)
        let status = try await child.waitForExit(timeout: .seconds(120))
        guard status == 0 else { throw HarnessError("livedelivery migrate exited \(status):\n\(child.tail())") }
    }

    /// Starts `livedelivery run` and waits until its /readyz answers 200.
    /// With `ready: false`, waits only for the HTTP endpoint (for a worker whose servers are unreachable).
    @discardableResult
    func startWorker(
        _ worker: String, extraEnvironment: [String: String] = [:], ready: Bool = true
    ) async throws -> Worker {
        let portFile = directory.appendingPathComponent("\(worker).port")
        try? FileManager.default.removeItem(at: portFile)
        let child = try ChildProcess.livedelivery(
            name: worker, arguments: ["run"], environment: environment(worker: worker).merging(extraEnvironment) { $1 },
            logDirectory: directory)
        workers.withLock { $0.append(child) }
        let port = try await eventuallyValue("\(worker) to write its metrics port", timeout: .seconds(120)) {
            () -> Int? in
            if let status = child.exitStatus { throw HarnessError("\(worker) exited \(status):\n\(child.tail())") }
            guard let text = try? String(contentsOf: portFile, encoding: .utf8) else { return nil }
            return Int(text.trimmingCharacters(in: .whitespacesAndNewlines))
        }
        let worker = Worker(process: child, metricsPort: port)
        guard ready else { return worker }
        try await eventually("\(worker.process.name) to be ready", timeout: .seconds(120)) {
            if let status = child.exitStatus {
                throw HarnessError("\(worker.process.name) exited \(status):\n\(child.tail())")
            }
            return try await worker.get("/readyz").status == 200
        }
        return worker
    }

    // MARK: Publishing

    /// Publishes every event with confirms (pipelined), reconnecting (to the next node of a cluster) and
    /// publishing again after a broker failure.
    func publish(_ events: [ScenarioEvent]) async throws {
        try await publish(events.map { ($0.type, $0.body, $0.eventID) })
    }

    func publish(_ messages: [(routingKey: String, body: [UInt8], messageID: String?)], window: Int = 500) async throws
    {
        let endpoints = try AMQPEndpoints(urls: amqpURL)
        var remaining = messages[...]
        var attempts = 0
        var node = 0
        while !remaining.isEmpty {
            attempts += 1
            let publisher: RabbitMQPublisher
            do {
                (publisher, node) = try await RabbitMQPublisher.connect(to: endpoints, startingAt: node, logger: logger)
            } catch {
                guard attempts < 200 else { throw error }
                try await Task.sleep(for: .milliseconds(250))  // a broker restart in progress: retry pacing
                continue
            }
            let exchange = self.exchange
            let failedFrom: Int? = await withTaskGroup(of: Int?.self) { group in
                var inFlight = 0
                var firstFailure: Int?
                for index in remaining.indices {
                    if inFlight >= window, let result = await group.next() {
                        inFlight -= 1
                        if let result { firstFailure = min(firstFailure ?? result, result) }
                    }
                    if firstFailure != nil { break }
                    let message = remaining[index]
                    group.addTask {
                        do {
                            try await publisher.publish(
                                exchange: exchange, routingKey: message.routingKey, body: message.body,
                                properties: RabbitMQMessageProperties(
                                    contentType: "application/json", messageID: message.messageID))
                            return nil
                        } catch {
                            return index
                        }
                    }
                    inFlight += 1
                }
                for await result in group {
                    if let result { firstFailure = min(firstFailure ?? result, result) }
                }
                return firstFailure
            }
            await publisher.close()
            if let failedFrom {
                guard attempts < 200 else { throw HarnessError("publishing kept failing") }
                // Publish again from the first unconfirmed message (on the next node); the worker
                // deduplicates by event_id.
                remaining = remaining[failedFrom...]
                node += 1
                try await Task.sleep(for: .milliseconds(250))
            } else {
                remaining = []
            }
        }
    }

    // MARK: Inspection

    /// The first column of the first row of a counting query.
    func count(_ sql: String) async throws -> Int {
        let rows = try await database.query(PostgresQuery(unsafeSQL: sql))
        guard let row = rows.first else { return 0 }
        return try row.decode(Int.self, at: 0)
    }

    func strings(_ sql: String) async throws -> [String] {
        try await database.query(PostgresQuery(unsafeSQL: sql)).map { try $0.decode(String.self, at: 0) }
    }

    /// Every event_id in the inbox.
    func inboxEventIDs() async throws -> [String] { try await strings("SELECT event_id FROM inbox") }

    /// Waits until every given event is in the inbox, the outbox is empty and no activity is waiting for a push.
    func waitUntilSettled(eventIDs: Set<String>, timeout: Duration = .seconds(180)) async throws {
        try await eventually("all \(eventIDs.count) events in the inbox", timeout: timeout, every: .milliseconds(250)) {
            let seen = Set(try await inboxEventIDs())
            return eventIDs.isSubset(of: seen)
        }
        try await eventually("the outbox to drain", timeout: timeout, every: .milliseconds(250)) {
            try await count("SELECT count(*) FROM outbox") == 0
        }
    }

    /// The simulator's records for one device token, in the order it received them.
    func pushes(token: String) -> [PushRecord] {
        simulator.pushes(token: token).sorted { $0.sequence < $1.sequence }
    }

    // MARK: Clean-up

    var runningWorkers: [ChildProcess] { workers.withLock { $0 } }

    /// Stops every worker still running (SIGKILL), drops the database and the queues, stops the simulator and
    /// removes the folder unless `keepLogs`.
    func shutdown(keepLogs: Bool = false) async {
        for worker in runningWorkers { await worker.stop() }
        await database.shutdown()
        _ = try? await TestEnvironment.asSuperuser(on: serverPostgresURL) {
            try await $0.execute(unsafeSQL: "DROP DATABASE IF EXISTS \(databaseName) WITH (FORCE)")
        }
        if let endpoints = try? AMQPEndpoints(urls: amqpURL),
            let (connection, _) = try? await RabbitMQConnection.connect(to: endpoints, logger: logger)
        {
            for queue in [queue, "\(queue).dead-letter"] { _ = try? await connection.deleteQueue(queue) }
            for exchange in [exchange, "\(exchange).dlx"] { try? await connection.deleteExchange(exchange) }
            await connection.close()
        }
        try? await simulator.shutdown()
        if keepLogs {
            print("end-to-end logs kept in \(directory.path)")
        } else {
            try? FileManager.default.removeItem(at: directory)
        }
    }

    /// Runs `body` with a fresh fixture and always cleans up; logs are kept (and printed) when `body` throws.
    static func with<Result>(
        _ label: String, servers: Servers = .main, _ body: (Fixture) async throws -> Result
    ) async throws -> Result {
        let fixture = try await start(label, servers: servers)
        do {
            let result = try await body(fixture)
            await fixture.shutdown()
            return result
        } catch {
            for worker in fixture.runningWorkers {
                print("── \(worker.name) (last lines)\n\(worker.tail(40))")
            }
            await fixture.shutdown(keepLogs: true)
            throw error
        }
    }
}

/// A running `livedelivery run` and its HTTP endpoint.
struct Worker: Sendable {
    let process: ChildProcess
    let metricsPort: Int

    struct Response: Sendable {
        var status: Int
        var body: String
    }

    func get(_ path: String) async throws -> Response {
        var request = URLRequest(url: URL(string: "http://127.0.0.1:\(metricsPort)\(path)")!)
        request.timeoutInterval = 10
        let (data, response) = try await URLSession.shared.data(for: request)
        return Response(
            status: (response as? HTTPURLResponse)?.statusCode ?? 0, body: String(decoding: data, as: UTF8.self))
    }
}
