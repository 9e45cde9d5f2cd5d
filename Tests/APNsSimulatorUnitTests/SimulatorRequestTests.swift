import APNsSimulator
import Crypto
import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOCore
import Testing

/// A running simulator with one accepted key, and helpers to send well-formed (or deliberately broken) requests.
struct SimulatorFixture {
    let key: TestKey
    let simulator: RunningSimulator
    /// One provider token for the whole test, as a real provider caches it (a new one per request would be
    /// refused with TooManyProviderTokenUpdates: ES256 signatures differ each time).
    let jwt: String
    let bundleID = "com.example.delivery"

    static func start(
        _ adjust: (inout SimulatorConfiguration, TestKey) throws -> Void = { _, _ in }
    ) async throws
        -> SimulatorFixture
    {
        let key = try TestKey()
        var configuration = SimulatorConfiguration()
        configuration.keys = [try .init(keyID: key.keyID, teamID: key.teamID, pemFile: key.pemPath)]
        configuration.threads = 1
        try adjust(&configuration, key)
        let simulator = try await APNsSimulator.start(
            configuration, logger: Logger(label: "apns-sim-test", factory: { _ in SwiftLogNoOpLogHandler() }))
        return SimulatorFixture(key: key, simulator: simulator, jwt: try key.jwt())
    }

    func connect() async throws -> H2TestConnection {
        try await H2TestConnection.connect(port: simulator.port, caFile: simulator.certificatePEMPath)
    }

    var topic: String { bundleID + ".push-type.liveactivity" }

    func headers(jwt: String? = nil, priority: String = "10") throws -> [(String, String)] {
        [
            ("authorization", "bearer " + (jwt ?? self.jwt)),
            ("apns-push-type", "liveactivity"),
            ("apns-topic", topic),
            ("apns-priority", priority),
            ("apns-id", UUID().uuidString.lowercased()),
        ]
    }

    static func token() -> String {
        (0..<32).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined()
    }

    static func payload(event: String, timestamp: Int, step: String = "delivering", extra: String = "") -> [UInt8] {
        let state = #"{"driverName":"Sam","estimatedDeliveryTime":[800000000,800000600],"currentStep":"\#(step)"}"#
        var aps = #""event":"\#(event)","timestamp":\#(timestamp),"content-state":\#(state)"#
        if event == "start" {
            aps += #","attributes-type":"DeliveryAttributes","attributes":{"orderNumber":7,"restaurantName":"Pizza"}"#
            aps += #","alert":{"title":"Order confirmed","body":"On its way"},"input-push-token":1"#
        }
        return Array(("{\"aps\":{" + aps + extra + "}}").utf8)
    }
}

@Suite("apns-sim refuses malformed requests with Apple's reasons", .timeLimit(.minutes(6)))
struct SimulatorRequestTests {
    struct Case: Sendable, CustomTestStringConvertible {
        var name: String
        var status: Int
        var reason: String
        var method: String = "POST"
        var path: String?
        var change: @Sendable ([(String, String)]) -> [(String, String)] = { $0 }
        var body: [UInt8]?
        var testDescription: String { name }
    }

    static func replacing(_ name: String, with value: String?) -> @Sendable ([(String, String)]) -> [(String, String)] {
        { headers in
            var result = headers.filter { $0.0 != name }
            if let value { result.append((name, value)) }
            return result
        }
    }

    static let cases: [Case] = [
        Case(name: "GET", status: 405, reason: "MethodNotAllowed", method: "GET"),
        Case(name: "wrong path", status: 404, reason: "BadPath", path: "/3/devices/abcd"),
        Case(name: "no token", status: 400, reason: "MissingDeviceToken", path: "/3/device/"),
        Case(name: "non-hex token", status: 400, reason: "BadDeviceToken", path: "/3/device/not-a-hex-token-at-all!"),
        Case(name: "short token", status: 400, reason: "BadDeviceToken", path: "/3/device/abcd"),
        Case(
            name: "odd-length token", status: 400, reason: "BadDeviceToken",
            path: "/3/device/" + String(repeating: "a", count: 63)),
        Case(name: "duplicate topic", status: 400, reason: "DuplicateHeaders", change: { $0 + [("apns-topic", "x")] }),
        Case(
            name: "no authorization", status: 403, reason: "MissingProviderToken",
            change: replacing("authorization", with: nil)),
        Case(
            name: "not bearer", status: 403, reason: "InvalidProviderToken",
            change: replacing("authorization", with: "basic abc")),
        Case(
            name: "garbage token", status: 403, reason: "InvalidProviderToken",
            change: replacing("authorization", with: "bearer a.b.c")),
        Case(name: "no topic", status: 400, reason: "MissingTopic", change: replacing("apns-topic", with: nil)),
        Case(
            name: "unknown push type", status: 400, reason: "InvalidPushType",
            change: replacing("apns-push-type", with: "hologram")),
        Case(
            name: "liveactivity without topic suffix", status: 400, reason: "DeviceTokenNotForTopic",
            change: replacing("apns-topic", with: "com.example.delivery")),
        Case(
            name: "suffix with alert push type", status: 400, reason: "DeviceTokenNotForTopic",
            change: replacing("apns-push-type", with: "alert")),
        Case(
            name: "bad topic", status: 400, reason: "BadTopic",
            change: replacing("apns-topic", with: "bad topic!.push-type.liveactivity")),
        Case(name: "priority 7", status: 400, reason: "BadPriority", change: replacing("apns-priority", with: "7")),
        Case(
            name: "priority text", status: 400, reason: "BadPriority", change: replacing("apns-priority", with: "high")),
        Case(
            name: "expiration text", status: 400, reason: "BadExpirationDate",
            change: replacing("apns-expiration", with: "tomorrow")),
        Case(
            name: "negative expiration", status: 400, reason: "BadExpirationDate",
            change: replacing("apns-expiration", with: "-5")),
        Case(name: "bad apns-id", status: 400, reason: "BadMessageId", change: replacing("apns-id", with: "12345")),
        Case(
            name: "collapse id over 64 bytes", status: 400, reason: "BadCollapseId",
            change: replacing("apns-collapse-id", with: String(repeating: "c", count: 65))),
        Case(name: "empty body", status: 400, reason: "PayloadEmpty", body: []),
        Case(
            name: "4097-byte body", status: 413, reason: "PayloadTooLarge",
            body: Array(("{\"a\":\"" + String(repeating: "x", count: 4089) + "\"}").utf8)),
        Case(name: "not JSON", status: 400, reason: "BadRequestPayload", body: Array("hello".utf8)),
    ]

    @Test(arguments: cases)
    func rejects(_ testCase: Case) async throws {
        let fixture = try await SimulatorFixture.start()
        let connection = try await fixture.connect()
        let token = SimulatorFixture.token()
        let response = try await connection.send(
            method: testCase.method,
            path: testCase.path ?? "/3/device/\(token)",
            headers: testCase.change(try fixture.headers()),
            body: testCase.body
                ?? SimulatorFixture.payload(event: "update", timestamp: Int(Date().timeIntervalSince1970)))
        #expect(response.status == testCase.status)
        #expect(response.reason == testCase.reason)
        #expect(response.headers["apns-id"] != nil)
        let record = try #require(fixture.simulator.pushes().last)
        #expect(record.status == testCase.status)
        #expect(record.verdict.kind == .rejected)
        await connection.close()
        try await fixture.simulator.shutdown()
    }

    @Test func acceptsExactly4096Bytes() async throws {
        let fixture = try await SimulatorFixture.start()
        let connection = try await fixture.connect()
        var body = SimulatorFixture.payload(event: "update", timestamp: Int(Date().timeIntervalSince1970))
        body.removeLast(2)  // "}}"
        let padding = 4096 - body.count - #","pad":""}}"#.utf8.count
        body += Array(#","pad":"\#(String(repeating: "p", count: padding))"}}"#.utf8)
        #expect(body.count == 4096)
        let response = try await connection.send(
            path: "/3/device/\(SimulatorFixture.token())", headers: try fixture.headers(), body: body)
        #expect(response.status == 200)
        await connection.close()
        try await fixture.simulator.shutdown()
    }

    @Test func providerTokenRules() async throws {
        let otherTeam = try TestKey(teamID: "OTHERTEAM1")
        let restricted = try TestKey()
        let fixture = try await SimulatorFixture.start { configuration, _ in
            configuration.keys.append(
                try .init(keyID: otherTeam.keyID, teamID: otherTeam.teamID, pemFile: otherTeam.pemPath))
            var sandboxOnly = try SimulatorConfiguration.AcceptedKey(
                keyID: restricted.keyID, teamID: restricted.teamID, pemFile: restricted.pemPath)
            sandboxOnly.environment = .sandbox
            configuration.keys.append(sandboxOnly)
        }
        let key = fixture.key
        let body = SimulatorFixture.payload(event: "update", timestamp: Int(Date().timeIntervalSince1970))
        func send(_ connection: H2TestConnection, _ jwt: String) async throws -> H2TestConnection.Response {
            try await connection.send(
                path: "/3/device/\(SimulatorFixture.token())", headers: try fixture.headers(jwt: jwt), body: body)
        }

        let connection = try await fixture.connect()
        let first = try key.jwt(issuedAt: Date().addingTimeInterval(-60))
        #expect(try await send(connection, first).status == 200)
        #expect(try await send(connection, first).status == 200)
        // A second token on the same connection within 20 minutes.
        let second = try key.jwt(issuedAt: Date())
        let tooMany = try await send(connection, second)
        #expect(tooMany.status == 429)
        #expect(tooMany.reason == "TooManyProviderTokenUpdates")
        #expect(try await send(connection, first).status == 200)
        // Another team's key on a connection that used this team's.
        let unrelated = try await send(connection, try otherTeam.jwt())
        #expect(unrelated.status == 403)
        #expect(unrelated.reason == "UnrelatedKeyIdInToken")

        // Fresh connections: expired, wrong team, wrong signature, environment-restricted key.
        let expired = try await send(
            try await fixture.connect(), try key.jwt(issuedAt: Date().addingTimeInterval(-3700)))
        #expect(expired.status == 403)
        #expect(expired.reason == "ExpiredProviderToken")
        let wrongTeam = try await send(try await fixture.connect(), try key.jwt(team: "NOTMYTEAM0"))
        #expect(wrongTeam.reason == "InvalidProviderToken")
        let forged = try await send(try await fixture.connect(), try key.jwt(signingKey: .init()))
        #expect(forged.status == 403)
        #expect(forged.reason == "InvalidProviderToken")
        let environment = try await send(try await fixture.connect(), try restricted.jwt())
        #expect(environment.reason == "BadEnvironmentKeyIdInToken")
        // The second token is fine on its own connection.
        #expect(try await send(try await fixture.connect(), second).status == 200)
        try await fixture.simulator.shutdown()
    }

    @Test func oneStreamUntilTheFirstValidProviderToken() async throws {
        let fixture = try await SimulatorFixture.start { configuration, _ in configuration.maxConcurrentStreams = 500 }
        let connection = try await fixture.connect()
        let body = SimulatorFixture.payload(event: "update", timestamp: Int(Date().timeIntervalSince1970))
        let refused = try await connection.send(
            path: "/3/device/\(SimulatorFixture.token())",
            headers: SimulatorRequestTests.replacing("authorization", with: "bearer x.y.z")(try fixture.headers()),
            body: body)
        #expect(refused.status == 403)
        #expect(connection.maxStreamsSettings.withLockedValue { $0 } == [1])
        #expect(
            try await connection.send(
                path: "/3/device/\(SimulatorFixture.token())", headers: try fixture.headers(), body: body
            ).status == 200)
        #expect(connection.maxStreamsSettings.withLockedValue { $0 } == [1, 500])
        #expect(
            try await connection.send(
                path: "/3/device/\(SimulatorFixture.token())", headers: try fixture.headers(), body: body
            ).status == 200)
        #expect(connection.maxStreamsSettings.withLockedValue { $0 } == [1, 500])
        try await fixture.simulator.shutdown()
    }

    @Test func topicSpecificKeyRefusesOtherTopics() async throws {
        let fixture = try await SimulatorFixture.start { configuration, _ in
            configuration.keys[0].bundleIDs = ["com.example.other"]
        }
        let connection = try await fixture.connect()
        let response = try await connection.send(
            path: "/3/device/\(SimulatorFixture.token())", headers: try fixture.headers(),
            body: SimulatorFixture.payload(event: "update", timestamp: Int(Date().timeIntervalSince1970)))
        #expect(response.status == 400)
        #expect(response.reason == "TopicDisallowed")
        try await fixture.simulator.shutdown()
    }

    @Test func tokenMarksAndBindings() async throws {
        let fixture = try await SimulatorFixture.start()
        let simulator = fixture.simulator
        let connection = try await fixture.connect()
        let now = Int(Date().timeIntervalSince1970)
        func push(_ token: String, topic: String? = nil) async throws -> H2TestConnection.Response {
            var headers = try fixture.headers()
            if let topic { headers = SimulatorRequestTests.replacing("apns-topic", with: topic)(headers) }
            return try await connection.send(
                path: "/3/device/\(token)", headers: headers,
                body: SimulatorFixture.payload(event: "update", timestamp: now))
        }

        let unregistered = SimulatorFixture.token()
        let since = Date(timeIntervalSince1970: 1_790_000_000.123)
        simulator.markUnregistered(token: unregistered, at: since)
        let gone = try await push(unregistered)
        #expect(gone.status == 410)
        #expect(gone.reason == "Unregistered")
        #expect(gone.timestamp == 1_790_000_000_123)

        let expired = SimulatorFixture.token()
        simulator.markExpired(token: expired)
        let expiredResponse = try await push(expired)
        #expect(expiredResponse.status == 410)
        #expect(expiredResponse.reason == "ExpiredToken")

        let sandbox = SimulatorFixture.token()
        simulator.register(token: sandbox, bundleID: fixture.bundleID, environment: .sandbox)
        #expect(try await push(sandbox).reason == "BadDeviceToken")

        let bound = SimulatorFixture.token()
        #expect(try await push(bound).status == 200)
        let otherApp = try await push(bound, topic: "com.example.other.push-type.liveactivity")
        #expect(otherApp.status == 400)
        #expect(otherApp.reason == "DeviceTokenNotForTopic")
        try await fixture.simulator.shutdown()
    }
}
