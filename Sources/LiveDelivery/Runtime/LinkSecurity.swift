import Foundation
import Postgres
import RabbitMQ

/// How each of the worker's links is protected, as its settings say (docs/operations.md, Encrypted
/// links): `livedelivery check-config` prints what is found, and `run` logs it at start.
///
/// A link that is plain text, may fall back to it, or does not check the server's certificate and host
/// name is named, with the setting that makes it so. Over the network that is a warning; to a server on
/// this machine (a Unix socket, `localhost`, a loopback address) a note, since nothing crosses a wire.
package struct LinkFinding: Sendable, Hashable, CustomStringConvertible {
    /// Whether the server is on this machine.
    package var isLocal: Bool
    /// One sentence: the link, what is wrong, and the setting that fixes it.
    package var message: String

    /// `warning: …` or `note: …`, as `check-config` prints it.
    package var description: String { (isLocal ? "note: " : "warning: ") + message }

    /// Every link of `configuration` that is not encrypted and verified.
    package static func findings(_ configuration: WorkerConfiguration) -> [LinkFinding] {
        var findings: [LinkFinding] = []
        for node in configuration.amqp.endpoints.nodes {
            let link = "the broker link to \(node.host):\(node.port)"
            if !node.useTLS {
                findings.append(
                    LinkFinding(
                        isLocal: isLoopback(node.host),
                        message: "\(link) is plain text (amqp://): use amqps:// with cacertfile"))
            } else if !node.verifyPeer {
                findings.append(
                    LinkFinding(
                        isLocal: isLoopback(node.host),
                        message: "\(link) is encrypted but checks no certificate (verify=verify_none): "
                            + "leave verify at verify_peer"))
            }
        }
        for (name, postgres) in [("database", configuration.postgres.connection)]
            + (configuration.postgres.reporting.map { [("reporting database", $0)] } ?? [])
        {
            if let problem = problem(of: postgres) {
                findings.append(
                    LinkFinding(
                        isLocal: isLocal(postgres),
                        message: "the \(name) link \(problem): set sslmode=verify-full (and sslrootcert)"))
            }
        }
        return findings
    }

    /// What libpq's `sslmode` promises (libpq's "SSL Support": only `verify-full` checks both the
    /// certificate and the host name; `prefer`, its default, and `allow` fall back to plain text without
    /// a word). The connection string's, else `PGSSLMODE`, else `prefer`.
    static func problem(of postgres: PostgresConfiguration) -> String? {
        switch postgres.value("sslmode") ?? environment("PGSSLMODE") ?? "prefer" {
        case "verify-full": nil
        case "verify-ca": "checks the certificate's CA but not its host name (sslmode=verify-ca)"
        case "require": "is encrypted but accepts any certificate (sslmode=require)"
        case "disable": "is plain text (sslmode=disable)"
        case let mode: "may fall back to plain text and accepts any certificate (sslmode=\(mode))"
        }
    }

    /// Every host the connection string names (or libpq's default, the Unix socket) is on this machine.
    static func isLocal(_ postgres: PostgresConfiguration) -> Bool {
        guard
            let hosts = postgres.value("hostaddr") ?? postgres.value("host") ?? environment("PGHOSTADDR")
                ?? environment("PGHOST")
        else { return true }
        return hosts.split(separator: ",", omittingEmptySubsequences: false).allSatisfy {
            $0.hasPrefix("/") || $0.isEmpty || isLoopback(String($0))
        }
    }

    static func isLoopback(_ host: String) -> Bool {
        host == "localhost" || host == "::1" || host == "[::1]" || host.hasPrefix("127.")
    }

    private static func environment(_ name: String) -> String? {
        ProcessInfo.processInfo.environment[name].flatMap { $0.isEmpty ? nil : $0 }
    }
}
