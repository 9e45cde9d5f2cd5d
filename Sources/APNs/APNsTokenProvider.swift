import Crypto
import Foundation

/// One cached provider token (ES256 JWT) per signing key and team, shared by every connection and task.
///
/// A token is reused until it is `refreshInterval` old (Apple: refresh between 20 and 60 minutes; more often
/// gets `TooManyProviderTokenUpdates`, less often `ExpiredProviderToken`). Ages are measured on the injected
/// clock; `iat` comes from the injected wall clock.
actor APNsTokenProvider {
    private struct Entry {
        var token: String
        var mintedAt: Duration
    }

    /// Apple refuses token changes on a connection more often than this.
    static let minimumRefresh: Duration = .seconds(20 * 60)

    private let refreshInterval: Duration
    private let elapsed: @Sendable () -> Duration
    private let wallClock: @Sendable () -> Date
    private var entries: [String: Entry] = [:]
    /// Tokens signed so far (for tests and statistics).
    private(set) var tokensMinted = 0

    init(refreshInterval: Duration, clock: any Clock<Duration>, wallClock: @escaping @Sendable () -> Date) {
        self.refreshInterval = refreshInterval
        self.elapsed = Self.elapsedFunction(clock)
        self.wallClock = wallClock
    }

    private static func elapsedFunction<C: Clock>(_ clock: C) -> @Sendable () -> Duration where C.Duration == Duration {
        let origin = clock.now
        return { origin.duration(to: clock.now) }
    }

    /// The current token for this key and team, signing a new one when none is cached or it is due.
    func token(key: APNsSigningKey, teamID: String) throws(APNsError) -> String {
        let cacheKey = key.keyID + ":" + teamID
        let now = elapsed()
        if let entry = entries[cacheKey], now - entry.mintedAt < refreshInterval {
            return entry.token
        }
        let token = try Self.sign(key: key, teamID: teamID, issuedAt: Int(wallClock().timeIntervalSince1970))
        entries[cacheKey] = Entry(token: token, mintedAt: now)
        tokensMinted += 1
        return token
    }

    /// APNs said the token expired: drop it, unless it is younger than 20 minutes (a new one would be refused
    /// on the connection; the clock is more likely skewed).
    func invalidate(token: String, key: APNsSigningKey, teamID: String) {
        let cacheKey = key.keyID + ":" + teamID
        guard let entry = entries[cacheKey], entry.token == token,
            elapsed() - entry.mintedAt >= Self.minimumRefresh
        else { return }
        entries[cacheKey] = nil
    }

    /// `base64url(header).base64url(claims).base64url(r||s)`, header `{"alg":"ES256","kid":…}`,
    /// claims `{"iss":team,"iat":seconds}`.
    static func sign(key: APNsSigningKey, teamID: String, issuedAt: Int) throws(APNsError) -> String {
        let header = #"{"alg":"ES256","kid":"\#(jsonEscaped(key.keyID))"}"#
        let claims = #"{"iss":"\#(jsonEscaped(teamID))","iat":\#(issuedAt)}"#
        let signingInput = base64URL(Data(header.utf8)) + "." + base64URL(Data(claims.utf8))
        let signature: P256.Signing.ECDSASignature
        do {
            signature = try key.privateKey.signature(for: Data(signingInput.utf8))
        } catch {
            throw APNsError(.invalidKey, "cannot sign with key \(key.keyID)")
        }
        return signingInput + "." + base64URL(signature.rawRepresentation)
    }

    static func base64URL(_ data: Data) -> String {
        data.base64EncodedString()
            .replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    private static func jsonEscaped(_ text: String) -> String {
        text.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"")
    }
}
