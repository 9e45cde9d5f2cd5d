import Postgres

/// What `check-config --connect` reports of the database server it reached.
struct ServerFacts: Sendable {
    var version: String
    /// A hot standby (in recovery): read-only.
    var isStandby: Bool
    /// `host:port`, or `local socket`.
    var address: String
    var database: String

    static func read(_ client: PostgresClient) async throws -> ServerFacts {
        let row = try await client.query(
            """
            SELECT current_setting('server_version') AS version, pg_is_in_recovery() AS standby,
                   coalesce(host(inet_server_addr()) || ':' || inet_server_port(), 'local socket') AS address,
                   current_database() AS database
            """
        )[0]
        return ServerFacts(
            version: try row.decode(String.self, "version"), isStandby: try row.decode(Bool.self, "standby"),
            address: try row.decode(String.self, "address"), database: try row.decode(String.self, "database"))
    }
}
