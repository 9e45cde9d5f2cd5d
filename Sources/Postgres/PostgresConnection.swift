import Foundation
import Logging
import Synchronization

/// One libpq connection, confined to its own thread.
///
/// Every libpq call on the connection runs on that thread; the async methods suspend the caller with a
/// continuation, so no Swift concurrency thread ever blocks on the network. Statements on one connection run one
/// after another. Obtain one from `PostgresClient.withConnection` or `withTransaction`.
package final class PostgresConnection: Sendable {
    /// The pool's number for this connection (for logs).
    package let id: Int
    private let thread: PostgresConnectionThread
    private let handle: CPostgresHandle
    private let logger: Logger
    private let state = Atomic<UInt8>(State.idle.rawValue)
    private let idledInPool = Atomic<Bool>(false)
    /// Set once a cancelled task asked the server to cancel a statement on this connection.
    private let cancelRequested = Atomic<Bool>(false)

    private enum State: UInt8 {
        case idle  // open and outside any transaction
        case inTransaction  // open, inside a transaction block (or status unknown)
        case broken  // closed or lost: never reuse
    }

    private init(id: Int, thread: PostgresConnectionThread, handle: CPostgresHandle, logger: Logger) {
        self.id = id
        self.thread = thread
        self.handle = handle
        self.logger = logger
    }

    /// Opens a connection (on its own thread).
    static func connect(
        configuration: PostgresConfiguration,
        id: Int,
        logger: Logger
    ) async throws(PostgresError) -> PostgresConnection {
        var logger = logger
        logger[metadataKey: PostgresLoggingKeys.connectionID] = "\(id)"
        let thread = PostgresConnectionThread(name: "postgres.connection.\(id)")
        let parameters = configuration.connectionParameters
        let cacheSize = configuration.statementCacheSize
        let result: Result<CPostgresHandle, PostgresError> = await withUnsafeContinuation { continuation in
            thread.execute {
                continuation.resume(
                    returning: Result { () throws(PostgresError) in
                        try CPostgresHandle.connect(parameters: parameters, statementCacheSize: cacheSize)
                    })
            }
        }
        let handle: CPostgresHandle
        do {
            handle = try result.get()
        } catch {
            thread.stop()
            throw error
        }
        logger[metadataKey: PostgresLoggingKeys.backendPID] = "\(handle.backendPID)"
        logger[metadataKey: PostgresLoggingKeys.server] = "\(handle.server)"
        logger.debug("Postgres connection opened")
        return PostgresConnection(id: id, thread: thread, handle: handle, logger: logger)
    }

    /// Runs one statement; interpolated values are bind parameters.
    @discardableResult
    package func query(_ query: PostgresQuery) async throws -> PostgresRows {
        try await run { handle throws(PostgresError) in try handle.query(query) }
    }

    /// Runs several statements in one round trip (libpq's pipeline mode) and returns each one's rows, in
    /// order. They run one after another as if sent one by one, each seeing what the ones before it
    /// did, but the caller waits for the server once instead of once per statement. When one fails, the
    /// ones after it do not run and its error is thrown (inside a transaction, the transaction has then
    /// failed; outside one, the statements form one implicit transaction and none of them stays). For
    /// statements that do not need each other's results.
    @discardableResult
    package func pipeline(_ queries: [PostgresQuery]) async throws -> [PostgresRows] {
        switch queries.count {
        case 0: return []
        case 1: return [try await query(queries[0])]
        default: return try await run { handle throws(PostgresError) in try handle.pipeline(queries) }
        }
    }

    /// Runs SQL text that may contain several statements separated by semicolons (simple protocol, no
    /// parameters): for migrations and fixed commands. Never build the text from input.
    package func execute(unsafeSQL sql: String) async throws {
        _ = try await run { handle throws(PostgresError) in try handle.simpleQuery(sql) }
    }

    /// Holds `begin` back to be sent with the next statement (see `CPostgresHandle.deferBegin(_:)`).
    func deferBegin(_ begin: String) async throws(PostgresError) {
        try await run { handle throws(PostgresError) in try handle.deferBegin(begin) }
    }

    /// `execute(unsafeSQL:)` returning the last statement's result; used for COMMIT and ROLLBACK.
    func simpleQuery(_ sql: String) async throws(PostgresError) -> PostgresRows {
        try await run { handle throws(PostgresError) in try handle.simpleQuery(sql) }
    }

    deinit {
        thread.stop()
    }

    /// Called by the pool when the connection becomes idle: the next statement checks it first.
    func markIdle() {
        idledInPool.store(true, ordering: .relaxed)
    }

    /// Runs `body` on the calling thread, which must be the connection's thread.
    private func runHere<Value>(
        _ body: (CPostgresHandle) throws(PostgresError) -> Value
    ) -> Result<Value, PostgresError> {
        if idledInPool.exchange(false, ordering: .relaxed) { handle.needsAliveCheck = true }
        let result = Result { () throws(PostgresError) in try body(handle) }
        var now: State = handle.isOpen ? (handle.isIdle ? .idle : .inTransaction) : .broken
        if case .failure(let error) = result, error.isConnectionError { now = .broken }
        state.store(now.rawValue, ordering: .releasing)
        return result
    }

    /// True once the connection is closed or lost; the pool discards it.
    package var isClosed: Bool { state.load(ordering: .acquiring) == State.broken.rawValue }

    /// Open and outside any transaction block: ready for the next user.
    var isReusable: Bool { state.load(ordering: .acquiring) == State.idle.rawValue }

    /// Closes the connection (after statements already queued on it).
    func close() async {
        await withUnsafeContinuation { (continuation: UnsafeContinuation<Void, Never>) in
            thread.execute { [self] in
                handle.finish()
                self.state.store(State.broken.rawValue, ordering: .releasing)
                continuation.resume()
            }
        }
        logger.debug("Postgres connection closed")
    }

    /// Cancelling the task that runs a statement asks the server to cancel the statement (`PQcancel`):
    /// the statement fails with SQLSTATE 57014 (`query_canceled`) instead of running on, say, in a lock
    /// wait. `PQcancel` opens a connection to the server and waits, so it runs on a thread of its own,
    /// never on the cooperative pool or on the connection's thread, which is blocked in the statement.
    private func requestCancel() {
        guard !cancelRequested.exchange(true, ordering: .acquiringAndReleasing), let request = handle.cancelRequest
        else { return }
        logger.debug("Postgres statement cancelled with its task; asking the server to stop it")
        Thread.detachNewThread { request.send() }
    }

    /// The connection's thread as a task executor (see `PostgresClient.withConnection`).
    var executor: any TaskExecutor { thread }

    private func run<Value: Sendable>(
        _ body: @escaping @Sendable (CPostgresHandle) throws(PostgresError) -> Value
    ) async throws(PostgresError) -> Value {
        let result: Result<Value, PostgresError> = await withTaskCancellationHandler {
            if thread.isCurrent {
                // Already on the connection's thread (the task prefers its executor): call libpq directly.
                return runHere(body)
            }
            return await withUnsafeContinuation { continuation in
                thread.execute { [self] in continuation.resume(returning: runHere(body)) }
            }
        } onCancel: {
            requestCancel()
        }
        if cancelRequested.load(ordering: .acquiring) {
            // The cancel request may still be on its way and would cancel the next user's statement
            // instead: this connection is never reused.
            state.store(State.broken.rawValue, ordering: .releasing)
        }
        if case .failure(let error) = result, error.isConnectionError {
            logger.debug(
                "Postgres connection lost",
                metadata: [
                    PostgresLoggingKeys.error: "\(error)",
                    PostgresLoggingKeys.sqlState: "\(error.sqlState?.rawValue ?? "")",
                ]
            )
        }
        return try result.get()
    }
}
