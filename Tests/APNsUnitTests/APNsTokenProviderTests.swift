import Crypto
import Foundation
import Synchronization
import Testing

@testable import APNs

/// A clock that moves only when told to.
final class ManualClock: Clock, Sendable {
    struct Instant: InstantProtocol {
        var offset: Duration
        func advanced(by duration: Duration) -> Instant { Instant(offset: offset + duration) }
        func duration(to other: Instant) -> Duration { other.offset - offset }
        static func < (lhs: Instant, rhs: Instant) -> Bool { lhs.offset < rhs.offset }
    }

    private let current = Mutex(Duration.zero)
    var now: Instant { Instant(offset: current.withLock { $0 }) }
    var minimumResolution: Duration { .nanoseconds(1) }

    func sleep(until deadline: Instant, tolerance: Duration?) async throws {
        struct ManualClockCannotSleep: Error {}
        throw ManualClockCannotSleep()
    }

    func advance(by duration: Duration) { current.withLock { $0 += duration } }

    /// A wall clock that moves with this clock.
    func wallClock(start: Date = Date()) -> @Sendable () -> Date {
        { [self] in start.addingTimeInterval(Double(now.offset.components.seconds)) }
    }
}

@Suite("Provider tokens: one per key, shared, refreshed between 20 and 60 minutes")
struct APNsTokenProviderTests {
    let key = APNsSigningKey(keyID: "ABC123DEFG", privateKey: P256.Signing.PrivateKey())

    @Test func tokenIsReusedUntilTheRefreshIntervalThenReplaced() async throws {
        let clock = ManualClock()
        let start = Date(timeIntervalSince1970: 1_790_000_000)
        let provider = APNsTokenProvider(
            refreshInterval: .seconds(50 * 60), clock: clock, wallClock: clock.wallClock(start: start))
        let first = try provider.token(key: key, teamID: "TEAM123456")
        clock.advance(by: .seconds(49 * 60 + 59))
        #expect(try provider.token(key: key, teamID: "TEAM123456") == first)
        clock.advance(by: .seconds(1))
        let second = try provider.token(key: key, teamID: "TEAM123456")
        #expect(second != first)
        #expect(provider.tokensMinted == 2)

        let claims = try decodeClaims(second)
        #expect(claims["iat"] as? Int == 1_790_000_000 + 50 * 60)
        #expect(claims["iss"] as? String == "TEAM123456")
    }

    @Test func tokensAreSharedByConcurrentCallersAndSeparatePerKeyAndTeam() async throws {
        let provider = APNsTokenProvider(
            refreshInterval: .seconds(50 * 60), clock: ManualClock(), wallClock: { Date() })
        let tokens = try await withThrowingTaskGroup(of: String.self) { group in
            for _ in 0..<100 { group.addTask { try provider.token(key: key, teamID: "TEAM123456") } }
            return try await group.reduce(into: Set<String>()) { $0.insert($1) }
        }
        #expect(tokens.count == 1)
        let otherKey = APNsSigningKey(keyID: "OTHERKEY01", privateKey: P256.Signing.PrivateKey())
        let other = try provider.token(key: otherKey, teamID: "TEAM123456")
        let otherTeam = try provider.token(key: key, teamID: "TEAM654321")
        #expect(Set([tokens.first!, other, otherTeam]).count == 3)
        #expect(provider.tokensMinted == 3)
    }

    @Test func tokenIsAValidES256JWT() async throws {
        let token = try APNsTokenProvider.sign(key: key, teamID: "TEAM123456", issuedAt: 1_790_000_000)
        let parts = token.split(separator: ".").map(String.init)
        #expect(parts.count == 3)
        let header = try JSONSerialization.jsonObject(with: try #require(base64URLDecode(parts[0]))) as? [String: Any]
        #expect(header?["alg"] as? String == "ES256")
        #expect(header?["kid"] as? String == "ABC123DEFG")
        #expect(try decodeClaims(token)["iat"] as? Int == 1_790_000_000)
        let signature = try P256.Signing.ECDSASignature(rawRepresentation: try #require(base64URLDecode(parts[2])))
        #expect(key.privateKey.publicKey.isValidSignature(signature, for: Data((parts[0] + "." + parts[1]).utf8)))
    }

    @Test func expiredTokenIsDroppedOnlyWhenAtLeast20MinutesOld() async throws {
        let clock = ManualClock()
        let provider = APNsTokenProvider(refreshInterval: .seconds(50 * 60), clock: clock, wallClock: clock.wallClock())
        let first = try provider.token(key: key, teamID: "TEAM123456")
        clock.advance(by: .seconds(10 * 60))
        provider.invalidate(token: first, key: key, teamID: "TEAM123456")
        #expect(try provider.token(key: key, teamID: "TEAM123456") == first)
        clock.advance(by: .seconds(10 * 60))
        provider.invalidate(token: first, key: key, teamID: "TEAM123456")
        #expect(try provider.token(key: key, teamID: "TEAM123456") != first)
    }

    @Test(arguments: [10, 19, 61, 120])
    func refreshIntervalOutside20To60MinutesIsRefused(minutes: Int) throws {
        var configuration = APNsClientConfiguration(apps: [])
        configuration.tokenRefreshInterval = .seconds(minutes * 60)
        #expect(throws: APNsError.self) { try configuration.validate() }
    }

    @Test func keyFilesAreReadAndNeverShown() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(UUID().uuidString)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let path = directory.appendingPathComponent("AuthKey.p8").path
        let privateKey = P256.Signing.PrivateKey()
        try Data(privateKey.pemRepresentation.utf8).write(to: URL(fileURLWithPath: path))
        let key = try APNsSigningKey(keyID: "FILEKEY001", p8File: path)
        #expect(key.privateKey.publicKey.rawRepresentation == privateKey.publicKey.rawRepresentation)
        #expect("\(key)" == "APNsSigningKey(keyID: FILEKEY001)")
        let error = #expect(throws: APNsError.self) {
            try APNsSigningKey(keyID: "BROKEN0001", pem: "-----BEGIN PRIVATE KEY-----\nnope")
        }
        #expect(error?.code == .invalidKey)
        #expect(error?.description.contains("nope") == false)
    }
}

func base64URLDecode(_ text: String) -> Data? {
    var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
    while base64.count % 4 != 0 { base64 += "=" }
    return Data(base64Encoded: base64)
}

func decodeClaims(_ token: String) throws -> [String: Any] {
    let part = String(token.split(separator: ".")[1])
    return try JSONSerialization.jsonObject(with: try #require(base64URLDecode(part))) as? [String: Any] ?? [:]
}
