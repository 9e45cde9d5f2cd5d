import Crypto
import Foundation
import Synchronization

/// One cached provider token (ES256 JWT) per signing key and team, shared by every connection and task.
///
/// A token is reused until it is `refreshInterval` old (Apple: refresh between 20 and 60 minutes; more often
/// gets `TooManyProviderTokenUpdates`, less often `ExpiredProviderToken`). Ages are measured on the injected
/// clock; `iat` comes from the injected wall clock.
///
/// A class behind a `Mutex` rather than an actor: every push asks for the token, and an actor hop
/// per push was a measurable share of the client's cost. Signing (once per refresh interval) runs
/// under the lock, so concurrent callers never mint twice.
final class APNsTokenProvider: Sendable {
    /// A provider token and its `authorization` header value.
    struct Token: Sendable {
        var jwt: String
        var authorization: String
    }

    private struct Entry {
        var token: Token
        var mintedAt: Duration
    }

    private struct State {
        var entries: [String: Entry] = [:]
        var tokensMinted = 0
    }

    static let minimumRefresh: Duration = .seconds(20 * 60)

    private let refreshInterval: Duration
    private let elapsed: @Sendable () -> Duration
    private let wallClock: @Sendable () -> Date
    private let state = Mutex(State())

    init(refreshInterval: Duration, clock: any Clock<Duration>, wallClock: @escaping @Sendable () -> Date) {
        self.refreshInterval = refreshInterval
        self.elapsed = Self.elapsedFunction(clock)
        self.wallClock = wallClock
    }

    private static func elapsedFunction<C: Clock>(_ clock: C) -> @Sendable () -> Duration where C.Duration == Duration {
        let origin = clock.now
        return { origin.duration(to: clock.now) }
    }

    var tokensMinted: Int { state.withLock { $0.tokensMinted } }

    /// The cache key of a key and team (callers that ask often keep it).
    static func cacheKey(key: APNsSigningKey, teamID: String) -> String { key.keyID + ":" + teamID }

    func token(key: APNsSigningKey, teamID: String) throws(APNsError) -> String {
        try token(key: key, teamID: teamID, cacheKey: Self.cacheKey(key: key, teamID: teamID)).jwt
    }

    /// The token for `key` and `teamID`, whose ``cacheKey(key:teamID:)`` is `cacheKey`.
    func token(key: APNsSigningKey, teamID: String, cacheKey: String) throws(APNsError) -> Token {
        let now = elapsed()
        return try state.withLock { (state) throws(APNsError) -> Token in
            if let entry = state.entries[cacheKey], now - entry.mintedAt < refreshInterval {
                return entry.token
            }
            let jwt = try Self.sign(key: key, teamID: teamID, issuedAt: Int(wallClock().timeIntervalSince1970))
            let token = Token(jwt: jwt, authorization: "bearer " + jwt)
            state.entries[cacheKey] = Entry(token: token, mintedAt: now)
            state.tokensMinted += 1
            return token
        }
    }

    func invalidate(token: String, key: APNsSigningKey, teamID: String) {
        let cacheKey = Self.cacheKey(key: key, teamID: teamID)
        let now = elapsed()
        state.withLock { state in
            guard let entry = state.entries[cacheKey], entry.token.jwt == token,
                now - entry.mintedAt >= Self.minimumRefresh
            else { return }
            state.entries[cacheKey] = nil
        }
    }

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
