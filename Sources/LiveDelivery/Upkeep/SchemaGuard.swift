import Logging
import Postgres
import ServiceLifecycle
import Synchronization

/// Refuses to run against a database whose schema this release does not know.
///
/// It reads the newest applied migration once the database answers (waiting, with backoff, while
/// it does not: a worker started before its database is not ready, but does not exit) and throws,
/// naming both versions, when it is not ``Migrator/schemaVersion``; the service group then stops and
/// `livedelivery run` exits 1. Until the check has passed, the services that read or write the
/// tables wait (``SchemaGate``).
struct SchemaGuard: Service {
    let client: PostgresClient
    let gate: SchemaGate
    let health: WorkerHealth
    let logger: Logger

    func run() async throws {
        var backoff = Backoff(base: .milliseconds(200), maximum: .seconds(10))
        while !Task.isShuttingDownGracefully && !Task.isCancelled {
            let version: Int
            do {
                version = try await Migrator.appliedVersion(client)
            } catch let error as PostgresError where error.isRetriable {
                health.update { $0.database = false }
                await sleepUnlessShuttingDown(backoff.next())
                continue
            }
            guard version == Migrator.schemaVersion else {
                let advice =
                    version < Migrator.schemaVersion
                    ? "run `livedelivery migrate` with this release first"
                    : "run a release that knows it (workers of an older release must not write to it)"
                throw LiveDeliveryError(
                    .invalidConfiguration,
                    "the database's schema is version \(version); this release works with version \(Migrator.schemaVersion): \(advice)"
                )
            }
            logger.debug("schema version checked", metadata: [LiveDeliveryLoggingKeys.migration: "\(version)"])
            if let warning = try? await LoginPrivileges.read(client).warning { logger.warning("\(warning)") }
            gate.open()
            try? await gracefulShutdown()
            return
        }
    }
}

/// Opened once the schema check has passed; the services behind it start then.
final class SchemaGate: Sendable {
    private let isOpen = Atomic<Bool>(false)

    func open() { isOpen.store(true, ordering: .releasing) }

    /// Waits until the gate opens; false when the worker shuts down first.
    func waitUntilOpen() async -> Bool {
        while !isOpen.load(ordering: .acquiring) {
            if Task.isShuttingDownGracefully || Task.isCancelled { return false }
            await sleepUnlessShuttingDown(.milliseconds(50))  // start-up only: once open, never polled
        }
        return true
    }
}

/// Runs `service` once the schema check has passed.
struct AfterSchemaCheck: Service {
    let service: any Service
    let gate: SchemaGate

    func run() async throws {
        guard await gate.waitUntilOpen() else { return }
        try await service.run()
    }
}
