package import Foundation

/// The main pair's TLS side (`scripts/services`: a test CA under `.state/tls`; docs/operations.md,
/// Encrypted links). The server certificate names `localhost` only: a client that connects to
/// `127.0.0.1` with verification on meets a certificate for another host. `other-ca.pem` signed none of
/// them. `client.pem` is the PostgreSQL login `livedelivery_cert`, and the broker's amqps port wants it.
package enum TestTLS {
    /// The certificates' folder.
    package static var directory: URL {
        ProcessInfo.processInfo.environment["LIVEDELIVERY_TLS_DIR"].flatMap {
            $0.isEmpty ? nil : URL(fileURLWithPath: $0)
        }
            ?? TestEnvironment.projectRoot.appendingPathComponent(".state/tls")
    }

    /// A file of the folder: `ca.pem`, `other-ca.pem`, `client.pem`, `client.key`, `server.pem`, `server.key`.
    package static func file(_ name: String) -> String { directory.appendingPathComponent(name).path }

    /// The broker's amqps port.
    package static var amqpsPort: Int {
        ProcessInfo.processInfo.environment["LIVEDELIVERY_AMQPS_PORT"].flatMap { Int($0) } ?? 56723
    }

    /// An `amqps://` URL to the main broker, as the worker's login, trusting `ca` and presenting the
    /// client certificate unless `clientCertificate` is false.
    package static func amqpsURL(
        host: String = "localhost", ca: String = "ca.pem", clientCertificate: Bool = true
    )
        -> String
    {
        var url = "amqps://livedelivery:livedelivery@\(host):\(amqpsPort)/%2F?cacertfile=\(file(ca))"
        if clientCertificate { url += "&certfile=\(file("client.pem"))&keyfile=\(file("client.key"))" }
        return url
    }

    /// `url` (a `postgresql://` URL to 127.0.0.1) to `host` instead, with `sslmode=verify-full` and `ca` as
    /// its root certificate.
    package static func postgresURL(_ url: String, host: String = "localhost", ca: String = "ca.pem") -> String {
        url.replacingOccurrences(of: "@127.0.0.1:", with: "@\(host):")
            + (url.contains("?") ? "&" : "?") + "sslmode=verify-full&sslrootcert=\(file(ca))"
    }

    /// The main database's port.
    package static var postgresPort: Int { URLComponents(string: TestEnvironment.postgresURL)?.port ?? 55432 }

    /// The login that authenticates by its client certificate alone (a worker), on `database`, over
    /// `sslmode=verify-full`; without `clientCertificate`, the same login presenting none.
    package static func certificateLoginURL(database: String, clientCertificate: Bool = true) -> String {
        "postgresql://livedelivery_cert@localhost:\(postgresPort)/\(database)?sslmode=verify-full"
            + "&sslrootcert=\(file("ca.pem"))"
            + (clientCertificate ? "&sslcert=\(file("client.pem"))&sslkey=\(file("client.key"))" : "")
    }
}
