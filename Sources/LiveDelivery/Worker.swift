public import Configuration
public import Foundation
public import Logging
public import Postgres
import Prometheus
import RabbitMQ
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
    let sampler: MetricsSampler
    /// Opens once ``SchemaGuard`` has found the schema this release works with.
    let schemaGate = SchemaGate()
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
            logger: logger, schemaChecked: schemaGate)
        self.sweeper = Sweeper(
            configuration: configuration.sweeper, client: client, tracking: configuration.tracking, metrics: metrics,
            logger: logger, pushToStart: configuration.pushToStart, now: now)
        self.retention = Retention(configuration: configuration.retention, client: client, logger: logger)
        self.sampler = MetricsSampler(
            interval: configuration.metricsSampleInterval, amqp: configuration.amqp,
            apps: configuration.apns.apps.map(\.bundleID), client: client, metrics: metrics, logger: logger)
        let dispatcher = self.dispatcher
        metrics.addCollector { metrics in
            let pool = client.poolStatistics
            metrics.gauge("livedelivery_db_pool_connections", [("state", "in_use")]).set(to: Double(pool.inUse))
            metrics.gauge("livedelivery_db_pool_connections", [("state", "idle")]).set(to: Double(pool.idle))
            metrics.gauge("livedelivery_db_pool_waiters").set(to: Double(pool.waiters))
            metrics.gauge("livedelivery_pushes_in_flight").set(to: Double(dispatcher.pushesInFlight))
        }
        self.http = HTTPEndpoint(
            host: configuration.http.host, port: configuration.http.port, portFile: configuration.http.portFile,
            metrics: metrics, health: health, logger: logger)
    }

    /// The services in dependency order; graceful shutdown runs in reverse: the consumer stops
    /// first (finishing and acking what it holds), then the sweeper and the dispatcher, then the
    /// HTTP endpoint, then the database pool. Those that use the tables start once the database's
    /// schema version has been checked (``SchemaGuard``).
    public func serviceGroup(logger: Logger, signals: Bool = true) -> ServiceGroup {
        let gate = schemaGate
        var configuration = ServiceGroupConfiguration(
            services: [
                .init(service: PostgresService(client: client)),
                .init(service: http),
                .init(service: SchemaGuard(client: client, gate: gate, health: health, logger: logger)),
                .init(service: AfterSchemaCheck(service: dispatcher, gate: gate)),
                .init(service: AfterSchemaCheck(service: sweeper, gate: gate)),
                .init(service: AfterSchemaCheck(service: retention, gate: gate)),
                .init(service: sampler),
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

/// `livedelivery migrate`'s second half: declares the broker's topology (the exchange, the quorum
/// queues and the dead-letter path, as `run` does), so that events published before the first worker
/// starts are kept. Returns the node it declared on.
public func declareBrokerTopology(config: ConfigReader, logger: Logger) async throws -> String {
    var amqp = WorkerConfiguration.AMQP(endpoints: try WorkerConfiguration.readEndpoints(config))
    amqp.exchange = config.string(forKey: "amqp.exchange", default: amqp.exchange)
    amqp.queue = config.string(forKey: "amqp.queue", default: amqp.queue)
    amqp.deliveryLimit = config.int(forKey: "amqp.deliveryLimit", default: amqp.deliveryLimit)
    let (connection, node) = try await RabbitMQConnection.connect(to: amqp.endpoints, logger: logger)
    do {
        try await EventConsumer.declareTopology(amqp, on: connection)
        await connection.close()
    } catch {
        await connection.close()
        throw error
    }
    let declared = amqp.endpoints.nodes[node]
    return "exchange \(amqp.exchange), queue \(amqp.queue) on \(declared.host):\(declared.port)"
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
