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

let bundleID = Events.bundleID

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
