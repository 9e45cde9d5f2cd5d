import CLibPQ
import CShims

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The single owner of one `PGconn*`.
///
/// libpq allows one thread at a time per `PGconn`. This class is `@unchecked Sendable` only so that it can be
/// captured by the closures its owner runs on one serial queue (`PostgresConnection`) or one thread
/// (`PostgresListener`); it is never used from two threads at once, and every method must run there.
final class CPostgresHandle: @unchecked Sendable {
    private var connection: OpaquePointer?
    /// Cancels this connection's running statement from any thread; nil if libpq could not make one.
    let cancelRequest: PostgresCancelRequest?
    /// Statement text and parameter types → the name it was prepared under on this connection.
    private var prepared: [PreparedKey: String] = [:]
    private var preparedNames = 0
    private let statementCacheSize: Int
    /// The server this connection reached, `host:port` (of several hosts, the one libpq kept).
    let server: String

    private struct PreparedKey: Hashable {
        var sql: String
        var types: [PostgresDataType]
    }

    private init(connection: OpaquePointer, statementCacheSize: Int) {
        self.connection = connection
        self.statementCacheSize = statementCacheSize
        self.cancelRequest = PostgresCancelRequest(connection: connection)
        let host = PQhost(connection).map { String(cString: $0) } ?? ""
        let port = PQport(connection).map { String(cString: $0) } ?? ""
        self.server = "\(host):\(port)"
    }

    deinit {
        if let connection { PQfinish(connection) }
    }

    /// Opens a connection with `PQconnectdbParams` (blocking; bounded by `connect_timeout` per host).
    static func connect(
        parameters: [PostgresConfiguration.Parameter], statementCacheSize: Int = 0
    ) throws(PostgresError) -> CPostgresHandle {
        let keywords = parameters.map { strdup($0.keyword) } + [nil]
        let values = parameters.map { strdup($0.value) } + [nil]
        defer {
            for pointer in keywords { free(pointer) }
            for pointer in values { free(pointer) }
        }
        let opened = keywords.map { UnsafePointer($0) }.withUnsafeBufferPointer { keywordBuffer in
            values.map { UnsafePointer($0) }.withUnsafeBufferPointer { valueBuffer in
                PQconnectdbParams(keywordBuffer.baseAddress, valueBuffer.baseAddress, 0)
            }
        }
        guard let connection = opened else {
            throw PostgresError(code: .connectionFailed, message: "libpq could not allocate a connection")
        }
        guard PQstatus(connection) == CONNECTION_OK else {
            let message = Self.errorMessage(connection) ?? "connection failed"
            PQfinish(connection)
            let code: PostgresError.Code = message.contains("timeout expired") ? .timeout : .connectionFailed
            throw PostgresError(code: code, message: message)
        }
        // Notices (e.g. "there is no transaction in progress") go nowhere rather than to stderr.
        PQsetNoticeProcessor(connection, { _, _ in }, nil)
        return CPostgresHandle(connection: connection, statementCacheSize: statementCacheSize)
    }

    /// Closes the connection now (`PQfinish`); later calls throw `.connectionClosed`.
    func finish() {
        if let connection { PQfinish(connection) }
        connection = nil
    }

    var isOpen: Bool { connection.map { PQstatus($0) == CONNECTION_OK } ?? false }

    /// Outside any transaction block and not busy: safe to hand to another user.
    var isIdle: Bool { connection.map { PQtransactionStatus($0) == PQTRANS_IDLE } ?? false }

    var socket: Int32 { connection.map { PQsocket($0) } ?? -1 }

    var backendPID: Int32 { connection.map { PQbackendPID($0) } ?? 0 }

    private func open() throws(PostgresError) -> OpaquePointer {
        guard let connection, PQstatus(connection) == CONNECTION_OK else {
            var error = PostgresError(code: .connectionClosed, message: "the connection is closed")
            error.wasNotSent = true
            throw error
        }
        return connection
    }

    /// Reads whatever the server sent while the connection sat idle (an `admin_shutdown` error, end of file,
    /// notifications) without blocking. Throws `.connectionClosed` (with `wasNotSent`) when the connection died.
    func checkAlive() throws(PostgresError) {
        let connection = try open()
        var descriptor = pollfd(fd: PQsocket(connection), events: Int16(POLLIN), revents: 0)
        guard poll(&descriptor, 1, 0) > 0 else { return }
        if PQconsumeInput(connection) == 0 || PQstatus(connection) != CONNECTION_OK {
            var error = PostgresError(
                code: .connectionClosed,
                message: Self.errorMessage(connection) ?? "the server closed the connection"
            )
            error.wasNotSent = true
            throw error
        }
    }

    /// Set when the connection goes back to the pool: the next statement first checks that the server did not
    /// close it meanwhile (one non-blocking poll), so that a dead idle connection is found before sending.
    var needsAliveCheck = false

    private func checkAliveIfIdled() throws(PostgresError) {
        guard needsAliveCheck else { return }
        needsAliveCheck = false
        try checkAlive()
    }

    /// A transaction's `BEGIN`, held back to go out with the transaction's first statement in the same
    /// round trip (``deferBegin(_:)``). A transaction of the worker is three to five round trips; on a
    /// busy machine each costs the worker and the server a wake-up, and every statement of a batch waits
    /// for it.
    private var pendingBegin: String?

    /// Checks the connection as a statement would (so a connection the server closed while idle is found
    /// before anything is sent), then holds `begin` back until the next statement.
    func deferBegin(_ begin: String) throws(PostgresError) {
        try checkAliveIfIdled()
        _ = try open()
        pendingBegin = begin
    }

    /// Runs one statement with bind parameters (extended protocol; text results) and copies its result.
    ///
    /// The first `statementCacheSize` distinct statements are prepared once (`PQsendPrepare`) and then
    /// executed by name, which saves the server parsing and planning them again: the worker runs the
    /// same few statements all day. Statements planned ``PostgresQuery/Planning/everyRun`` are never
    /// prepared.
    func query(_ query: PostgresQuery) throws(PostgresError) -> PostgresRows {
        if pendingBegin != nil { return try pipeline([query])[0] }
        try checkAliveIfIdled()
        let connection = try open()
        let binds = query.binds
        let key = PreparedKey(sql: query.sql, types: binds.types)
        let (name, fresh) = try preparedName(query, binds: binds, key: key, connection)
        try send(query, binds: binds, name: name, connection)
        do {
            return try collectResults(connection)
        } catch {
            throw forgetPlanIfStale(error, key: key, fresh: fresh)
        }
    }

    /// Runs several statements in one round trip (libpq's pipeline mode): every statement is sent, then
    /// one Sync, then the results are read in order. When a statement fails the server skips the rest up
    /// to the Sync; the first error is thrown once everything has been read, so the connection is ready
    /// for the next statement (inside a transaction block, a failed one: the caller rolls back).
    ///
    /// Statements to be prepared are prepared first, one round trip each, once per connection (the cache
    /// of ``query(_:)``). The connection blocks: nothing is read until everything is sent, while the server
    /// answers each statement as it runs it. That is safe as long as the answers fit in the sockets'
    /// buffers (hundreds of kilobytes), as the worker's few rows of ids do; a pipeline meant to return many
    /// rows would need a non-blocking connection, or should not be a pipeline.
    func pipeline(_ queries: [PostgresQuery]) throws(PostgresError) -> [PostgresRows] {
        try checkAliveIfIdled()
        let connection = try open()
        // A held-back BEGIN goes first; its (empty) result is dropped below.
        let begin = pendingBegin.map { PostgresQuery(unsafeSQL: $0).planned(.everyRun) }
        pendingBegin = nil
        var planned: [(query: PostgresQuery, binds: PostgresBindings, key: PreparedKey, name: String?, fresh: Bool)] =
            []
        planned.reserveCapacity(queries.count + 1)
        for query in (begin.map { [$0] } ?? []) + queries {
            let binds = query.binds
            let key = PreparedKey(sql: query.sql, types: binds.types)
            let (name, fresh) = try preparedName(query, binds: binds, key: key, connection)
            planned.append((query, binds, key, name, fresh))
        }
        guard PQenterPipelineMode(connection) == 1 else { throw sendError(connection) }
        var rows: [PostgresRows] = []
        var firstError: PostgresError?
        var sentAny = false
        do throws(PostgresError) {
            for statement in planned {
                try send(statement.query, binds: statement.binds, name: statement.name, connection)
                sentAny = true
            }
            guard PQpipelineSync(connection) == 1 else { throw sendError(connection) }
            for statement in planned {
                // One statement's results end with a NULL; a statement skipped after an error answers
                // PGRES_PIPELINE_ABORTED.
                var statementRows: PostgresRows?
                while let result = PQgetResult(connection) {
                    defer { PQclear(result) }
                    switch PQresultStatus(result) {
                    case PGRES_COMMAND_OK, PGRES_TUPLES_OK:
                        statementRows = Self.copy(result)
                    case PGRES_PIPELINE_ABORTED:
                        break
                    case PGRES_FATAL_ERROR, PGRES_NONFATAL_ERROR:
                        if firstError == nil {
                            firstError = forgetPlanIfStale(
                                Self.error(from: result, connection: connection), key: statement.key,
                                fresh: statement.fresh)
                        }
                    default:
                        if firstError == nil {
                            firstError = PostgresError(
                                code: .unexpectedResult, message: "unexpected libpq result status in a pipeline")
                        }
                    }
                }
                if let statementRows { rows.append(statementRows) }
            }
            guard let sync = PQgetResult(connection) else {
                throw firstError
                    ?? PostgresError(
                        code: PQstatus(connection) == CONNECTION_OK ? .unexpectedResult : .connectionClosed,
                        message: Self.errorMessage(connection) ?? "the pipeline ended without its Sync")
            }
            let status = PQresultStatus(sync)
            PQclear(sync)
            guard status == PGRES_PIPELINE_SYNC else {
                throw PostgresError(code: .unexpectedResult, message: "unexpected libpq result status after a pipeline")
            }
        } catch {
            // Mid-protocol: the connection cannot be trusted with another statement.
            finish()
            var error = firstError ?? error
            // Part of the pipeline may have reached the server: never retried as unsent.
            if sentAny { error.wasNotSent = false }
            throw error
        }
        guard PQexitPipelineMode(connection) == 1 else {
            finish()
            throw PostgresError(code: .unexpectedResult, message: "libpq did not leave pipeline mode")
        }
        if let firstError { throw firstError }
        guard rows.count == planned.count else {
            throw PostgresError(code: .unexpectedResult, message: "a statement of the pipeline returned no result")
        }
        if begin != nil { rows.removeFirst() }
        return rows
    }

    /// The prepared statement's name for a cached statement, preparing it first if there is room;
    /// `fresh` when it was prepared just now.
    private func preparedName(
        _ query: PostgresQuery, binds: PostgresBindings, key: PreparedKey, _ connection: OpaquePointer
    ) throws(PostgresError) -> (name: String?, fresh: Bool) {
        guard query.planning == .cached else { return (nil, false) }
        if let name = prepared[key] { return (name, false) }
        guard prepared.count < statementCacheSize else { return (nil, false) }
        preparedNames += 1
        let candidate = "ld_\(preparedNames)"
        let sent = binds.types.withUnsafeBufferPointer { types in
            types.withMemoryRebound(to: Oid.self) { oids in
                PQsendPrepare(connection, candidate, query.sql, Int32(binds.count), oids.baseAddress)
            }
        }
        guard sent == 1 else { throw sendError(connection) }
        _ = try collectResults(connection)
        prepared[key] = candidate
        return (candidate, true)
    }

    /// Sends one statement (by name when prepared) without waiting for its result.
    private func send(
        _ query: PostgresQuery, binds: PostgresBindings, name: String?, _ connection: OpaquePointer
    ) throws(PostgresError) {
        let sent: Int32 = try withParameterValues(binds.parameters) { values, lengths, formats throws(PostgresError) in
            if let name {
                return PQsendQueryPrepared(
                    connection, name, Int32(binds.count), values, lengths, formats, query.resultFormatCode)
            }
            return binds.types.withUnsafeBufferPointer { types in
                // `PostgresDataType` is a one-field struct around the OID.
                types.withMemoryRebound(to: Oid.self) { oids in
                    PQsendQueryParams(
                        connection, query.sql, Int32(binds.count), oids.baseAddress, values, lengths, formats,
                        query.resultFormatCode)
                }
            }
        }
        guard sent == 1 else { throw sendError(connection) }
    }

    /// A plan the server may no longer use (a table changed under it, `0A000` "cached plan must not
    /// change result type"; or gone, `26000`): prepared afresh next time. When the plan was prepared
    /// before this call, the error is marked ``PostgresError/stalePlan`` (retriable: the work run again
    /// prepares it anew). A statement prepared just now that fails the same way fails for good.
    private func forgetPlanIfStale(_ error: PostgresError, key: PreparedKey, fresh: Bool) -> PostgresError {
        guard let state = error.sqlState?.rawValue, state == "0A000" || state == "26000", prepared[key] != nil
        else { return error }
        prepared[key] = nil
        var error = error
        error.stalePlan = !fresh
        return error
    }

    /// Runs SQL text that may hold several statements (simple protocol, no parameters). Returns the last result.
    @discardableResult
    func simpleQuery(_ sql: String) throws(PostgresError) -> PostgresRows {
        try checkAliveIfIdled()
        let connection = try open()
        // A held-back BEGIN rides in the same text (the last statement's result is returned).
        let text = pendingBegin.map { "\($0);\n\(sql)" } ?? sql
        pendingBegin = nil
        guard PQsendQuery(connection, text) == 1 else { throw sendError(connection) }
        return try collectResults(connection)
    }

    /// Pending notifications, after `PQconsumeInput`. Throws `.connectionClosed` when the connection died.
    func consumeNotifications() throws(PostgresError) -> [PostgresNotification] {
        let connection = try open()
        guard PQconsumeInput(connection) == 1, PQstatus(connection) == CONNECTION_OK else {
            throw PostgresError(
                code: .connectionClosed,
                message: Self.errorMessage(connection) ?? "the server closed the connection"
            )
        }
        var notifications: [PostgresNotification] = []
        while let notify = PQnotifies(connection) {
            notifications.append(
                PostgresNotification(
                    channel: String(cString: notify.pointee.relname),
                    payload: String(cString: notify.pointee.extra),
                    processID: Int(notify.pointee.be_pid)
                )
            )
            PQfreemem(notify)
        }
        return notifications
    }

    /// Quotes an identifier (`PQescapeIdentifier`), e.g. a channel name for `LISTEN`.
    func quoteIdentifier(_ identifier: String) throws(PostgresError) -> String {
        let connection = try open()
        let utf8 = Array(identifier.utf8)
        guard let quoted = PQescapeIdentifier(connection, identifier, utf8.count) else {
            throw PostgresError(code: .invalidParameter, message: "identifier cannot be quoted")
        }
        defer { PQfreemem(quoted) }
        return String(cString: quoted)
    }

    // MARK: Results

    private func sendError(_ connection: OpaquePointer) -> PostgresError {
        var error = PostgresError(
            code: .connectionClosed,
            message: Self.errorMessage(connection) ?? "sending the statement failed"
        )
        // The protocol's Sync message did not reach the server, so nothing was committed.
        error.wasNotSent = true
        return error
    }

    /// Drains `PQgetResult`, copying the last successful result and keeping the first error.
    private func collectResults(_ connection: OpaquePointer) throws(PostgresError) -> PostgresRows {
        var rows: PostgresRows?
        var firstError: PostgresError?
        while let result = PQgetResult(connection) {
            defer { PQclear(result) }
            switch PQresultStatus(result) {
            case PGRES_COMMAND_OK, PGRES_TUPLES_OK, PGRES_EMPTY_QUERY:
                if firstError == nil { rows = Self.copy(result) }
            case PGRES_FATAL_ERROR, PGRES_NONFATAL_ERROR:
                if firstError == nil { firstError = Self.error(from: result, connection: connection) }
            case PGRES_COPY_IN, PGRES_COPY_OUT, PGRES_COPY_BOTH:
                // COPY is not supported through this API; the connection is left mid-protocol, so drop it.
                if firstError == nil {
                    firstError = PostgresError(code: .unexpectedResult, message: "COPY is not supported")
                }
                finish()
                throw firstError!
            default:
                if firstError == nil {
                    firstError = PostgresError(code: .unexpectedResult, message: "unexpected libpq result status")
                }
            }
        }
        if let firstError { throw firstError }
        guard let rows else {
            throw PostgresError(
                code: PQstatus(connection) == CONNECTION_OK ? .unexpectedResult : .connectionClosed,
                message: Self.errorMessage(connection) ?? "no result"
            )
        }
        return rows
    }

    private static func copy(_ result: OpaquePointer) -> PostgresRows {
        let columnCount = Int(PQnfields(result))
        let rowCount = Int(PQntuples(result))
        var columns: [PostgresColumn] = []
        columns.reserveCapacity(columnCount)
        for column in 0..<columnCount {
            columns.append(
                PostgresColumn(
                    name: String(cString: PQfname(result, Int32(column))),
                    dataType: PostgresDataType(PQftype(result, Int32(column)))
                )
            )
        }
        var cells: [String?] = []
        cells.reserveCapacity(columnCount * rowCount)
        // Binary cells PostgresCell reads as text are turned into their text form here; the others keep their bytes.
        let binary = (0..<Int32(columnCount)).map { PQfformat(result, $0) == 1 }
        var bytes: [[UInt8]?] = binary.contains(true) ? Array(repeating: nil, count: columnCount * rowCount) : []
        for row in 0..<Int32(rowCount) {
            for column in 0..<Int32(columnCount) {
                guard PQgetisnull(result, row, column) == 0 else {
                    cells.append(nil)
                    continue
                }
                let buffer = UnsafeRawBufferPointer(
                    start: PQgetvalue(result, row, column),
                    count: Int(PQgetlength(result, row, column))
                )
                guard binary[Int(column)] else {
                    cells.append(String(decoding: buffer, as: UTF8.self))
                    continue
                }
                let text = PostgresBinaryCell.text(buffer, columns[Int(column)].dataType)
                cells.append(text)
                if text == nil { bytes[cells.count - 1] = Array(buffer) }
            }
        }
        let commandTag = PQcmdStatus(result).map { String(cString: $0) } ?? ""
        let affected = PQcmdTuples(result).flatMap { Int(String(cString: $0)) } ?? 0
        return PostgresRows(
            columns: columns, cells: cells, bytes: bytes, affectedRows: affected, commandTag: commandTag)
    }

    private static func error(from result: OpaquePointer, connection: OpaquePointer) -> PostgresError {
        func field(_ code: Int32) -> String? {
            PQresultErrorField(result, code).map { String(cString: $0) }
        }
        let sqlState = field(CShims_pq_DIAG_SQLSTATE).map(SQLState.init(rawValue:))
        let connectionLost = PQstatus(connection) != CONNECTION_OK
        // Errors libpq makes up itself (connection lost mid-statement) carry no SQLSTATE.
        let code: PostgresError.Code = sqlState == nil && connectionLost ? .connectionClosed : .server
        var error = PostgresError(
            code: code,
            sqlState: sqlState,
            message: field(CShims_pq_DIAG_MESSAGE_PRIMARY)
                ?? PQresultErrorMessage(result).map { String(cString: $0).trimmingTrailingNewlines() }
        )
        error.detail = field(CShims_pq_DIAG_MESSAGE_DETAIL)
        error.hint = field(CShims_pq_DIAG_MESSAGE_HINT)
        error.severity = field(CShims_pq_DIAG_SEVERITY_NONLOCALIZED)
        error.schemaName = field(CShims_pq_DIAG_SCHEMA_NAME)
        error.tableName = field(CShims_pq_DIAG_TABLE_NAME)
        error.columnName = field(CShims_pq_DIAG_COLUMN_NAME)
        error.constraintName = field(CShims_pq_DIAG_CONSTRAINT_NAME)
        return error
    }

    private static func errorMessage(_ connection: OpaquePointer) -> String? {
        guard let message = PQerrorMessage(connection) else { return nil }
        let text = String(cString: message).trimmingTrailingNewlines()
        return text.isEmpty ? nil : text
    }
}

/// Lays the values out in one buffer (text ones NUL-terminated) and passes libpq's `paramValues`,
/// `paramLengths` and `paramFormats` arrays (the last two nil when every value is text).
private func withParameterValues<R>(
    _ values: [PostgresParameterValue?],
    _ body: (
        UnsafePointer<UnsafePointer<CChar>?>?, UnsafePointer<Int32>?, UnsafePointer<Int32>?
    ) throws(PostgresError) -> R
) throws(PostgresError) -> R {
    if values.isEmpty { return try body(nil, nil, nil) }
    var total = 0
    var anyBinary = false
    for value in values {
        switch value {
        case .text(let text)?: total += text.utf8.count + 1
        case .binary(let bytes)?:
            total += bytes.count
            anyBinary = true
        case nil: break
        }
    }
    let storage = UnsafeMutablePointer<CChar>.allocate(capacity: max(total, 1))
    defer { storage.deallocate() }
    let pointers = UnsafeMutablePointer<UnsafePointer<CChar>?>.allocate(capacity: values.count)
    defer { pointers.deallocate() }
    let lengths = UnsafeMutablePointer<Int32>.allocate(capacity: values.count)
    defer { lengths.deallocate() }
    let formats = UnsafeMutablePointer<Int32>.allocate(capacity: values.count)
    defer { formats.deallocate() }
    var offset = 0
    for (index, value) in values.enumerated() {
        let start = storage + offset
        lengths[index] = 0
        formats[index] = 0
        switch value {
        case nil:
            pointers[index] = nil
        case .binary(let bytes)?:
            bytes.withUnsafeBytes { bytes in
                if let base = bytes.baseAddress, !bytes.isEmpty {
                    UnsafeMutableRawPointer(start).copyMemory(from: base, byteCount: bytes.count)
                }
            }
            offset += bytes.count
            lengths[index] = Int32(bytes.count)
            formats[index] = 1
            pointers[index] = UnsafePointer(start)
        case .text(var text)?:
            let containsNUL = text.withUTF8 { bytes in
                guard let base = bytes.baseAddress, !bytes.isEmpty else { return false }
                UnsafeMutableRawPointer(start).copyMemory(from: base, byteCount: bytes.count)
                return memchr(base, 0, bytes.count) != nil
            }
            offset += text.utf8.count
            guard !containsNUL else {
                throw PostgresError(
                    code: .invalidParameter, message: "parameter $\(index + 1) contains a NUL character")
            }
            storage[offset] = 0
            offset += 1
            pointers[index] = UnsafePointer(start)
        }
    }
    return try body(pointers, anyBinary ? lengths : nil, anyBinary ? formats : nil)
}

extension String {
    func trimmingTrailingNewlines() -> String {
        var text = Substring(self)
        while let last = text.last, last.isNewline || last == " " { text.removeLast() }
        return String(text)
    }
}

/// A `PQcancel` request for one connection, usable from any thread while that connection's own thread is
/// blocked waiting for a result.
///
/// `@unchecked Sendable`: the `PGcancel` object is a copy of the connection's address and key, never
/// changed after `PQgetCancel`, and libpq documents `PQcancel` as safe to call from any thread (even a
/// signal handler). It outlives the connection if need be: it does not point into the `PGconn`.
final class PostgresCancelRequest: @unchecked Sendable {
    private let raw: OpaquePointer

    init?(connection: OpaquePointer) {
        guard let raw = PQgetCancel(connection) else { return nil }
        self.raw = raw
    }

    deinit { PQfreeCancel(raw) }

    /// Asks the server to cancel whatever statement the connection is running. Blocks while it connects
    /// to the server, so callers run it on a thread of their own. True if the request was sent.
    @discardableResult
    func send() -> Bool {
        var message = [CChar](repeating: 0, count: 256)
        return PQcancel(raw, &message, Int32(message.count)) == 1
    }
}
