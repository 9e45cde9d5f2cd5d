import Foundation

/// Where and how to connect, and how large the pool is.
///
/// Build it from a URL, `postgresql://user:pass@host:port/db?application_name=…&sslmode=…`, or memberwise.
/// `description` never shows the password.
///
/// URL query parameters understood here: `application_name`, `sslmode`, `connect_timeout` (seconds),
/// `statement_timeout` (milliseconds), `pool_size`, `statement_cache_size`. Other parameters are passed to libpq unchanged (it rejects
/// unknown ones when connecting).
public struct PostgresConfiguration: Sendable, CustomStringConvertible {
    public var host: String
    public var port: Int
    public var user: String
    public var password: String?
    public var database: String
    public var applicationName: String?
    /// libpq `sslmode` (`disable`, `prefer`, `require`, `verify-full`, …); nil leaves libpq's default.
    public var sslMode: String?
    /// Bound on opening one connection (libpq `connect_timeout`, whole seconds, at least 2).
    public var connectTimeout: Duration
    /// Server-side `statement_timeout` for every session; nil leaves the server's setting.
    public var statementTimeout: Duration?
    /// Maximum number of connections `PostgresClient` opens.
    public var poolSize: Int
    /// Statements each connection prepares once and then executes by name (server-side parse and
    /// plan saved); the first this many distinct statements are kept, later ones run unprepared.
    /// 0 prepares nothing (e.g. behind a pooler in transaction mode without prepared statements).
    public var statementCacheSize: Int
    /// Further libpq conninfo keywords (e.g. `keepalives_idle`, `tcp_user_timeout`, `target_session_attrs`).
    public var extraOptions: [String: String]

    public init(
        host: String = "127.0.0.1",
        port: Int = 5432,
        user: String,
        password: String? = nil,
        database: String,
        applicationName: String? = nil,
        sslMode: String? = nil,
        connectTimeout: Duration = .seconds(5),
        statementTimeout: Duration? = nil,
        poolSize: Int = 8,
        statementCacheSize: Int = 256,
        extraOptions: [String: String] = [:]
    ) {
        self.host = host
        self.port = port
        self.user = user
        self.password = password
        self.database = database
        self.applicationName = applicationName
        self.sslMode = sslMode
        self.connectTimeout = connectTimeout
        self.statementTimeout = statementTimeout
        self.poolSize = poolSize
        self.statementCacheSize = statementCacheSize
        self.extraOptions = extraOptions
    }

    /// Parses `postgresql://` or `postgres://` URLs. Throws `.invalidConfiguration` (without echoing the URL).
    public init(url: String) throws(PostgresError) {
        guard let components = URLComponents(string: url),
            let scheme = components.scheme?.lowercased(), scheme == "postgresql" || scheme == "postgres"
        else { throw PostgresError(code: .invalidConfiguration, message: "not a postgresql:// URL") }
        guard let user = components.user, !user.isEmpty else {
            throw PostgresError(code: .invalidConfiguration, message: "the URL names no user")
        }
        var database = components.path
        if database.hasPrefix("/") { database.removeFirst() }
        self.init(
            host: components.host.flatMap { $0.isEmpty ? nil : $0 } ?? "127.0.0.1",
            port: components.port ?? 5432,
            user: user,
            password: components.password,
            database: database.isEmpty ? user : database
        )
        for item in components.queryItems ?? [] {
            guard let value = item.value else {
                throw PostgresError(code: .invalidConfiguration, message: "URL parameter \(item.name) has no value")
            }
            switch item.name {
            case "application_name": applicationName = value
            case "sslmode": sslMode = value
            case "connect_timeout":
                guard let seconds = Int(value), seconds >= 0 else { throw Self.badValue(item.name) }
                connectTimeout = .seconds(seconds)
            case "statement_timeout":
                guard let milliseconds = Int(value), milliseconds >= 0 else { throw Self.badValue(item.name) }
                statementTimeout = .milliseconds(milliseconds)
            case "pool_size":
                guard let size = Int(value), size > 0 else { throw Self.badValue(item.name) }
                poolSize = size
            case "statement_cache_size":
                guard let size = Int(value), size >= 0 else { throw Self.badValue(item.name) }
                statementCacheSize = size
            case "host" where !value.isEmpty: host = value  // a Unix socket folder
            case "user", "password", "dbname", "port", "options", "client_encoding":
                throw PostgresError(
                    code: .invalidConfiguration,
                    message: "URL parameter \(item.name) is not supported; put it in the URL or the configuration"
                )
            default: extraOptions[item.name] = value
            }
        }
    }

    private static func badValue(_ name: String) -> PostgresError {
        PostgresError(code: .invalidConfiguration, message: "URL parameter \(name) has an invalid value")
    }

    public var description: String {
        var text = "postgresql://\(user)\(password == nil ? "" : ":********")@\(host):\(port)/\(database)"
        var parameters: [String] = []
        if let applicationName { parameters.append("application_name=\(applicationName)") }
        if let sslMode { parameters.append("sslmode=\(sslMode)") }
        parameters.append("connect_timeout=\(connectTimeout.components.seconds)")
        if let statementTimeout { parameters.append("statement_timeout=\(statementTimeout.milliseconds)") }
        parameters.append("pool_size=\(poolSize)")
        for (key, value) in extraOptions.sorted(by: { $0.key < $1.key }) { parameters.append("\(key)=\(value)") }
        text += "?" + parameters.joined(separator: "&")
        return text
    }

    /// The libpq conninfo string. It contains the password: never log it.
    var connectionString: String {
        var pairs: [(String, String)] = [
            ("host", host), ("port", String(port)), ("user", user), ("dbname", database),
            ("connect_timeout", String(max(2, connectTimeout.components.seconds))),
            ("keepalives", "1"), ("keepalives_idle", "30"), ("keepalives_interval", "10"), ("keepalives_count", "3"),
            ("client_encoding", "UTF8"),
        ]
        if let password { pairs.append(("password", password)) }
        if let applicationName { pairs.append(("application_name", applicationName)) }
        if let sslMode { pairs.append(("sslmode", sslMode)) }
        // The decoders read timestamps in ISO style and UTC, whatever the server's defaults are.
        var options = "-c DateStyle=ISO -c TimeZone=UTC -c IntervalStyle=postgres"
        if let statementTimeout { options += " -c statement_timeout=\(statementTimeout.milliseconds)" }
        pairs.append(("options", options))
        for (key, value) in extraOptions.sorted(by: { $0.key < $1.key }) { pairs.append((key, value)) }
        return pairs.map { "\($0.0)='\(Self.escape($0.1))'" }.joined(separator: " ")
    }

    /// conninfo values are single-quoted; backslash and quote are escaped with a backslash.
    static func escape(_ value: String) -> String {
        var escaped = ""
        escaped.reserveCapacity(value.utf8.count)
        for character in value {
            if character == "\\" || character == "'" { escaped.append("\\") }
            escaped.append(character)
        }
        return escaped
    }
}

extension Duration {
    var milliseconds: Int64 {
        components.seconds * 1000 + components.attoseconds / 1_000_000_000_000_000
    }
}
