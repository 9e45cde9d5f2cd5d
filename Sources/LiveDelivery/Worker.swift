public import Configuration
public import Foundation
public import Logging
public import Postgres
public import ServiceLifecycle
import UnixSignals

/// The worker's service graph. Tests build the same graph as `livedelivery run`.
public struct Worker: Sendable {
    public let configuration: WorkerConfiguration
    public let client: PostgresClient
    public let metrics: WorkerMetrics
    public let health: WorkerHealth
    public let processor: EventProcessor
    public let consumer: EventConsumer
    public let dispatcher: PushDispatcher
    public let sweeper: Sweeper
    public let retention: Retention
    public let http: HTTPEndpoint

    /// Builds every part; nothing connects before `run()`.
    public init(
        configuration: WorkerConfiguration, logger: Logger, sender: (any PushSending)? = nil,
        now: @escaping @Sendable () -> Date = { Date() }
    ) throws(LiveDeliveryError) {
        var logger = logger
        logger[metadataKey: LiveDeliveryLoggingKeys.workerID] = "\(configuration.workerID)"
        self.configuration = configuration
        let client = PostgresClient(
            configuration: configuration.postgres.client(applicationName: "livedelivery \(configuration.workerID)"),
            logger: logger)
        let metrics = WorkerMetrics()
        let health = WorkerHealth()
        let pushSender: any PushSending
        if let sender {
            pushSender = sender
        } else {
            pushSender = try APNsPushSender(configuration: configuration.apns, logger: logger)
        }
        self.client = client
        self.metrics = metrics
        self.health = health
        // One cache for the consumer and the dispatcher: a push is recorded moments after its event.
        let states = OrderStateCache(capacity: configuration.postgres.stateCacheSize, metrics: metrics)
        self.dispatcher = PushDispatcher(
            configuration: configuration.dispatcher, workerID: configuration.workerID, client: client,
            sender: pushSender, tracking: configuration.tracking, health: health, metrics: metrics, logger: logger,
            states: states, now: now)
        // The consumer hands the pushes it plans to this dispatcher when it has room for them.
        self.processor = EventProcessor(
            client: client, tracking: configuration.tracking, metrics: metrics, logger: logger,
            pushToStart: configuration.pushToStart, states: states, handoff: dispatcher.handoff, now: now)
        self.consumer = try EventConsumer(
            configuration: configuration.amqp, processor: processor, client: client, health: health, metrics: metrics,
            logger: logger)
        self.sweeper = Sweeper(
            configuration: configuration.sweeper, client: client, tracking: configuration.tracking, metrics: metrics,
            logger: logger, pushToStart: configuration.pushToStart, now: now)
        self.retention = Retention(configuration: configuration.retention, client: client, logger: logger)
        self.http = HTTPEndpoint(
            host: configuration.http.host, port: configuration.http.port, portFile: configuration.http.portFile,
            metrics: metrics, health: health, logger: logger)
    }

    /// The services in dependency order; graceful shutdown runs in reverse: the consumer stops
    /// first (finishing and acking what it holds), then the sweeper and the dispatcher, then the
    /// HTTP endpoint, then the database pool.
    public func serviceGroup(logger: Logger, signals: Bool = true) -> ServiceGroup {
        var configuration = ServiceGroupConfiguration(
            services: [
                .init(service: PostgresService(client: client)),
                .init(service: http),
                .init(service: dispatcher),
                .init(service: sweeper),
                .init(service: retention),
                .init(service: consumer),
            ],
            logger: logger)
        if signals {
            configuration.gracefulShutdownSignals = [.sigterm, .sigint]
        }
        configuration.maximumGracefulShutdownDuration = .seconds(30)
        return ServiceGroup(configuration: configuration)
    }
}

/// Closes the database pool after everything else stopped.
struct PostgresService: Service {
    let client: PostgresClient
    func run() async throws {
        try? await gracefulShutdown()
        await client.shutdown()
    }
}

/// Reads and validates the configuration, then builds the worker's service graph.
public func buildWorker(config: ConfigReader, logger: Logger) async throws -> ServiceGroup {
    let configuration = try WorkerConfiguration.load(config: config)
    return try Worker(configuration: configuration, logger: logger).serviceGroup(logger: logger)
}

/// `livedelivery migrate`: applies the missing migrations; returns their names.
public func runMigrations(
    postgres configuration: PostgresConfiguration, directory: String, logger: Logger
) async throws -> [String] {
    let client = PostgresClient(configuration: configuration, logger: logger)
    do {
        let applied = try await Migrator(directory: directory).migrate(client: client, logger: logger)
        await client.shutdown()
        return applied
    } catch {
        await client.shutdown()
        throw error
    }
}

/// `livedelivery check-config`: loads everything, including the APNs keys; returns the summary.
public func checkConfiguration(config: ConfigReader, logger: Logger) throws -> [String] {
    let configuration = try WorkerConfiguration.load(config: config)
    var problems: [String] = []
    do {
        _ = try APNsPushSender(configuration: configuration.apns, logger: logger)
    } catch {
        problems.append(error.message)
    }
    do {
        _ = try Migrator(directory: configuration.migrationsDirectory).migrations()
    } catch {
        problems.append(error.message)
    }
    guard problems.isEmpty else {
        throw LiveDeliveryError(.invalidConfiguration, "the configuration is not valid", problems: problems)
    }
    return configuration.summary
}

/// `livedelivery sweep --once`: one sweep pass over everything due now, with the normal
/// configuration (policy `sweep.*`, `sweeper.*`, `pushToStart.*`); the pushes it plans are sent
/// by the running workers' dispatchers.
public func sweepOnce(config: ConfigReader, logger: Logger) async throws -> SweepSummary {
    let configuration = try WorkerConfiguration.load(config: config)
    var postgres = configuration.postgres.client(applicationName: "livedelivery sweep \(configuration.workerID)")
    postgres.poolSize = 2
    let client = PostgresClient(configuration: postgres, logger: logger)
    let sweeper = Sweeper(
        configuration: configuration.sweeper, client: client, tracking: configuration.tracking,
        metrics: WorkerMetrics(), logger: logger, pushToStart: configuration.pushToStart)
    do {
        let summary = try await sweeper.sweepAll()
        await client.shutdown()
        return summary
    } catch {
        await client.shutdown()
        throw error
    }
}
