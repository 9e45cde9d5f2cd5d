import APNsSimulator
import ChildProcesses
import Foundation
import LiveDeliveryJSON
import Logging
import Postgres
import RabbitMQ
import TestSupport
import WorkerHarness

/// Everything one end-to-end test needs, private to it: a ``WorkerDeployment`` (a fresh database, its own
/// exchange and queue names, its own in-process APNs simulator with a generated provider key, a folder for
/// logs and files, and the `livedelivery run` processes it starts), and the test's own reads of the
/// database. ``shutdown()`` removes all of it (logs are kept when a test fails: their folder is printed).
final class Fixture: Sendable {
    /// `main` and `fault`: a single broker and database (the fault pair may be restarted by the test).
    /// `cluster`: the three-node RabbitMQ cluster, with the main database. `replica`: the main broker,
    /// and the primary/standby pair through one failover URL (`target_session_attrs=read-write`). `managed`:
    /// the main broker, and the pair pg_auto_failover manages, through its failover URL alone (the database is
    /// created on whichever node is the primary).
    enum Servers: Sendable { case main, fault, cluster, replica, managed }

    let deployment: WorkerDeployment
    let servers: Servers
    /// The owner's login on the test's database: the test's own reads and writes.
    let database: PostgresClient
    let logger: Logger

    var name: String { deployment.name }
    /// One AMQP URL, or the cluster's nodes, comma-separated.
    var amqpURL: String { deployment.amqpURL }
    var postgresURL: String { deployment.postgresURL }
    var databaseName: String { deployment.databaseName }
    var exchange: String { deployment.exchange }
    var queue: String { deployment.queue }
    var directory: URL { deployment.directory }
    var simulator: RunningSimulator { deployment.simulator }
    var keyID: String { deployment.keyID }
    var teamID: String { deployment.teamID }

    private init(deployment: WorkerDeployment, servers: Servers, database: PostgresClient, logger: Logger) {
        self.deployment = deployment
        self.servers = servers
        self.database = database
        self.logger = logger
    }

    /// Creates the deployment (its database migrated with `livedelivery migrate`, the key and the simulator,
    /// which `simulator` may adjust further).
    static func start(
        _ label: String, servers: Servers = .main,
        simulator adjust: (inout SimulatorConfiguration) throws -> Void = { _ in }
    ) async throws -> Fixture {
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
        case .managed: (amqpURL, serverURL) = (TestEnvironment.amqpURL, TestEnvironment.managedURL)
        }
        let deployment = try await WorkerDeployment.start(
            name: TestEnvironment.uniqueName("e2e-\(label)"), amqpURL: amqpURL, serverURL: serverURL,
            workerServerURL: workerServerURL, bundleID: Scenario.bundleID, keyID: "E2EKEY0001", teamID: "E2ETEAM001",
            executable: try LiveDeliveryBinary.path(), workerLogLevel: "info", logger: logger
        ) { simulator in
            simulator.contentStateShape = try ContentStateShape(
                contentsOfFile: TestEnvironment.projectRoot.appendingPathComponent(
                    "Config/apns-sim/delivery-attributes.json"
                ).path)
            try adjust(&simulator)
        }
        var databaseConfiguration = try PostgresConfiguration(deployment.ownerPostgresURL)
        databaseConfiguration.poolSize = 2
        let database = PostgresClient(configuration: databaseConfiguration, logger: logger)
        return Fixture(deployment: deployment, servers: servers, database: database, logger: logger)
    }

    /// The environment of a `livedelivery` child process (see WORKER_CONTRACT.md).
    func environment(worker: String) -> [String: String] { deployment.environment(worker: worker) }

    /// A copy of the shipped Config folder in this test's folder, its `policy.json` changed by `edit`: for
    /// a worker's `LIVEDELIVERY_CONFIG_DIR`.
    func config(policy edit: (inout [String: Any]) -> Void) throws -> URL {
        let config = directory.appendingPathComponent("config")
        try FileManager.default.copyItem(at: TestEnvironment.projectRoot.appendingPathComponent("Config"), to: config)
        let policyFile = config.appendingPathComponent("policy.json")
        var policy = try JSONSerialization.jsonObject(with: Data(contentsOf: policyFile)) as? [String: Any] ?? [:]
        edit(&policy)
        try JSONSerialization.data(withJSONObject: policy).write(to: policyFile)
        return config
    }

    /// The owner's login on this test's database: `livedelivery migrate` runs as it.
    var ownerPostgresURL: String { deployment.ownerPostgresURL }

    /// `livedelivery migrate` on this test's database.
    func migrate() async throws { try await deployment.migrate() }

    /// Starts `livedelivery run` and waits until its /readyz answers 200.
    /// With `ready: false`, waits only for the HTTP endpoint (for a worker whose servers are unreachable).
    @discardableResult
    func startWorker(
        _ worker: String, extraEnvironment: [String: String] = [:], ready: Bool = true
    ) async throws -> Worker {
        try await deployment.startWorker(worker, extraEnvironment: extraEnvironment, ready: ready)
    }

    // MARK: Publishing

    /// Publishes every event with confirms (pipelined), reconnecting (to the next node of a cluster) and
    /// publishing again after a broker failure.
    func publish(_ events: [ScenarioEvent]) async throws {
        try await publish(events.map { ($0.type, $0.body, $0.eventID) })
    }

    /// Publishes with confirms, again on another node after a failure; `traceParents` sets the `traceparent`
    /// header of the messages with those ids.
    func publish(
        _ messages: [(routingKey: String, body: [UInt8], messageID: String?)], window: Int = 500,
        traceParents: [String: String] = [:]
    ) async throws {
        for message in messages {
            let headers = Self.headers(message.body, traceParent: message.messageID.flatMap { traceParents[$0] })
            PublishedEvents.record(
                routingKey: message.routingKey, body: message.body, messageID: message.messageID,
                headers: headers.compactMapValues(\.stringValue))
        }
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
                                    contentType: "application/json",
                                    headers: Self.headers(
                                        message.body,
                                        traceParent: message.messageID.flatMap {
                                            traceParents[$0]
                                        }),
                                    messageID: message.messageID))
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

    /// A message's headers as `livedelivery publish` sets them: `order_id` (the cells' hash exchange routes
    /// by it) when the body names an order, and `traceparent` when given.
    static func headers(_ body: [UInt8], traceParent: String?) -> [String: AMQPValue] {
        var headers: [String: AMQPValue] = [:]
        if let object = try? JSONSerialization.jsonObject(with: Data(body)) as? [String: Any],
            let orderID = object["order_id"] as? String
        {
            headers["order_id"] = .string(orderID)
        }
        if let traceParent { headers["traceparent"] = .string(traceParent) }
        return headers
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
        // Pushes wait in the outbox, or in a dispatcher's memory without a row (`pushes_waiting`, `sql/126`).
        try await eventually("every push answered", timeout: timeout, every: .milliseconds(250)) {
            try await count("SELECT count(*) FROM pushes_waiting") == 0
        }
    }

    /// The simulator's records for one device token, in the order it received them.
    func pushes(token: String) -> [PushRecord] {
        simulator.pushes(token: token).sorted { $0.sequence < $1.sequence }
    }

    // MARK: Clean-up

    var runningWorkers: [ChildProcess] { deployment.startedWorkers }

    /// Stops every worker still running (SIGKILL), drops the database and the queues, stops the simulator and
    /// removes the folder unless `keepLogs`.
    func shutdown(keepLogs: Bool = false) async {
        await database.shutdown()
        await deployment.shutdown(keepLogs: keepLogs, logger: logger)
    }

    /// Runs `body` with a fresh fixture and always cleans up; logs are kept (and printed) when `body` throws.
    static func with<Result>(
        _ label: String, servers: Servers = .main,
        simulator adjust: (inout SimulatorConfiguration) throws -> Void = { _ in },
        _ body: (Fixture) async throws -> Result
    ) async throws -> Result {
        let fixture = try await start(label, servers: servers, simulator: adjust)
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
typealias Worker = RunningWorker
