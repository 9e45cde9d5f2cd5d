package import Crypto
package import Foundation

/// Apps, hosts, connection limits and retry policy of an ``APNsClient``.
package struct APNsClientConfiguration: Sendable {
    /// The apps this client sends for, by bundle id.
    package var apps: [APNsApp]
    /// Base URL of the production environment.
    package var productionURL: String = "https://api.push.apple.com"
    /// Base URL of the development (sandbox) environment.
    package var sandboxURL: String = "https://api.sandbox.push.apple.com"
    /// Base URL of channel management (broadcast channels), production.
    package var productionChannelsURL: String = "https://api-manage-broadcast.push.apple.com:2196"
    /// Base URL of channel management, sandbox.
    package var sandboxChannelsURL: String = "https://api-manage-broadcast.sandbox.push.apple.com:2195"
    /// Long-lived TLS connections per host and provider team (one connection never mixes teams).
    package var maxConnectionsPerHost: Int = 2
    /// Streams in flight per connection (APNs' own SETTINGS limit applies too).
    package var maxConcurrentStreamsPerConnection: Int = 100
    /// Requests in flight per host and team, at most `maxConnectionsPerHost ×
    /// maxConcurrentStreamsPerConnection`; further sends wait (their wait counts against the timeout).
    package var maxRequestsInFlight: Int = 1000
    /// libcurl threads per host and team, sharing its connections; `nil`: one per core, at most
    /// one per connection.
    package var eventLoops: Int?
    /// TCP plus TLS connect timeout.
    package var connectTimeout: Duration = .seconds(10)
    /// Whole-request timeout (including the wait for a stream).
    package var requestTimeout: Duration = .seconds(15)
    /// PEM file of CA certificates to trust instead of the system's (the simulator's certificate).
    package var caFile: String?
    /// Verify the server's certificate (only tests turn this off).
    package var verifyPeer: Bool = true
    /// Verify that the certificate names the host.
    package var verifyHost: Bool = true
    /// Age at which the shared provider token is replaced: Apple allows 20 to 60 minutes.
    package var tokenRefreshInterval: Duration = .seconds(50 * 60)
    /// Delays suggested in ``APNsOutcome/retryLater(reason:status:after:)``.
    package var retryDelays = RetryDelays()

    package init(apps: [APNsApp]) {
        self.apps = apps
    }

    /// Delays suggested to the worker, per cause (``APNsRetryDelays``).
    package typealias RetryDelays = APNsRetryDelays

    func validate() throws(APNsError) {
        let minutes = tokenRefreshInterval / .seconds(60)
        guard minutes >= 20, minutes <= 60 else {
            throw APNsError(.invalidConfiguration, "tokenRefreshInterval must be between 20 and 60 minutes")
        }
        var seen = Set<String>()
        for app in apps {
            guard !app.bundleID.isEmpty, !app.teamID.isEmpty else {
                throw APNsError(.invalidConfiguration, "an app needs a bundle id and a team id")
            }
            guard seen.insert(app.bundleID).inserted else {
                throw APNsError(.invalidConfiguration, "bundle id \(app.bundleID) is configured twice")
            }
        }
    }

    func baseURL(for app: APNsApp) -> String {
        Self.trimmed(app.baseURL ?? (app.environment == .production ? productionURL : sandboxURL))
    }

    /// Where broadcasts go: Apple documents the device-push host.
    func broadcastURL(for app: APNsApp) -> String {
        app.broadcastURL.map(Self.trimmed) ?? baseURL(for: app)
    }

    /// Where channels are created, read and deleted: the app's own, else the base URL it overrides (the
    /// simulator serves everything), else Apple's channel management host.
    func channelsURL(for app: APNsApp) -> String {
        Self.trimmed(
            app.channelsURL ?? app.baseURL
                ?? (app.environment == .production ? productionChannelsURL : sandboxChannelsURL))
    }

    private static func trimmed(_ url: String) -> String {
        var url = url
        while url.hasSuffix("/") { url.removeLast() }
        return url
    }
}

/// APNs' two environments.
package enum APNsEnvironment: String, Sendable, Hashable, CaseIterable {
    case production
    case sandbox
}

/// One app: its bundle id, provider team and key, and the environment its tokens belong to.
package struct APNsApp: Sendable {
    package var bundleID: String
    package var teamID: String
    package var key: APNsSigningKey
    package var environment: APNsEnvironment
    /// Overrides the environment's base URL (the simulator, a proxy).
    package var baseURL: String?
    /// Overrides where broadcasts go (default: the base URL).
    package var broadcastURL: String?
    /// Overrides where channels are managed (default: the base URL when overridden, else Apple's
    /// `api-manage-broadcast` host of the environment).
    package var channelsURL: String?

    package init(
        bundleID: String,
        teamID: String,
        key: APNsSigningKey,
        environment: APNsEnvironment,
        baseURL: String? = nil,
        broadcastURL: String? = nil,
        channelsURL: String? = nil
    ) {
        self.bundleID = bundleID
        self.teamID = teamID
        self.key = key
        self.environment = environment
        self.baseURL = baseURL
        self.broadcastURL = broadcastURL
        self.channelsURL = channelsURL
    }
}

/// A provider token signing key (the `.p8` file from the developer account) and its key id.
/// Its description shows the key id only.
package struct APNsSigningKey: Sendable, CustomStringConvertible {
    package let keyID: String
    let privateKey: P256.Signing.PrivateKey

    package init(keyID: String, privateKey: P256.Signing.PrivateKey) {
        self.keyID = keyID
        self.privateKey = privateKey
    }

    /// Parses the `.p8` PEM text (PKCS#8 `PRIVATE KEY`, or SEC1 `EC PRIVATE KEY`).
    package init(keyID: String, pem: String) throws(APNsError) {
        guard let key = try? P256.Signing.PrivateKey(pemRepresentation: pem) else {
            throw APNsError(.invalidKey, "key \(keyID) is not a P-256 private key in PEM")
        }
        self.init(keyID: keyID, privateKey: key)
    }

    /// Reads a `.p8` file.
    package init(keyID: String, p8File path: String) throws(APNsError) {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else {
            throw APNsError(.invalidKey, "cannot read the key file of key \(keyID)")
        }
        try self.init(keyID: keyID, pem: text)
    }

    package var description: String { "APNsSigningKey(keyID: \(keyID))" }

    /// A provider token signed now-or-at `issuedAt` for this key and team, for tools (h2load, curl).
    /// ``APNsClient`` caches and refreshes its own; do not call this per request.
    package func providerToken(teamID: String, issuedAt: Date = Date()) throws(APNsError) -> String {
        try APNsTokenProvider.sign(key: self, teamID: teamID, issuedAt: Int(issuedAt.timeIntervalSince1970))
    }
}
