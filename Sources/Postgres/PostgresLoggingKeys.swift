/// Logger metadata keys used by the `Postgres` module.
enum PostgresLoggingKeys {
    /// The pool's number for a connection.
    static let connectionID = "pg.connection_id"
    /// The server process serving a connection (`PQbackendPID`).
    static let backendPID = "pg.backend_pid"
    /// The server a connection reached (`host:port`), of the several a connection string may name.
    static let server = "pg.server"
    static let channel = "pg.channel"
    static let sqlState = "pg.sqlstate"
    static let error = "pg.error"
    static let attempt = "pg.attempt"
}
