import Dispatch
import Logging
import Synchronization

/// One libpq connection, confined to its own serial dispatch queue.
///
/// Every libpq call on the connection runs on that queue; the async methods suspend the caller with a
/// continuation, so no Swift concurrency thread ever blocks on the network. Statements on one connection run one
/// after another. Obtain one from `PostgresClient.withConnection` or `withTransaction`.
public final class PostgresConnection: Sendable {
    /// The pool's number for this connection (for logs).
    public let id: Int
    private let queue: DispatchQueue
    private let handle: CPostgresHandle
    private let logger: Logger
    private let state = Atomic<UInt8>(State.idle.rawValue)

    private enum State: UInt8 {
        case idle  // open and outside any transaction
        case inTransaction  // open, inside a transaction block (or status unknown)
        case broken  // closed or lost: never reuse
    }

    private init(id: Int, queue: DispatchQueue, handle: CPostgresHandle, logger: Logger) {
        self.id = id
        self.queue = queue
        self.handle = handle
        self.logger = logger
    }

    /// Opens a connection (on its own queue).
    static func connect(
        configuration: PostgresConfiguration,
        id: Int,
        logger: Logger
    ) async throws(PostgresError) -> PostgresConnection {
        var logger = logger
        logger[metadataKey: PostgresLoggingKeys.connectionID] = "\(id)"
        let queue = DispatchQueue(label: "postgres.connection.\(id)")
        let conninfo = configuration.connectionString
        let result: Result<CPostgresHandle, PostgresError> = await withCheckedContinuation { continuation in
            queue.async {
                continuation.resume(returning: Result { () throws(PostgresError) in
                    try CPostgresHandle.connect(conninfo: conninfo)
                })
            }
        }
        let handle = try result.get()
        logger[metadataKey: PostgresLoggingKeys.backendPID] = "\(handle.backendPID)"
        logger.debug("Postgres connection opened")
        return PostgresConnection(id: id, queue: queue, handle: handle, logger: logger)
    }

    /// Runs one statement; interpolated values are bind parameters.
    @discardableResult
    public func query(_ query: PostgresQuery) async throws -> PostgresRows {
        try await run { handle throws(PostgresError) in try handle.query(query) }
    }

    /// Runs SQL text that may contain several statements separated by semicolons (simple protocol, no
    /// parameters): for migrations and fixed commands. Never build the text from input.
    public func execute(unsafeSQL sql: String) async throws {
        _ = try await run { handle throws(PostgresError) in try handle.simpleQuery(sql) }
    }

    /// `execute(unsafeSQL:)` returning the last statement's result; used for BEGIN/COMMIT.
    func simpleQuery(_ sql: String) async throws(PostgresError) -> PostgresRows {
        try await run { handle throws(PostgresError) in try handle.simpleQuery(sql) }
    }

    /// True once the connection is closed or lost; the pool discards it.
    public var isClosed: Bool { state.load(ordering: .acquiring) == State.broken.rawValue }

    /// Open and outside any transaction block: ready for the next user.
    var isReusable: Bool { state.load(ordering: .acquiring) == State.idle.rawValue }

    /// Closes the connection (after statements already queued on it).
    func close() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            queue.async { [self] in
                handle.finish()
                self.state.store(State.broken.rawValue, ordering: .releasing)
                continuation.resume()
            }
        }
        logger.debug("Postgres connection closed")
    }

    private func run<Value: Sendable>(
        _ body: @escaping @Sendable (CPostgresHandle) throws(PostgresError) -> Value
    ) async throws(PostgresError) -> Value {
        let result: Result<Value, PostgresError> = await withCheckedContinuation { continuation in
            queue.async { [self] in
                let result = Result { () throws(PostgresError) in try body(self.handle) }
                var now: State = handle.isOpen ? (handle.isIdle ? .idle : .inTransaction) : .broken
                if case .failure(let error) = result, error.isConnectionError { now = .broken }
                self.state.store(now.rawValue, ordering: .releasing)
                continuation.resume(returning: result)
            }
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
