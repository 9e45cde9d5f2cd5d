package import Configuration
import Foundation
package import LiveDelivery
package import LiveDeliveryCore
package import Logging
package import Postgres
package import RabbitMQ

/// What the admin commands (`report`, `dead-letters`, `failed-pushes`) read from the configuration:
/// only the keys they need, so they run where the APNs keys are not installed.
///
/// ## Configuration keys
/// - `postgres.url` (string, required, secret): the database (a libpq connection string; the
///   commands other than `report` write, so it must reach the primary).
/// - `postgres.reportingUrl` (string, optional, secret): where `report` reads instead, typically a
///   hot standby and a role that may read the views only.
/// - `amqp.urls` or `amqp.url` (required for `dead-letters replay`, secret), `amqp.exchange`
///   (string, optional, default `delivery.events`): where replays are published.
/// - `config.dir` (string, optional, default `Config`): policy.json and content-mapping.json, for
///   `failed-pushes retry`.
/// - `cells.<name>.postgresUrl` (string, secret): for `report --cells` and `status --cells`, each cell's
///   database (its reporting replica, typically); environment `LIVEDELIVERY_CELLS_<NAME>_POSTGRES_URL`.
package struct AdminContext: Sendable {
    package let config: ConfigReader
    package let logger: Logger

    package init(config: ConfigReader, logger: Logger) {
        self.config = config
        self.logger = logger
    }

    /// A one-connection client for `postgres.url`, or for `postgres.reportingUrl` (a hot standby)
    /// when `reporting` and that key is set; the caller shuts it down.
    package func postgresClient(reporting: Bool = false) throws(LiveDeliveryError) -> PostgresClient {
        let useReplica = reporting && config.string(forKey: "postgres.reportingUrl", isSecret: true)?.isEmpty == false
        return try oneConnection(key: useReplica ? "postgres.reportingUrl" : "postgres.url")
    }

    /// A one-connection client for cell `name`'s database (`cells.<name>.postgresUrl`); the caller shuts it down.
    package func postgresClient(cell name: String) throws(LiveDeliveryError) -> PostgresClient {
        try oneConnection(key: "cells.\(name).postgresUrl")
    }

    private func oneConnection(key: String) throws(LiveDeliveryError) -> PostgresClient {
        var configuration = try WorkerConfiguration.readPostgres(config, key: key)
        // The link check `run` makes, for the database this command uses.
        if let finding = LinkFinding.finding(postgres: configuration, name: "\(key) database") {
            logger.log(level: finding.isLocal ? .notice : .warning, "\(finding.message)")
        }
        configuration.poolSize = 1
        configuration.applicationName = "livedelivery admin"
        return PostgresClient(configuration: configuration, logger: logger)
    }

    /// Runs `body` with a client for each cell's database in turn (docs/scaling.md, Cells), shutting each down.
    package func withCells<Result>(
        _ cells: [String], _ body: (String, PostgresClient) async throws -> Result
    ) async throws -> [(cell: String, result: Result)] {
        var results: [(cell: String, result: Result)] = []
        for cell in cells {
            let client = try postgresClient(cell: cell)
            do {
                results.append((cell, try await body(cell, client)))
                await client.shutdown()
            } catch {
                await client.shutdown()
                throw error
            }
        }
        return results
    }

    /// The broker's nodes (`amqp.urls` or `amqp.url`) and `amqp.exchange`.
    package func broker() throws(LiveDeliveryError) -> (endpoints: AMQPEndpoints, exchange: String) {
        let endpoints = try WorkerConfiguration.readEndpoints(config)
        for finding in LinkFinding.findings(amqp: endpoints) {
            logger.log(level: finding.isLocal ? .notice : .warning, "\(finding.message)")
        }
        return (endpoints, config.string(forKey: "amqp.exchange", default: "delivery.events"))
    }

    /// The policy and content mapping of `config.dir`.
    package func tracking() throws(LiveDeliveryError) -> TrackingConfiguration {
        let problems = ProblemList()
        let directory = config.string(forKey: "config.dir", default: DefaultConfiguration.directoryName)
        guard let tracking = WorkerConfiguration.loadTracking(directory: directory, problems: problems) else {
            throw LiveDeliveryError(
                .invalidConfiguration, "the policy or content mapping is not valid", problems: problems.items)
        }
        return tracking
    }
}

extension AdminContext {
    /// Runs `body` with a client for `postgres.url` (or, with `reporting`, `postgres.reportingUrl`),
    /// then shuts the client down.
    package func withPostgres<Result>(
        reporting: Bool = false, _ body: (PostgresClient) async throws -> Result
    ) async throws -> Result {
        let client = try postgresClient(reporting: reporting)
        do {
            let result = try await body(client)
            await client.shutdown()
            return result
        } catch {
            await client.shutdown()
            throw error
        }
    }

    /// One line for an operator: no SQL, payloads or secrets.
    package static func describe(_ error: any Error) -> String {
        switch error {
        case let error as LiveDeliveryError: error.description
        case let error as PostgresError where error.sqlState == SQLState("42501"):
            "PostgreSQL: permission denied (\(error.sqlState?.description ?? "")); check the role and the migrations"
        case let error as PostgresError where error.sqlState == .undefinedTable:
            "PostgreSQL: a report view or table is missing; run `livedelivery migrate`"
        case let error as PostgresError: "PostgreSQL: \(error)"
        default: "\(error)"
        }
    }
}
