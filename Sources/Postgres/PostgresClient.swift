package import Logging
import Synchronization

/// A small pool of `PostgresConnection`s, opened lazily up to `PostgresConfiguration.poolSize`.
///
/// Tasks that find every connection busy wait (suspended, in arrival order) until one comes back. A connection
/// that turns out to be lost (server restart, `admin_shutdown`, network) is discarded, and the next lease
/// opens a fresh one, so the pool recovers by itself once the server is back.
///
///     let client = PostgresClient(configuration: try PostgresConfiguration(url), logger: logger)
///     let rows = try await client.query("SELECT id FROM orders WHERE state = \(state)")
///     await client.shutdown()
package final class PostgresClient: Sendable {
    package let configuration: PostgresConfiguration
    let logger: Logger

    private typealias StateMachine = PostgresPoolStateMachine<PostgresConnection, Waiter>
    private typealias Waiter = CheckedContinuation<PostgresPoolGrant<PostgresConnection>, any Error>

    private struct State: ~Copyable {
        var pool: StateMachine
        var nextWaiterID = 0
        var listeners: [Int: PostgresListener] = [:]
        var nextListenerID = 0
    }

    private let state: Mutex<State>

    package init(configuration: PostgresConfiguration, logger: Logger) {
        self.configuration = configuration
        self.logger = logger
        self.state = Mutex(State(pool: StateMachine(maximumConnections: configuration.poolSize)))
    }

    /// How the pool is used right now: connections leased (or opening), connections idle, and tasks
    /// waiting for one.
    package struct PoolStatistics: Sendable, Hashable {
        package var inUse: Int
        package var idle: Int
        package var waiters: Int
    }

    package var poolStatistics: PoolStatistics {
        state.withLock { state in
            PoolStatistics(
                inUse: state.pool.connectionCount - state.pool.idle.count, idle: state.pool.idle.count,
                waiters: state.pool.waiters.count)
        }
    }

    /// Runs one statement on a pooled connection.
    ///
    /// A pooled connection found dead before the statement was sent (the server restarted while it sat idle) is
    /// replaced and the statement sent on a fresh connection; a failure after sending is thrown.
    @discardableResult
    package func query(_ query: PostgresQuery) async throws -> PostgresRows {
        try await withRetryBeforeSend { connection in try await connection.query(query) }
    }

    /// Leases a connection for the duration of `body`, then returns it to the pool (or discards it when it is
    /// broken; a connection left inside a transaction block is rolled back first).
    ///
    /// `body` runs with the connection's own thread as its preferred task executor, so its statements on that
    /// connection are direct libpq calls without thread hops. (It is not the cooperative pool: blocking there
    /// only delays this connection.)
    @discardableResult
    package func withConnection<Result: Sendable>(
        _ body: (PostgresConnection) async throws -> Result
    ) async throws -> Result {
        let connection = try await lease()
        do {
            let result = try await withTaskExecutorPreference(connection.executor) { try await body(connection) }
            await release(connection)
            return result
        } catch {
            await release(connection)
            throw error
        }
    }

    /// Runs `body` inside `BEGIN … COMMIT` on one connection. When `body` throws, the transaction is rolled back
    /// and the error rethrown. When a statement inside failed but `body` swallowed the error, COMMIT cannot
    /// commit: this throws a `.server` error with SQLSTATE 25P02 (`in_failed_sql_transaction`).
    @discardableResult
    package func withTransaction<Result: Sendable>(
        isolation: PostgresIsolationLevel? = nil,
        _ body: (PostgresConnection) async throws -> Result
    ) async throws -> Result {
        let begin = isolation.map { "BEGIN ISOLATION LEVEL \($0.sql)" } ?? "BEGIN"
        return try await withRetryBeforeSend(beginningWith: begin) { connection in
            do {
                let result = try await body(connection)
                let commit = try await connection.simpleQuery("COMMIT")
                if commit.commandTag == "ROLLBACK" {
                    var error = PostgresError(
                        code: .server,
                        sqlState: .inFailedSQLTransaction,
                        message: "the transaction was rolled back because a statement in it failed"
                    )
                    error.severity = "ERROR"
                    throw error
                }
                return result
            } catch {
                if !connection.isClosed {
                    do {
                        _ = try await connection.simpleQuery("ROLLBACK")
                    } catch {
                        logger.debug("Postgres ROLLBACK failed", metadata: [PostgresLoggingKeys.error: "\(error)"])
                    }
                }
                throw error
            }
        }
    }

    /// Closes idle connections, fails waiting tasks with `.poolShutdown`, ends notification sequences, and makes
    /// later calls fail. Connections in use are closed when they come back.
    ///
    /// Returns once every listener's thread has closed its connection and exited: a process that exits
    /// while a thread is still in libpq (in OpenSSL, on a TLS link) runs its exit handlers, OpenSSL's
    /// clean-up among them, under that thread, which can crash it.
    package func shutdown() async {
        let (close, fail, listeners) = state.withLock { state in
            let (close, fail) = state.pool.shutdown()
            return (close, fail, Array(state.listeners.values))
        }
        for waiter in fail { waiter.resume(throwing: PostgresError(code: .poolShutdown)) }
        for listener in listeners { listener.stop() }
        for connection in close { await connection.close() }
        // Each unregisters itself as its thread exits.
        for listener in listeners { await listener.waitUntilExited() }
    }

    /// Listener threads still running (each ends its notification sequence's connection as it exits).
    package var listenersRunning: Int { state.withLock { $0.listeners.count } }

    // MARK: Leasing

    /// Leases a connection, optionally opens a transaction (`begin`, held back to be sent with the first
    /// statement of `body`: one round trip fewer) and runs `body`. When the connection proves dead before
    /// anything was sent (the check of an idled connection when `begin` is held back, or in `body` when there
    /// is no `begin`), it is discarded and the work starts again on another one. Errors from `body` in a
    /// transaction are never retried here: `body` may have acted on what it had read.
    private func withRetryBeforeSend<Result: Sendable>(
        beginningWith begin: String? = nil,
        _ body: (PostgresConnection) async throws -> Result
    ) async throws -> Result {
        // Each stale idle connection is found at most once, so poolSize + 1 attempts always reach a fresh one.
        var attempt = 0
        while true {
            attempt += 1
            let connection = try await lease()
            var bodyStarted = false
            do {
                let result = try await withTaskExecutorPreference(connection.executor) {
                    if let begin {
                        try await connection.deferBegin(begin)
                        bodyStarted = true
                    }
                    return try await body(connection)
                }
                await release(connection)
                return result
            } catch let error as PostgresError
                where !bodyStarted && error.wasNotSent && error.isConnectionError && attempt <= configuration.poolSize
            {
                await release(connection)
                logger.debug(
                    "Postgres connection was lost while idle; retrying on another",
                    metadata: [
                        PostgresLoggingKeys.connectionID: "\(connection.id)", PostgresLoggingKeys.attempt: "\(attempt)",
                    ]
                )
            } catch {
                await release(connection)
                throw error
            }
        }
    }

    func lease() async throws -> PostgresConnection {
        switch state.withLock({ $0.pool.lease() }) {
        case .use(let connection): return connection
        case .open(let id): return try await open(id: id)
        case .shutdown: throw PostgresError(code: .poolShutdown)
        case .wait: break
        }
        let waiterID = state.withLock { state in
            state.nextWaiterID += 1
            return state.nextWaiterID
        }
        let grant = try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: Waiter) in
                let action = state.withLock { $0.pool.enqueue(continuation, id: waiterID) }
                switch action {
                case .use(let connection): continuation.resume(returning: .use(connection))
                case .open(let id): continuation.resume(returning: .open(id: id))
                case .shutdown: continuation.resume(throwing: PostgresError(code: .poolShutdown))
                case .wait:
                    // Cancelled before we enqueued: the cancellation handler found nothing to remove.
                    if Task.isCancelled, let waiter = state.withLock({ $0.pool.cancelWaiter(id: waiterID) }) {
                        waiter.resume(throwing: CancellationError())
                    }
                }
            }
        } onCancel: {
            if let waiter = state.withLock({ $0.pool.cancelWaiter(id: waiterID) }) {
                waiter.resume(throwing: CancellationError())
            }
        }
        switch grant {
        case .use(let connection): return connection
        case .open(let id): return try await open(id: id)
        }
    }

    private func open(id: Int) async throws -> PostgresConnection {
        do {
            return try await PostgresConnection.connect(configuration: configuration, id: id, logger: logger)
        } catch {
            if let (waiter, grant) = state.withLock({ $0.pool.openFailed() }).map({ ($0.0, $0.1) }) {
                waiter.resume(returning: grant)
            }
            throw error
        }
    }

    func release(_ connection: PostgresConnection) async {
        if !connection.isClosed, !connection.isReusable {
            // Left inside a transaction block (by a withConnection body): roll back before anyone else uses it.
            _ = try? await connection.simpleQuery("ROLLBACK")
        }
        if connection.isReusable { connection.markIdle() }
        let action = state.withLock { $0.pool.release(connection, reusable: connection.isReusable) }
        switch action {
        case .none: break
        case .grant(let waiter, let grant): waiter.resume(returning: grant)
        case .close(let connection): await connection.close()
        case .closeAndGrant(let connection, let waiter, let grant):
            waiter.resume(returning: grant)
            await connection.close()
        }
    }

    // MARK: Listeners

    /// Registers a listener so that `shutdown()` stops it; false when the client is already shut down.
    func register(_ listener: PostgresListener) -> Int? {
        state.withLock { state in
            guard !state.pool.isShutdown else { return nil }
            state.nextListenerID += 1
            state.listeners[state.nextListenerID] = listener
            return state.nextListenerID
        }
    }

    func unregister(_ id: Int) {
        _ = state.withLock { $0.listeners.removeValue(forKey: id) }
    }
}

/// Transaction isolation levels for `withTransaction(isolation:)`.
package struct PostgresIsolationLevel: Hashable, Sendable {
    let sql: String
    package static let readCommitted = PostgresIsolationLevel(sql: "READ COMMITTED")
    package static let repeatableRead = PostgresIsolationLevel(sql: "REPEATABLE READ")
    package static let serializable = PostgresIsolationLevel(sql: "SERIALIZABLE")
}
