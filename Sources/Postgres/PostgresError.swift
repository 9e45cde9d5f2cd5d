/// The one error type of the `Postgres` module.
///
/// `description` is safe to log: it names the error class, the SQLSTATE and the schema objects involved, never
/// SQL text, bound values, server detail lines (which can quote row values) or the password. The server's full
/// message, detail and hint are in the properties and in `debugDescription`.
package struct PostgresError: Error, Sendable, CustomStringConvertible, CustomDebugStringConvertible {
    /// What went wrong, broadly. A growable set of values rather than a closed enum.
    package struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Base: String, Hashable, Sendable {
            case server, connectionFailed, connectionClosed, poolShutdown, decoding, timeout, invalidConfiguration
            case unexpectedResult, invalidParameter
        }
        private let base: Base
        private init(_ base: Base) { self.base = base }

        /// The server answered a statement with an error; see `sqlState`.
        package static let server = Code(.server)
        /// Opening a connection failed (server down, refused, authentication, …).
        package static let connectionFailed = Code(.connectionFailed)
        /// An open connection was lost or closed; the statement may or may not have run.
        package static let connectionClosed = Code(.connectionClosed)
        /// The client was shut down.
        package static let poolShutdown = Code(.poolShutdown)
        /// A column could not be decoded as the requested Swift type (or was NULL unexpectedly).
        package static let decoding = Code(.decoding)
        /// A client-side time limit passed (connect timeout).
        package static let timeout = Code(.timeout)
        /// The configuration (URL, option) is malformed.
        package static let invalidConfiguration = Code(.invalidConfiguration)
        /// libpq returned a result the module does not expect (e.g. COPY from a plain query).
        package static let unexpectedResult = Code(.unexpectedResult)
        /// A bound value cannot be sent (e.g. text containing a NUL character).
        package static let invalidParameter = Code(.invalidParameter)

        package var description: String { base.rawValue }
    }

    package var code: Code
    /// The server's SQLSTATE, when the server (or libpq) reported one.
    package var sqlState: SQLState?
    /// The server's primary message, or libpq's message for client-side failures. May quote values.
    package var message: String?
    /// The server's detail line. Often quotes row values (`Key (email)=(…) already exists`).
    package var detail: String?
    package var hint: String?
    package var severity: String?
    package var schemaName: String?
    package var tableName: String?
    package var columnName: String?
    package var constraintName: String?
    package var underlying: (any Error & Sendable)?
    package var file: String
    package var line: Int

    /// The statement ran from a plan prepared earlier on this connection that a schema change made
    /// stale (a migration changed a column it returns, say). The plan is forgotten: running the work
    /// again prepares it afresh, so the error is retriable.
    package var stalePlan: Bool = false

    /// True when nothing of the failed statement reached the server, so running it again on a fresh connection
    /// cannot apply it twice. The pool uses it to retry transparently.
    package var wasNotSent: Bool = false

    package init(
        code: Code,
        sqlState: SQLState? = nil,
        message: String? = nil,
        underlying: (any Error & Sendable)? = nil,
        file: String = #fileID,
        line: Int = #line
    ) {
        self.code = code
        self.sqlState = sqlState
        self.message = message
        self.underlying = underlying
        self.file = file
        self.line = line
    }

    /// The connection this error came from can no longer be used; the pool discards it. A connection
    /// that finds itself on a read-only server (a standby) is one: after a failover, a new connection
    /// with `target_session_attrs=read-write` finds the new primary.
    package var isConnectionError: Bool {
        if code == .connectionClosed || code == .connectionFailed { return true }
        guard let sqlState else { return false }
        return sqlState.errorClass == "08" || sqlState == .adminShutdown || sqlState == .crashShutdown
            || sqlState == .cannotConnectNow || sqlState == .readOnlySQLTransaction
    }

    /// Running the same work again (a new transaction, on a new connection if needed) may succeed.
    package var isRetriable: Bool {
        if stalePlan { return true }
        switch code {
        case .connectionFailed, .connectionClosed, .timeout: return true
        case .server:
            guard let sqlState else { return false }
            return isConnectionError || SQLState.retriable.contains(sqlState)
        default: return false
        }
    }

    package var description: String {
        var parts = ["code: \(code)"]
        if let sqlState { parts.append("sqlState: \(sqlState)") }
        if let schemaName { parts.append("schema: \(schemaName)") }
        if let tableName { parts.append("table: \(tableName)") }
        if let columnName { parts.append("column: \(columnName)") }
        if let constraintName { parts.append("constraint: \(constraintName)") }
        if stalePlan { parts.append("stale plan: prepared again on retry") }
        // Client-side messages are ours or libpq's (which never prints passwords); server messages can quote
        // values and SQL fragments, so they stay out of `description`.
        if code != .server, let message { parts.append("message: \(message)") }
        return "PostgresError(\(parts.joined(separator: ", ")))"
    }

    package var debugDescription: String {
        var parts = [description]
        if code == .server, let message { parts.append("message: \(message)") }
        if let detail { parts.append("detail: \(detail)") }
        if let hint { parts.append("hint: \(hint)") }
        if let underlying { parts.append("underlying: \(String(reflecting: underlying))") }
        parts.append("at: \(file):\(line)")
        return parts.joined(separator: "; ")
    }
}

/// A five-character SQLSTATE code, with names for the codes a worker branches on.
package struct SQLState: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    package let rawValue: String
    package init(rawValue: String) { self.rawValue = rawValue }
    package init(_ rawValue: String) { self.rawValue = rawValue }

    /// The two-character class, e.g. `"08"` for connection exceptions.
    package var errorClass: Substring { rawValue.prefix(2) }

    package static let connectionException = SQLState("08000")
    package static let connectionFailure = SQLState("08006")
    package static let uniqueViolation = SQLState("23505")
    package static let foreignKeyViolation = SQLState("23503")
    package static let notNullViolation = SQLState("23502")
    package static let checkViolation = SQLState("23514")
    package static let invalidTextRepresentation = SQLState("22P02")
    package static let serializationFailure = SQLState("40001")
    package static let deadlockDetected = SQLState("40P01")
    package static let syntaxError = SQLState("42601")
    package static let undefinedTable = SQLState("42P01")
    package static let undefinedColumn = SQLState("42703")
    package static let tooManyConnections = SQLState("53300")
    package static let lockNotAvailable = SQLState("55P03")
    package static let queryCanceled = SQLState("57014")
    package static let adminShutdown = SQLState("57P01")
    package static let crashShutdown = SQLState("57P02")
    package static let cannotConnectNow = SQLState("57P03")
    package static let idleInTransactionSessionTimeout = SQLState("25P03")
    package static let inFailedSQLTransaction = SQLState("25P02")
    /// A write on a hot standby (or on a primary that was demoted and came back as one).
    package static let readOnlySQLTransaction = SQLState("25006")

    static let retriable: Set<SQLState> = [
        .serializationFailure, .deadlockDetected, .lockNotAvailable, .queryCanceled, .tooManyConnections,
        .adminShutdown, .crashShutdown, .cannotConnectNow, .idleInTransactionSessionTimeout,
    ]

    private static let names: [SQLState: String] = [
        .connectionException: "connection_exception", .connectionFailure: "connection_failure",
        .uniqueViolation: "unique_violation", .foreignKeyViolation: "foreign_key_violation",
        .notNullViolation: "not_null_violation", .checkViolation: "check_violation",
        .invalidTextRepresentation: "invalid_text_representation",
        .serializationFailure: "serialization_failure", .deadlockDetected: "deadlock_detected",
        .syntaxError: "syntax_error", .undefinedTable: "undefined_table", .undefinedColumn: "undefined_column",
        .tooManyConnections: "too_many_connections", .lockNotAvailable: "lock_not_available",
        .queryCanceled: "query_canceled", .adminShutdown: "admin_shutdown", .crashShutdown: "crash_shutdown",
        .cannotConnectNow: "cannot_connect_now",
        .idleInTransactionSessionTimeout: "idle_in_transaction_session_timeout",
        .inFailedSQLTransaction: "in_failed_sql_transaction", .readOnlySQLTransaction: "read_only_sql_transaction",
    ]

    /// The condition name from the PostgreSQL manual's appendix A, for the codes listed above.
    package var name: String? { Self.names[self] }

    package var description: String { name.map { "\(rawValue) \($0)" } ?? rawValue }
}
