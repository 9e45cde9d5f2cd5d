import APNs
import APNsSimulator
import Crypto
import Foundation
import LiveDelivery
import LiveDeliveryCore
import Logging
import Postgres
import RabbitMQ
import ServiceLifecycle
import TestSupport
import Testing

let quietLogger = Logger(label: "livedelivery-test") { _ in SwiftLogNoOpLogHandler() }
let bundleID = "com.example.delivery"

/// A fresh database (`ld_test_<unique>`) on the main PostgreSQL, migrated; dropped by `drop()`.
struct TestDatabase {
    let name: String
    let url: String
    let client: PostgresClient
    var serverURL = TestEnvironment.postgresURL

    /// `options` are appended to `CREATE DATABASE` (a locale, say).
    static func create(
        migrate: Bool = true, serverURL: String = TestEnvironment.postgresURL, options: String = ""
    ) async throws -> TestDatabase {
        let name = "ld_test_" + UUID().uuidString.prefix(12).lowercased().replacingOccurrences(of: "-", with: "")
        let admin = PostgresClient(
            configuration: try PostgresConfiguration(serverURL), logger: quietLogger)
        try await admin.withConnection { try await $0.execute(unsafeSQL: "CREATE DATABASE \(name) \(options)") }
        await admin.shutdown()
        var components = URLComponents(string: serverURL)!
        components.path = "/" + name
        let url = components.string!
        let client = PostgresClient(configuration: try PostgresConfiguration(url), logger: quietLogger)
        if migrate {
            try await Migrator(directory: migrationsDirectory).migrate(client: client, logger: quietLogger)
        }
        return TestDatabase(name: name, url: url, client: client, serverURL: serverURL)
    }

    static var migrationsDirectory: String { TestEnvironment.projectRoot.appendingPathComponent("sql").path }

    func drop() async {
        await client.shutdown()
        guard
            let admin = try? PostgresClient(
                configuration: PostgresConfiguration(serverURL), logger: quietLogger)
        else { return }
        _ = try? await admin.withConnection {
            try await $0.execute(unsafeSQL: "DROP DATABASE IF EXISTS \(name) WITH (FORCE)")
        }
        await admin.shutdown()
    }

    /// Runs `body`, then drops the database whatever happened.
    func using(_ body: () async throws -> Void) async throws {
        do {
            try await body()
        } catch {
            await drop()
            throw error
        }
        await drop()
    }

    func count(_ query: PostgresQuery) async throws -> Int {
        let rows = try await client.query(query)
        return try rows.first.map { try $0.decode(Int.self, at: 0) } ?? 0
    }

    func strings(_ query: PostgresQuery) async throws -> [String] {
        try await client.query(query).map { try $0.decode(String.self, at: 0) }
    }
}

/// An in-process APNs simulator with a key generated for the test, and a worker configuration
/// pointing at it, at a fresh database and at unique broker names.
struct Harness {
    let database: TestDatabase
    let simulator: RunningSimulator
    let configuration: WorkerConfiguration
    let folder: URL

    static func start(
        postgresServer: String = TestEnvironment.postgresURL,
        adjust: (inout WorkerConfiguration) -> Void = { _ in }
    ) async throws -> Harness {
        let database = try await TestDatabase.create(serverURL: postgresServer)
        let privateKey = P256.Signing.PrivateKey()
        let keyID = "K" + String(UUID().uuidString.replacingOccurrences(of: "-", with: "").prefix(9))
        let teamID = "TEAM123456"
        var simulatorConfiguration = SimulatorConfiguration()
        simulatorConfiguration.keys = [.init(keyID: keyID, teamID: teamID, publicKey: privateKey.publicKey)]
        simulatorConfiguration.threads = 1
        let simulator = try await APNsSimulator.start(simulatorConfiguration, logger: quietLogger)

        let folder = FileManager.default.temporaryDirectory.appendingPathComponent(TestEnvironment.uniqueName("ld"))
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let keyFile = folder.appendingPathComponent("key.p8")
        try Data(privateKey.pemRepresentation.utf8).write(to: keyFile)

        let configDirectory = TestEnvironment.projectRoot.appendingPathComponent("Config").path
        let tracking = try DefaultConfiguration.load(
            policyJSON: Array(try Data(contentsOf: URL(fileURLWithPath: configDirectory + "/policy.json"))),
            mappingJSON: Array(try Data(contentsOf: URL(fileURLWithPath: configDirectory + "/content-mapping.json"))))
        var amqp = WorkerConfiguration.AMQP(endpoints: try AMQPEndpoints(urls: TestEnvironment.amqpURL))
        amqp.exchange = TestEnvironment.uniqueName("ld.events")
        amqp.queue = TestEnvironment.uniqueName("ld.queue")
        amqp.prefetch = 50
        amqp.batchSize = 20
        var apns = WorkerConfiguration.APNs(appsFile: folder.appendingPathComponent("apns-apps.json").path)
        apns.apps = [
            .init(bundleID: bundleID, teamID: teamID, keyID: keyID, keyFile: keyFile.path, environment: "production")
        ]
        apns.baseURL = simulator.baseURL
        apns.caFile = simulator.certificatePEMPath
        // Generous: under a full parallel test run a push may wait seconds, and a timeout would
        // add an attempt that the tests count.
        apns.requestTimeout = .seconds(120)
        var configuration = WorkerConfiguration(
            configDirectory: configDirectory, amqp: amqp,
            postgres: .init(connection: try PostgresConfiguration(database.url)), apns: apns,
            workerID: TestEnvironment.uniqueName("worker"), tracking: tracking)
        configuration.http.port = 0
        configuration.dispatcher.backoffBase = .milliseconds(10)
        configuration.dispatcher.backoffMax = .milliseconds(50)
        configuration.dispatcher.poll = .milliseconds(100)
        configuration.sweeper.interval = .milliseconds(100)
        configuration.metricsSampleInterval = .milliseconds(200)
        adjust(&configuration)
        return Harness(database: database, simulator: simulator, configuration: configuration, folder: folder)
    }

    func worker(now: @escaping @Sendable () -> Date = { Date() }) throws -> Worker {
        try Worker(configuration: configuration, logger: quietLogger, now: now)
    }

    func stop(_ workers: Worker...) async {
        for worker in workers {
            await worker.dispatcher.sender.shutdown()
            await worker.client.shutdown()
        }
        try? await simulator.shutdown()
        await database.drop()
        try? FileManager.default.removeItem(at: folder)
    }
}

/// Event bodies (events.md).
enum Events {
    static func token() -> String { (0..<32).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined() }

    static func status(
        _ orderID: String, _ status: String, sequence: Int, user: String = "u-1", courier: String? = nil,
        id: String = UUID().uuidString, at: String = "2026-11-21T10:04:05Z"
    ) -> InboundMessage {
        var fields = [
            "\"type\":\"order.status\"", "\"version\":1", "\"event_id\":\"\(id)\"", "\"occurred_at\":\"\(at)\"",
            "\"order_id\":\"\(orderID)\"", "\"user_id\":\"\(user)\"", "\"sequence\":\(sequence)",
            "\"status\":\"\(status)\"", "\"order_number\":42", "\"merchant\":{\"name\":\"Pizza Place\"}",
        ]
        if let courier { fields.append("\"courier\":{\"name\":\"\(courier)\"}") }
        return InboundMessage(
            body: Array("{\(fields.joined(separator: ","))}".utf8), routingKey: "order.status", messageID: id)
    }

    static func activityToken(
        _ orderID: String, activity: String, token: String, id: String = UUID().uuidString,
        at: String = "2026-11-21T10:04:06Z"
    ) -> InboundMessage {
        let body = """
            {"type":"activity.token","version":1,"event_id":"\(id)","occurred_at":"\(at)","order_id":"\(orderID)",\
            "activity_id":"\(activity)","device_id":"d-\(activity)","token":"\(token)","bundle_id":"\(bundleID)",\
            "environment":"production"}
            """
        return InboundMessage(body: Array(body.utf8), routingKey: "activity.token", messageID: id)
    }
}

/// The content-state of a recorded push, decoded.
func contentState(_ record: PushRecord) throws -> [String: Any] {
    let object = try JSONSerialization.jsonObject(with: Data(record.payload.utf8)) as? [String: Any]
    let aps = try #require(object?["aps"] as? [String: Any])
    return try #require(aps["content-state"] as? [String: Any])
}

/// Runs the worker's service group while `body` runs, then shuts it down gracefully (also when
/// `body` throws) and waits for it to return.
func whileRunning(_ worker: Worker, _ body: () async throws -> Void) async throws {
    let group = worker.serviceGroup(logger: quietLogger, signals: false)
    let running = Task { try await group.run() }
    do {
        try await body()
    } catch {
        await group.triggerGracefulShutdown()
        _ = try? await running.value
        throw error
    }
    await group.triggerGracefulShutdown()
    try await running.value
}
