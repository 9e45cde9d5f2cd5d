import Foundation

/// The PostgreSQL logins that `scripts/services` creates on every server it starts (docs/operations.md,
/// Roles and privileges). Each one's password is its name: loopback servers for tests and benchmarks only.
package enum PostgresLogin: String, Sendable, CaseIterable {
    /// The bootstrap superuser: creates and drops the tests' databases, and nothing else.
    case superuser = "postgres"
    /// Owns the schema: `livedelivery migrate`, and fixtures that set up what the worker may not.
    case owner = "livedelivery_owner"
    /// A member of `livedelivery_worker`: what the worker and the admin commands run as.
    case worker = "livedelivery"

    /// `url` as this login, on `database` if given; the hosts, port and options stay.
    package func url(_ url: String, database: String? = nil) -> String {
        let result = replacingCredentials(in: url, user: rawValue, password: rawValue)
        return database.map { replacingDatabase(in: result, with: $0) } ?? result
    }
}

/// The URL with another user and password; the hosts, port, database and options stay. `url` is a
/// `postgresql://` URL, of one host or several (which URLComponents cannot read).
package func replacingCredentials(in url: String, user: String, password: String) -> String {
    guard let scheme = url.range(of: "://") else { return url }
    let rest = url[scheme.upperBound...]
    let authorityEnd = rest.firstIndex { $0 == "/" || $0 == "?" } ?? url.endIndex
    let hostsStart = rest[..<authorityEnd].lastIndex(of: "@").map { url.index(after: $0) } ?? scheme.upperBound
    return url.replacingCharacters(in: scheme.upperBound..<hostsStart, with: "\(user):\(password)@")
}

/// The URL with another database: the path after the host list (which URLComponents cannot read when it
/// names several hosts).
package func replacingDatabase(in url: String, with database: String) -> String {
    guard let scheme = url.range(of: "://") else { return url }
    let rest = url[scheme.upperBound...]
    guard let slash = rest.firstIndex(where: { $0 == "/" || $0 == "?" }) else { return url + "/\(database)" }
    guard url[slash] == "/" else { return url.replacingCharacters(in: slash..<slash, with: "/\(database)") }
    let end = url[slash...].firstIndex(of: "?") ?? url.endIndex
    return url.replacingCharacters(in: slash..<end, with: "/\(database)")
}
