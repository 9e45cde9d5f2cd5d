public import Configuration
import Foundation
public import LiveDeliveryCore
public import Logging
public import Postgres

/// What the admin commands (`report`, `dead-letters`, `failed-pushes`) read from the configuration:
/// only the keys they need, so they run where the APNs keys are not installed.
///
/// ## Configuration keys
/// - `postgres.url` (string, required, secret): the database (any role that may read the views
///   suffices for `report`; the other commands write).
/// - `amqp.url` (string, required for `dead-letters replay`, secret), `amqp.exchange` (string,
///   optional, default `delivery.events`): where replays are published.
/// - `config.dir` (string, optional, default `Config`): policy.json and content-mapping.json, for
///   `failed-pushes retry`.
public struct AdminContext: Sendable {
    public let config: ConfigReader
    public let logger: Logger

    public init(config: ConfigReader, logger: Logger) {
        self.config = config
        self.logger = logger
    }

    /// A one-connection client for `postgres.url`; the caller shuts it down.
    public func postgresClient() throws(LiveDeliveryError) -> PostgresClient {
        guard let url = config.string(forKey: "postgres.url", isSecret: true), !url.isEmpty else {
            throw LiveDeliveryError(
                .invalidConfiguration, "postgres.url is required (environment LIVEDELIVERY_POSTGRES_URL)")
        }
        var configuration: PostgresConfiguration
        do {
            configuration = try PostgresConfiguration(url: url)
        } catch {
            throw LiveDeliveryError(.invalidConfiguration, "postgres.url is not a valid postgresql:// URL")
        }
        configuration.poolSize = 1
        configuration.applicationName = "livedelivery admin"
        return PostgresClient(configuration: configuration, logger: logger)
    }

    /// `amqp.url` and `amqp.exchange`.
    public func broker() throws(LiveDeliveryError) -> (url: String, exchange: String) {
        guard let url = config.string(forKey: "amqp.url", isSecret: true), !url.isEmpty else {
            throw LiveDeliveryError(.invalidConfiguration, "amqp.url is required (environment LIVEDELIVERY_AMQP_URL)")
        }
        return (url, config.string(forKey: "amqp.exchange", default: "delivery.events"))
    }

    /// The policy and content mapping of `config.dir`.
    public func tracking() throws(LiveDeliveryError) -> TrackingConfiguration {
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
    /// Runs `body` with a client for `postgres.url`, then shuts the client down.
    public func withPostgres<Result>(_ body: (PostgresClient) async throws -> Result) async throws -> Result {
        let client = try postgresClient()
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
    public static func describe(_ error: any Error) -> String {
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
