import Foundation

/// Where and how to connect to a RabbitMQ broker.
///
/// Build it from an AMQP URL (``init(url:)``) or member-wise. `description` redacts the password.
///
/// ## URL form
/// `amqp[s]://user:password@host:port/vhost?heartbeat=10&connection_timeout=5000`
/// - user, password and vhost are percent-decoded; the vhost `/` is written `%2F`. An empty or
///   missing path means the vhost `/`. Defaults: user/password `guest`, host `localhost`, port 5672
///   (`amqps`: 5671).
/// - Query keys (RabbitMQ URI spec): `heartbeat` (seconds, 0 disables), `connection_timeout`
///   (milliseconds), `channel_max`, `frame_max`, `cacertfile`, `certfile`, `keyfile`,
///   `verify` (`verify_peer` | `verify_none`), and our own `connection_name`. Other keys are ignored.
package struct AMQPConfiguration: Sendable, Hashable, CustomStringConvertible {
    package var host: String
    package var port: Int
    package var user: String
    /// Never printed: ``description`` shows `***`.
    package var password: String
    package var vhost: String
    /// Requested heartbeat; the broker may lower it. rabbitmq-c 0.11 treats 0 as "off".
    package var heartbeat: Duration
    /// Bound for TCP connect, and separately for the AMQP handshake/login.
    package var connectTimeout: Duration
    package var useTLS: Bool
    /// PEM CA bundle for `amqps`. rabbitmq-c 0.11 does not load OpenSSL's default paths, so this is
    /// always set explicitly (default: Debian's bundle).
    package var caFile: String
    /// Optional client certificate and key (PEM files) for `amqps`.
    package var clientCertificateFile: String?
    package var clientKeyFile: String?
    /// Verify the broker's certificate and host name (`amqps` only). Leave on outside tests.
    package var verifyPeer: Bool
    /// Shown in the management UI (`connection_name` client property).
    package var connectionName: String?
    /// 0 lets the broker choose (RabbitMQ: 2047).
    package var channelMax: Int
    package var frameMax: Int

    package static let defaultCAFile = "/etc/ssl/certs/ca-certificates.crt"

    package init(
        host: String = "localhost",
        port: Int? = nil,
        user: String = "guest",
        password: String = "guest",
        vhost: String = "/",
        heartbeat: Duration = .seconds(10),
        connectTimeout: Duration = .seconds(10),
        useTLS: Bool = false,
        caFile: String = AMQPConfiguration.defaultCAFile,
        clientCertificateFile: String? = nil,
        clientKeyFile: String? = nil,
        verifyPeer: Bool = true,
        connectionName: String? = nil,
        channelMax: Int = 0,
        frameMax: Int = 131_072
    ) {
        self.host = host
        self.port = port ?? (useTLS ? 5671 : 5672)
        self.user = user
        self.password = password
        self.vhost = vhost
        self.heartbeat = heartbeat
        self.connectTimeout = connectTimeout
        self.useTLS = useTLS
        self.caFile = caFile
        self.clientCertificateFile = clientCertificateFile
        self.clientKeyFile = clientKeyFile
        self.verifyPeer = verifyPeer
        self.connectionName = connectionName
        self.channelMax = channelMax
        self.frameMax = frameMax
    }

    /// Parses an `amqp://` or `amqps://` URL. Errors never repeat the URL (it holds the password).
    package init(url: String) throws(RabbitMQError) {
        func invalid(_ reason: String) -> RabbitMQError { RabbitMQError(code: .invalidURL, context: reason) }
        guard let components = URLComponents(string: url) else { throw invalid("not a URL") }
        let useTLS: Bool
        switch components.scheme?.lowercased() {
        case "amqp": useTLS = false
        case "amqps": useTLS = true
        default: throw invalid("scheme must be amqp or amqps")
        }
        self.init(useTLS: useTLS)

        if var host = components.percentEncodedHost, !host.isEmpty {
            if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
            guard let decoded = host.removingPercentEncoding else { throw invalid("bad host encoding") }
            self.host = decoded
        }
        if let port = components.port {
            guard (1...65535).contains(port) else { throw invalid("port out of range") }
            self.port = port
        }
        if let user = components.percentEncodedUser {
            guard let decoded = user.removingPercentEncoding else { throw invalid("bad user encoding") }
            self.user = decoded
        }
        if let password = components.percentEncodedPassword {
            guard let decoded = password.removingPercentEncoding else { throw invalid("bad password encoding") }
            self.password = decoded
        }
        let path = components.percentEncodedPath
        if path.isEmpty || path == "/" {
            vhost = "/"
        } else {
            let encoded = path.dropFirst()
            guard !encoded.contains("/") else { throw invalid("vhost must be one path segment (write / as %2F)") }
            guard let decoded = String(encoded).removingPercentEncoding else { throw invalid("bad vhost encoding") }
            vhost = decoded
        }

        for item in components.queryItems ?? [] {
            let value = item.value ?? ""
            func integer(min: Int = 0) throws(RabbitMQError) -> Int {
                guard let number = Int(value), number >= min else { throw invalid("\(item.name) must be an integer") }
                return number
            }
            switch item.name {
            case "heartbeat": heartbeat = .seconds(try integer())
            case "connection_timeout": connectTimeout = .milliseconds(try integer(min: 1))
            case "channel_max": channelMax = try integer()
            case "frame_max": frameMax = try integer(min: 4096)
            case "cacertfile": caFile = value
            case "certfile": clientCertificateFile = value
            case "keyfile": clientKeyFile = value
            case "verify":
                switch value {
                case "verify_peer": verifyPeer = true
                case "verify_none": verifyPeer = false
                default: throw invalid("verify must be verify_peer or verify_none")
                }
            case "connection_name": connectionName = value
            default: continue
            }
        }
    }

    /// The URL with the password replaced by `***`.
    package var description: String {
        let scheme = useTLS ? "amqps" : "amqp"
        let hostPart = host.contains(":") ? "[\(host)]" : host
        let encodedVhost = vhost.addingPercentEncoding(withAllowedCharacters: .urlUnreservedCharacters) ?? vhost
        let encodedUser = user.addingPercentEncoding(withAllowedCharacters: .urlUnreservedCharacters) ?? user
        var text = "\(scheme)://\(encodedUser):***@\(hostPart):\(port)/\(encodedVhost)"
        text += "?heartbeat=\(heartbeat.components.seconds)"
        text += "&connection_timeout=\(connectTimeout.milliseconds)"
        if let connectionName { text += "&connection_name=\(connectionName)" }
        return text
    }

    var heartbeatSeconds: Int32 { Int32(clamping: heartbeat.components.seconds) }
}

extension Duration {
    var milliseconds: Int64 {
        let (seconds, attoseconds) = components
        return seconds * 1000 + attoseconds / 1_000_000_000_000_000
    }

    var cTimeval: timeval {
        let (seconds, attoseconds) = components
        return timeval(tv_sec: .init(seconds), tv_usec: .init(attoseconds / 1_000_000_000_000))
    }
}

extension CharacterSet {
    /// RFC 3986 unreserved characters: everything else is percent-encoded.
    static let urlUnreservedCharacters = CharacterSet(
        charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
}
