package import Crypto
package import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// How an ``APNsSimulator`` listens, which provider keys it accepts and how its simulated devices behave.
package struct SimulatorConfiguration: Sendable {
    /// Address the APNs (TLS HTTP/2) listener binds to.
    package var host: String = "127.0.0.1"
    /// APNs port; `0` picks a free port (see ``RunningSimulator/port``).
    package var port: Int = 0
    /// Port of the plain HTTP/1.1 JSON control API; `0` picks a free port.
    package var controlPort: Int = 0
    /// Address the control API binds to: loopback unless asked, since it is unauthenticated and resets the
    /// simulator, injects faults and lists full device tokens.
    package var controlHost: String = "127.0.0.1"

    /// A warning when ``controlHost`` is not this machine (the name `localhost`, 127.0.0.0/8, `::1`).
    package var controlHostWarning: String? {
        guard !Self.isLoopback(controlHost) else { return nil }
        return "the control API listens on \(controlHost): it is unauthenticated, and whoever reaches it can reset "
            + "the simulator, inject faults and read full device tokens; keep --control-host at 127.0.0.1 unless "
            + "its port is reachable by trusted clients only"
    }

    /// Whether `host` is the name `localhost` or a loopback address (parsed: `127.evil.example` is a name).
    static func isLoopback(_ host: String) -> Bool {
        if host.lowercased() == "localhost" { return true }
        var ipv4 = in_addr()
        if inet_pton(AF_INET, host, &ipv4) == 1 { return UInt32(bigEndian: ipv4.s_addr) >> 24 == 127 }
        let bare = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        var ipv6 = in6_addr()
        guard inet_pton(AF_INET6, bare, &ipv6) == 1 else { return false }
        return withUnsafeBytes(of: &ipv6) { bytes in bytes.dropLast().allSatisfy { $0 == 0 } && bytes.last == 1 }
    }
    /// Certificate and key (PEM files) to serve; `nil` generates a self-signed certificate at start
    /// for ``certificateHostNames``, written to ``RunningSimulator/certificatePEMPath``.
    package var certificate: CertificateFiles?
    /// The names (DNS names or IPv4 addresses) the generated certificate is for. Another host's name
    /// here makes the simulator present a certificate its clients must refuse.
    package var certificateHostNames: [String] = ["localhost", "127.0.0.1"]
    /// Provider keys whose JWTs the simulator accepts.
    package var keys: [AcceptedKey] = []
    /// Accept any well-formed ES256 JWT without checking its signature (handy for demos; not faithful).
    package var acceptUnknownKeys: Bool = false
    /// The environment this simulator plays; tokens registered for the other one get `BadDeviceToken`,
    /// and keys restricted to the other one get `BadEnvironmentKeyIdInToken`.
    package var environment: Environment = .production
    /// Priority-10 pushes a Live Activity accepts per rolling hour before the device throttles silently
    /// (APNs still answers 200). `nil`: unlimited. Apple does not publish the number.
    package var priority10BudgetPerHour: Int?
    /// The app's content-state shape; when set, pushes that would not decode get the `wouldNotDecode` verdict.
    package var contentStateShape: ContentStateShape?
    /// Live broadcast channels an app may have in this environment before `CannotCreateChannelConfig`
    /// (Apple: 10,000).
    package var channelLimit: Int = 10_000
    /// Streams a connection may carry before its first request with a valid provider token (Apple: 1).
    package var streamsBeforeAuthentication: Int = 1
    /// Streams a connection may carry once authenticated (advertised in a SETTINGS update).
    package var maxConcurrentStreams: Int = 1000
    /// Age after which a provider token is refused with `ExpiredProviderToken`.
    package var providerTokenMaxAge: TimeInterval = 3600
    /// A connection may change its provider token at most once per this interval
    /// (else `429 TooManyProviderTokenUpdates`).
    package var providerTokenMinUpdateInterval: TimeInterval = 20 * 60
    /// Records kept for the control API (oldest dropped first).
    package var recordLimit: Int = 100_000
    /// Event-loop threads; `nil` uses one per core.
    package var threads: Int?
    /// The simulator's wall clock (token ages, budgets, 410 timestamps). Tests inject a shifted clock.
    package var now: @Sendable () -> Date = { Date() }
    /// Called with the record of each push-to-start that started an activity with an update token, once it is
    /// recorded (off the simulator's lock, on an event-loop thread: return at once). What the app on that
    /// phone would learn: the device agent (`apns-sim --agent-knows`) reports the new token from it.
    package var onActivityStarted: (@Sendable (PushRecord) -> Void)?

    package init() {}

    /// The two APNs environments.
    package enum Environment: String, Sendable, Codable, CaseIterable {
        case production, sandbox
    }

    /// A certificate chain and private key, both PEM files.
    package struct CertificateFiles: Sendable {
        package var certificatePath: String
        package var privateKeyPath: String
        package init(certificatePath: String, privateKeyPath: String) {
            self.certificatePath = certificatePath
            self.privateKeyPath = privateKeyPath
        }
    }

    /// A provider signing key the simulator trusts: its key id, team id and public key, optionally restricted
    /// to one environment (Apple's environment-restricted keys) or to some bundle ids (topic-specific keys).
    package struct AcceptedKey: Sendable {
        package var keyID: String
        package var teamID: String
        package var publicKey: P256.Signing.PublicKey
        package var environment: Environment?
        package var bundleIDs: Set<String>?

        package init(
            keyID: String,
            teamID: String,
            publicKey: P256.Signing.PublicKey,
            environment: Environment? = nil,
            bundleIDs: Set<String>? = nil
        ) {
            self.keyID = keyID
            self.teamID = teamID
            self.publicKey = publicKey
            self.environment = environment
            self.bundleIDs = bundleIDs
        }

        /// Reads a PEM file holding either the public key or the `.p8` private key (the public key is derived).
        package init(keyID: String, teamID: String, pemFile path: String) throws(SimulatorError) {
            let text: String
            do {
                text = try String(contentsOfFile: path, encoding: .utf8)
            } catch {
                throw SimulatorError(.invalidConfiguration, "cannot read key file for key \(keyID)")
            }
            try self.init(keyID: keyID, teamID: teamID, pem: text)
        }

        /// Parses PEM text holding a public key, or a PKCS#8/SEC1 private key.
        package init(keyID: String, teamID: String, pem: String) throws(SimulatorError) {
            let publicKey: P256.Signing.PublicKey
            if let key = try? P256.Signing.PublicKey(pemRepresentation: pem) {
                publicKey = key
            } else if let key = try? P256.Signing.PrivateKey(pemRepresentation: pem) {
                publicKey = key.publicKey
            } else {
                throw SimulatorError(.invalidConfiguration, "key \(keyID) is not a P-256 public or private key in PEM")
            }
            self.init(keyID: keyID, teamID: teamID, publicKey: publicKey)
        }

        /// Parses the command-line form `KEYID=TEAMID:/path/key.pem`.
        package init(argument: String) throws(SimulatorError) {
            guard let equals = argument.firstIndex(of: "="),
                let colon = argument[equals...].firstIndex(of: ":")
            else {
                throw SimulatorError(.invalidConfiguration, "a key is given as KEYID=TEAMID:/path/key.pem")
            }
            let keyID = String(argument[..<equals])
            let teamID = String(argument[argument.index(after: equals)..<colon])
            let path = String(argument[argument.index(after: colon)...])
            guard !keyID.isEmpty, !teamID.isEmpty, !path.isEmpty else {
                throw SimulatorError(.invalidConfiguration, "a key is given as KEYID=TEAMID:/path/key.pem")
            }
            try self.init(keyID: keyID, teamID: teamID, pemFile: path)
        }
    }
}
