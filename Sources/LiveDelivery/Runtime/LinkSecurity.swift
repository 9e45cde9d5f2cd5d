import Foundation
package import Postgres
package import RabbitMQ

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

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
        var findings = findings(amqp: configuration.amqp.endpoints)
        var links = [("database", configuration.postgres.connection)]
        if let reporting = configuration.postgres.reporting { links.append(("reporting database", reporting)) }
        for (cell, postgres) in (configuration.cellHandover?.databases ?? [:]).sorted(by: { $0.key < $1.key }) {
            links.append(("cell \(cell) database (cells.\(cell).postgresUrl)", postgres))
        }
        for (name, postgres) in links {
            if let finding = finding(postgres: postgres, name: name) { findings.append(finding) }
        }
        if let finding = TraceExportSettings().linkFinding { findings.append(finding) }
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

    /// The broker links' findings (`migrate` declares the topology over them too).
    package static func findings(amqp endpoints: AMQPEndpoints) -> [LinkFinding] {
        var findings: [LinkFinding] = []
        for node in endpoints.nodes {
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
        return findings
    }

    /// The `database` link's finding, if any: for the commands that use one database link
    /// (`migrate`, the admin commands, a cell's `cells.<name>.postgresUrl`).
    package static func finding(postgres: PostgresConfiguration, name: String) -> LinkFinding? {
        problem(of: postgres).map {
            LinkFinding(
                isLocal: isLocal(postgres), message: "the \(name) link \($0): set sslmode=verify-full (and sslrootcert)"
            )
        }
    }

    /// Whether `host` is this machine: the name `localhost`, an IPv4 address in 127.0.0.0/8 or the IPv6
    /// address ::1 (bracketed or not). Only addresses are parsed: `127.evil.example` is a name like any other.
    package static func isLoopback(_ host: String) -> Bool {
        if host.lowercased() == "localhost" || host.lowercased() == "localhost." { return true }
        var ipv4 = in_addr()
        if inet_pton(AF_INET, host, &ipv4) == 1 {
            return UInt32(bigEndian: ipv4.s_addr) >> 24 == 127
        }
        let bare = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        var ipv6 = in6_addr()
        guard inet_pton(AF_INET6, bare, &ipv6) == 1 else { return false }
        return withUnsafeBytes(of: &ipv6) { bytes in bytes.dropLast().allSatisfy { $0 == 0 } && bytes.last == 1 }
    }

    private static func environment(_ name: String) -> String? {
        ProcessInfo.processInfo.environment[name].flatMap { $0.isEmpty ? nil : $0 }
    }
}
