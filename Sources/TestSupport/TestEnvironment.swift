package import Foundation
package import Postgres

/// Where the integration tests find the servers that `scripts/services` started.
///
/// `scripts/test` exports the URLs; the defaults match the script's ports so a test run from an
/// editor works too once `scripts/services start` has run. The *fault* pair is a second broker and
/// database that tests may restart without disturbing tests running in parallel on the main pair.
package enum TestEnvironment {
    package static var amqpURL: String {
        value("LIVEDELIVERY_AMQP_URL") ?? "amqp://livedelivery:livedelivery@127.0.0.1:56720/%2F"
    }
    package static var postgresURL: String {
        value("LIVEDELIVERY_POSTGRES_URL") ?? "postgresql://livedelivery:livedelivery@127.0.0.1:55432/livedelivery"
    }
    package static var faultAMQPURL: String {
        value("LIVEDELIVERY_FAULT_AMQP_URL") ?? "amqp://livedelivery:livedelivery@127.0.0.1:56730/%2F"
    }
    package static var faultPostgresURL: String {
        value("LIVEDELIVERY_FAULT_POSTGRES_URL")
            ?? "postgresql://livedelivery:livedelivery@127.0.0.1:55442/livedelivery"
    }

    /// The three-node RabbitMQ cluster (``RabbitMQCluster``, `livedelivery-servers cluster`): its nodes' URLs, comma-separated.
    package static var clusterAMQPURLs: String {
        value("LIVEDELIVERY_CLUSTER_AMQP_URLS")
            ?? (1...3).map { "amqp://livedelivery:livedelivery@127.0.0.1:\(56740 + $0)/%2F" }.joined(separator: ",")
    }

    /// The primary/standby pair (``PostgresReplica``, `livedelivery-servers replica`): each server, and both in one libpq URL
    /// that follows a failover (`target_session_attrs=read-write`).
    package static var replicaPrimaryURL: String {
        value("LIVEDELIVERY_REPLICA_PRIMARY_URL")
            ?? "postgresql://livedelivery:livedelivery@127.0.0.1:55451/livedelivery"
    }
    package static var replicaStandbyURL: String {
        value("LIVEDELIVERY_REPLICA_STANDBY_URL")
            ?? "postgresql://livedelivery:livedelivery@127.0.0.1:55452/livedelivery"
    }
    package static var replicaURL: String {
        value("LIVEDELIVERY_REPLICA_URL")
            ?? "postgresql://livedelivery:livedelivery@127.0.0.1:55451,127.0.0.1:55452/livedelivery"
            + "?target_session_attrs=read-write"
    }

    /// The pair that pg_auto_failover manages (``ManagedPostgres``, `livedelivery-servers managed`): both nodes in one libpq URL that
    /// follows the monitor's failovers and switchovers (`target_session_attrs=read-write`).
    package static var managedURL: String {
        value("LIVEDELIVERY_MANAGED_URL")
            ?? "postgresql://livedelivery:livedelivery@127.0.0.1:55456,127.0.0.1:55457/livedelivery"
            + "?target_session_attrs=read-write"
    }

    /// The project's root folder (where `Package.swift` is), found from this source file.
    package static var projectRoot: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
    }

    /// A name no other test (or concurrent test run) uses: for queues, exchanges, tables, ids.
    package static func uniqueName(_ prefix: String) -> String {
        "\(prefix)-\(UUID().uuidString.prefix(8).lowercased())"
    }

    private static func value(_ name: String) -> String? {
        ProcessInfo.processInfo.environment[name].flatMap { $0.isEmpty ? nil : $0 }
    }
}

extension TestEnvironment {
    /// Runs `body` on a connection of the superuser to `database` (`postgres` unless told) of `serverURL`'s
    /// server: creating and dropping databases, and roles.
    @discardableResult
    package static func asSuperuser<Result: Sendable>(
        on serverURL: String, database: String = "postgres", _ body: (PostgresConnection) async throws -> Result
    ) async throws -> Result {
        let admin = PostgresClient(
            configuration: try PostgresConfiguration(PostgresLogin.superuser.url(serverURL, database: database)),
            logger: quietLogger)
        do {
            let result = try await admin.withConnection(body)
            await admin.shutdown()
            return result
        } catch {
            await admin.shutdown()
            throw error
        }
    }

    /// Runs `body` with exclusive use of the fault pair.
    ///
    /// Every test target runs in one test process, in parallel; `.serialized` orders tests within one
    /// suite only. A test that restarts the fault broker or database (or needs them to stay up while
    /// it runs) takes this lock, so no two such tests, in any target, overlap.
    package static func withFaultServers<Result>(_ body: () async throws -> Result) async throws -> Result {
        await faultServersLock.lock()
        do {
            let result = try await body()
            await faultServersLock.unlock()
            return result
        } catch {
            await faultServersLock.unlock()
            throw error
        }
    }

    private static let faultServersLock = AsyncLock()
}

/// A first-come, first-served lock for async code.
private actor AsyncLock {
    private var locked = false
    private var waiters: [CheckedContinuation<Void, Never>] = []

    func lock() async {
        guard locked else {
            locked = true
            return
        }
        await withCheckedContinuation { waiters.append($0) }
    }

    func unlock() {
        if waiters.isEmpty {
            locked = false
        } else {
            waiters.removeFirst().resume()  // ownership passes straight to the next waiter
        }
    }
}
