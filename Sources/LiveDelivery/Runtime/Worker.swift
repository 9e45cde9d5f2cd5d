import APNs
package import Configuration
package import Foundation
package import Logging
package import Postgres
import Prometheus
import RabbitMQ
package import ServiceLifecycle
package import Tracing
import UnixSignals

/// The worker's service graph. Tests build the same graph as `livedelivery run`.
package struct Worker: Sendable {
    package let configuration: WorkerConfiguration
    package let client: PostgresClient
    package let metrics: WorkerMetrics
    package let health: WorkerHealth
    package let processor: EventProcessor
    package let consumer: EventConsumer
    package let dispatcher: PushDispatcher
    package let sweeper: Sweeper
    package let retention: Retention
    let sampler: MetricsSampler
    /// For a cell added to a deployment: takes over the orders it now holds from the cells they were in.
    let cellHandover: CellHandover?
    /// Opens once ``SchemaGuard`` has found the schema this release works with.
    let schemaGate = SchemaGate()
    package let http: HTTPEndpoint

    /// Builds every part; nothing connects before `run()`.
    package init(
        configuration: WorkerConfiguration, logger: Logger, sender: (any PushSending)? = nil,
        tracer: any Tracer = InstrumentationSystem.tracer, now: @escaping @Sendable () -> Date = { Date() }
    ) throws(LiveDeliveryError) {
        var logger = logger
        logger[metadataKey: LiveDeliveryLoggingKeys.workerID] = "\(configuration.workerID)"
        self.configuration = configuration
        let client = PostgresClient(
            configuration: configuration.postgres.client(applicationName: "livedelivery \(configuration.workerID)"),
            logger: logger)
        let metrics = WorkerMetrics(cell: configuration.amqp.cell)
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
            states: states, tracer: tracer, now: now)
        let cellHandover = configuration.cellHandover.flatMap { sources in
            configuration.amqp.cell.map { own in
                CellHandover(
                    own: own, sources: sources, tracking: configuration.tracking,
                    applicationName: "livedelivery \(configuration.workerID) (handover)", logger: logger)
            }
        }
        self.cellHandover = cellHandover
        // The consumer hands the pushes it plans to this dispatcher when it has room for them.
        self.processor = EventProcessor(
            client: client, tracking: configuration.tracking, metrics: metrics, logger: logger,
            pushToStart: configuration.pushToStart, states: states, capacity: dispatcher.capacity, tracer: tracer,
            apps: Set(configuration.apns.apps.map { "\($0.bundleID) \($0.environment)" }),
            cell: configuration.amqp.cell, cells: configuration.amqp.cells, cellHandover: cellHandover,
            now: now)
        self.consumer = try EventConsumer(
            configuration: configuration.amqp, processor: processor, client: client, health: health, metrics: metrics,
            logger: logger, schemaChecked: schemaGate)
        self.sweeper = Sweeper(
            configuration: configuration.sweeper, client: client, tracking: configuration.tracking, metrics: metrics,
            logger: logger, pushToStart: configuration.pushToStart, lease: configuration.dispatcher.lease, now: now)
        self.retention = Retention(configuration: configuration.retention, client: client, logger: logger)
        self.sampler = MetricsSampler(
            interval: configuration.metricsSampleInterval, amqp: configuration.amqp,
            apps: configuration.apns.apps.map(\.bundleID), client: client, metrics: metrics, health: health,
            logger: logger)
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
    /// `observability` (the trace exporter) comes first, so that it stops last, with every span.
    package func serviceGroup(
        logger: Logger, signals: Bool = true, observability: (any Service)? = nil
    ) -> ServiceGroup {
        let gate = schemaGate
        var configuration = ServiceGroupConfiguration(
            services: (observability.map { [ServiceGroupConfiguration.ServiceConfiguration(service: $0)] } ?? []) + [
                .init(service: PostgresService(client: client, handover: cellHandover)),
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
    var handover: CellHandover? = nil
    func run() async throws {
        try? await gracefulShutdown()
        await handover?.shutdown()
        await client.shutdown()
    }
}

/// Builds the worker's service graph from a validated configuration, after its warnings.
package func buildWorker(
    configuration: WorkerConfiguration, logger: Logger, observability: (any Service)? = nil
) throws -> ServiceGroup {
    for warning in ProcessHardening.keyFileWarnings(configuration.apns.apps) { logger.warning("\(warning)") }
    for finding in LinkFinding.findings(configuration) {
        logger.log(level: finding.isLocal ? .notice : .warning, "\(finding.message)")
    }
    return try Worker(configuration: configuration, logger: logger).serviceGroup(
        logger: logger, observability: observability)
}

/// `livedelivery migrate`: applies the missing migrations; returns their names.
package func runMigrations(
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
package func declareBrokerTopology(config: ConfigReader, logger: Logger) async throws -> String {
    let amqp = try WorkerConfiguration.loadAMQP(config: config)
    let (connection, node) = try await RabbitMQConnection.connect(to: amqp.endpoints, logger: logger)
    do {
        try await EventConsumer.declareTopology(amqp, on: connection, logger: logger)
        await connection.close()
    } catch {
        await connection.close()
        throw error
    }
    let declared = amqp.endpoints.nodes[node]
    return "exchange \(amqp.exchange), queue \(amqp.queue) on \(declared.host):\(declared.port)"
}

/// `livedelivery check-config`: loads everything `run` loads, including the APNs keys, and
/// returns the summary. It reads nothing `run` does not (no `sql/`), so it passes wherever `run`
/// would start. Every problem names its file and path, or its key and environment variable.
package func checkConfiguration(config: ConfigReader, logger: Logger) throws -> [String] {
    let configuration = try WorkerConfiguration.load(config: config)
    var problems: [String] = []
    // `load` found the key files; whether each holds a key is only known by parsing it. The
    // reason never quotes the file's text.
    for (index, app) in configuration.apns.apps.enumerated() {
        do {
            _ = try APNsSigningKey(keyID: app.keyID, p8File: app.keyFile)
        } catch {
            problems.append(
                "\(configuration.apns.appsFile): [\(index)].keyFile: \(app.keyFile) is not an APNs key "
                    + "(a P-256 private key in PEM, the .p8 file from Apple)")
        }
    }
    if problems.isEmpty {
        do {
            _ = try APNsPushSender(configuration: configuration.apns, logger: logger)
        } catch {
            problems.append(error.message)
        }
    }
    guard problems.isEmpty else {
        throw LiveDeliveryError(.invalidConfiguration, "the configuration is not valid", problems: problems)
    }
    return configuration.summary + ProcessHardening.keyFileWarnings(configuration.apns.apps).map { "warning: \($0)" }
        + LinkFinding.findings(configuration).map(\.description)
}

/// `livedelivery sweep --once`: one sweep pass over everything due now, with the normal
/// configuration (policy `sweep.*`, `sweeper.*`, `pushToStart.*`); the pushes it plans are sent
/// by the running workers' dispatchers.
package func sweepOnce(config: ConfigReader, logger: Logger) async throws -> SweepSummary {
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

/// One target of `check-config --connect` and what became of reaching it.
package struct ConnectionCheck: Sendable, CustomStringConvertible {
    /// What was reached, e.g. `amqp node 1 (rabbit-1:5672)`; never a password.
    package var target: String
    /// Nil when the target answered.
    package var problem: String?
    /// What the target said, when it answered (the database's version and role).
    package var detail: String?
    /// What works but should not be so (the worker's database login can run DDL); not a failure.
    package var warning: String?

    package var succeeded: Bool { problem == nil }
    package var description: String {
        if let problem {
            // One line per target: libpq's messages span several.
            let line = problem.split(whereSeparator: \.isNewline).map { $0.trimmingCharacters(in: .whitespaces) }
            return "\(target): \(line.joined(separator: " "))"
        }
        return "\(target): ok" + (detail.map { " (\($0))" } ?? "") + (warning.map { "; warning: \($0)" } ?? "")
    }
}

/// `livedelivery check-config --connect`: reaches each broker node, the database and each APNs
/// host once, concurrently, and reports each. Sends no push: the APNs probe has neither a device
/// token nor a payload, so APNs can only refuse it, and any HTTP answer proves the TLS and HTTP/2
/// path and the CA. Each module runs its blocking C calls on its own threads, so this awaits only.
package func checkConnections(config: ConfigReader, logger: Logger) async throws -> [ConnectionCheck] {
    let configuration = try WorkerConfiguration.load(config: config)
    async let broker = checkBrokerNodes(configuration.amqp.endpoints, logger: logger)
    async let database = checkDatabase(configuration.postgres, logger: logger)
    async let apns = checkAPNsHosts(configuration.apns, logger: logger)
    return await broker + [database] + apns
}

/// Every node, not only the first that accepts: a node that cannot be reached is found before a
/// failover needs it.
func checkBrokerNodes(_ endpoints: AMQPEndpoints, logger: Logger) async -> [ConnectionCheck] {
    var checks: [ConnectionCheck] = []
    for (index, node) in endpoints.nodes.enumerated() {
        var check = ConnectionCheck(target: "amqp node \(index + 1) (\(node.host):\(node.port))")
        do {
            let connection = try await RabbitMQConnection.connect(node, logger: logger)
            await connection.close()
        } catch {
            // RabbitMQError's description names the failure, never the URL or its password.
            check.problem = "\(error)"
        }
        checks.append(check)
    }
    return checks
}

/// One connection and the server's role: a worker needs the primary.
func checkDatabase(_ postgres: WorkerConfiguration.Postgres, logger: Logger) async -> ConnectionCheck {
    var settings = postgres.client(applicationName: "livedelivery check-config")
    settings.poolSize = 1
    let client = PostgresClient(configuration: settings, logger: logger)
    var check = ConnectionCheck(target: "postgres")
    do {
        let facts = try await ServerFacts.read(client)
        let server = "PostgreSQL \(facts.version) at \(facts.address), database \(facts.database)"
        if facts.isStandby {
            check.problem = "reached \(server), but it is a standby (read-only); the worker needs the primary"
        } else {
            check.detail = "\(server), primary"
            check.warning = try await LoginPrivileges.read(client).warning
        }
    } catch {
        // PostgresError's description names the class and SQLSTATE, never the connection string.
        check.problem = "\(error)"
    }
    await client.shutdown()
    return check
}

/// One probe per APNs host the worker would use: each environment's host, or `apns.baseURL`.
func checkAPNsHosts(_ apns: WorkerConfiguration.APNs, logger: Logger) async -> [ConnectionCheck] {
    var checks: [ConnectionCheck] = []
    for environment in ["production", "sandbox"] {
        guard let app = apns.apps.first(where: { $0.environment == environment }) else { continue }
        let defaults = APNsClientConfiguration(apps: [])
        let url = apns.baseURL ?? (environment == "production" ? defaults.productionURL : defaults.sandboxURL)
        var check = ConnectionCheck(target: "apns \(environment) (\(URL(string: url)?.host ?? url))")
        do {
            let key = try APNsSigningKey(keyID: app.keyID, p8File: app.keyFile)
            var settings = APNsClientConfiguration(apps: [
                APNsApp(
                    bundleID: app.bundleID, teamID: app.teamID, key: key,
                    environment: environment == "production" ? .production : .sandbox, baseURL: apns.baseURL)
            ])
            settings.caFile = apns.caFile
            settings.maxConnectionsPerHost = 1
            settings.eventLoops = 1
            settings.connectTimeout = .seconds(5)
            settings.requestTimeout = .seconds(10)
            let client = try APNsClient(configuration: settings, logger: logger)
            let probe = APNsNotification(
                deviceToken: "", topic: "\(app.bundleID).push-type.liveactivity", payload: [])
            let outcome = await client.send(probe, app: app.bundleID)
            await client.shutdown()
            if let status = outcome.status {
                check.detail = "answered HTTP \(status)" + (outcome.reason.map { " \($0)" } ?? "")
            } else {
                check.problem =
                    "no answer: \(outcome.reason?.rawValue ?? "unknown")"
                    + (outcome.reason == .tlsFailure ? " (is apns.caFile the server's CA?)" : "")
            }
        } catch {
            check.problem = error.message
        }
        checks.append(check)
    }
    return checks
}
