import APNsSimulator
import Crypto
import Foundation
import Logging
import Synchronization
import Testing

@testable import APNs

/// The client against a real apns-sim (TLS, HTTP/2) in the same process.
struct ClientFixture {
    static let bundleID = "com.example.delivery"
    static let topic = bundleID + ".push-type.liveactivity"
    let key: APNsSigningKey
    let teamID = "TEAM123456"
    let simulator: RunningSimulator
    let client: APNsClient

    static func start(
        simulator adjustSimulator: (inout SimulatorConfiguration) -> Void = { _ in },
        client adjustClient: (inout APNsClientConfiguration) -> Void = { _ in },
        clock: any Clock<Duration> = ContinuousClock(),
        wallClock: @escaping @Sendable () -> Date = { Date() },
        logger: Logger = Logger(label: "apns-test", factory: { _ in SwiftLogNoOpLogHandler() })
    ) async throws -> ClientFixture {
        let key = APNsSigningKey(
            keyID: "KEY" + String(UUID().uuidString.prefix(7)), privateKey: P256.Signing.PrivateKey())
        var simulatorConfiguration = SimulatorConfiguration()
        simulatorConfiguration.keys = [
            .init(keyID: key.keyID, teamID: "TEAM123456", publicKey: key.privateKey.publicKey)
        ]
        simulatorConfiguration.threads = 1
        adjustSimulator(&simulatorConfiguration)
        let simulator = try await APNsSimulator.start(
            simulatorConfiguration, logger: Logger(label: "apns-sim", factory: { _ in SwiftLogNoOpLogHandler() }))
        let client = try makeClient(
            simulator: simulator, key: key, adjust: adjustClient, clock: clock, wallClock: wallClock, logger: logger)
        return ClientFixture(key: key, simulator: simulator, client: client)
    }

    static func makeClient(
        simulator: RunningSimulator,
        key: APNsSigningKey,
        adjust: (inout APNsClientConfiguration) -> Void = { _ in },
        clock: any Clock<Duration> = ContinuousClock(),
        wallClock: @escaping @Sendable () -> Date = { Date() },
        logger: Logger = Logger(label: "apns-test", factory: { _ in SwiftLogNoOpLogHandler() })
    ) throws -> APNsClient {
        var configuration = APNsClientConfiguration(apps: [
            APNsApp(
                bundleID: bundleID, teamID: "TEAM123456", key: key, environment: .production, baseURL: simulator.baseURL
            )
        ])
        configuration.caFile = simulator.certificatePEMPath
        // Generous: a whole parallel test run on two cores can hold a request up for seconds, and a
        // timeout here must not turn into a speed assertion. Tests of timeouts set their own.
        configuration.requestTimeout = .seconds(120)
        adjust(&configuration)
        return try APNsClient(configuration: configuration, logger: logger, clock: clock, wallClock: wallClock)
    }

    func stop() async throws {
        await client.shutdown()
        try await simulator.shutdown()
    }

    static func token() -> String {
        (0..<32).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined()
    }

    static func notification(
        token: String = token(),
        timestamp: Int = Int(Date().timeIntervalSince1970),
        payload: [UInt8]? = nil,
        priority: APNsPriority = .consideringDevicePower,
        collapseID: String? = nil
    ) -> APNsNotification {
        let body =
            #"{"aps":{"event":"update","timestamp":\#(timestamp),"content-state":{"driverName":"Sam","estimatedDeliveryTime":[1,2],"currentStep":"delivering"}}}"#
        return APNsNotification(
            deviceToken: token, topic: topic, priority: priority, expiration: .at(unixSeconds: timestamp + 3600),
            collapseID: collapseID, payload: payload ?? Array(body.utf8))
    }

    func send(_ notification: APNsNotification = ClientFixture.notification()) async -> APNsOutcome {
        await client.send(notification, app: Self.bundleID)
    }
}

@Suite("APNsClient against apns-sim over TLS HTTP/2", .timeLimit(.minutes(6)))
struct APNsClientTests {
    @Test func deliveredEchoesTheAPNsIDAndTheSimulatorSawEveryHeader() async throws {
        let fixture = try await ClientFixture.start()
        let notification = ClientFixture.notification(collapseID: "order-7")
        #expect(await fixture.send(notification) == .delivered(apnsID: notification.apnsID))
        let record = try #require(fixture.simulator.pushes(token: notification.deviceToken).first)
        #expect(record.apnsID == notification.apnsID.uuidString.lowercased())
        #expect(record.pushType == "liveactivity")
        #expect(record.topic == ClientFixture.topic)
        #expect(record.priority == 5)
        #expect(record.collapseID == "order-7")
        #expect(record.keyID == fixture.key.keyID)
        #expect(record.verdict.kind == .displayed)
        try await fixture.stop()
    }

    @Test func tokenGoneOutcomes() async throws {
        let fixture = try await ClientFixture.start()
        let simulator = fixture.simulator

        let unregistered = ClientFixture.token()
        simulator.markUnregistered(token: unregistered, at: Date(timeIntervalSince1970: 1_790_000_000.5))
        #expect(
            await fixture.send(ClientFixture.notification(token: unregistered))
                == .tokenGone(reason: .unregistered, unregisteredAt: Date(timeIntervalSince1970: 1_790_000_000.5)))

        let expired = ClientFixture.token()
        simulator.markExpired(token: expired)
        #expect(
            await fixture.send(ClientFixture.notification(token: expired))
                == .tokenGone(reason: .expiredToken, unregisteredAt: nil))

        let sandbox = ClientFixture.token()
        simulator.register(token: sandbox, bundleID: ClientFixture.bundleID, environment: .sandbox)
        #expect(
            await fixture.send(ClientFixture.notification(token: sandbox))
                == .tokenGone(reason: .badDeviceToken, unregisteredAt: nil))
        #expect(
            await fixture.send(ClientFixture.notification(token: "zz-not-hex"))
                == .tokenGone(reason: .badDeviceToken, unregisteredAt: nil))

        let otherApp = ClientFixture.token()
        simulator.register(token: otherApp, bundleID: "com.example.other")
        #expect(
            await fixture.send(ClientFixture.notification(token: otherApp))
                == .tokenGone(reason: .deviceTokenNotForTopic, unregisteredAt: nil))
        try await fixture.stop()
    }

    @Test func retryLaterOutcomes() async throws {
        let fixture = try await ClientFixture.start()
        let simulator = fixture.simulator
        simulator.injectFault(FaultRule(status: 429, reason: "TooManyRequests"))
        #expect(await fixture.send() == .retryLater(reason: .tooManyRequests, status: 429, after: .seconds(10)))
        simulator.injectFault(FaultRule(status: 503, reason: "ServiceUnavailable"))
        #expect(await fixture.send() == .retryLater(reason: .serviceUnavailable, status: 503, after: .seconds(30)))
        // APNs' own delay, in a retry-after header, wins over the client's default for the cause.
        simulator.injectFault(FaultRule(status: 429, reason: "TooManyRequests", retryAfter: 42))
        #expect(await fixture.send() == .retryLater(reason: .tooManyRequests, status: 429, after: .seconds(42)))
        simulator.injectFault(FaultRule(status: 500, reason: "InternalServerError"))
        #expect(await fixture.send() == .retryLater(reason: .internalServerError, status: 500, after: .seconds(30)))
        simulator.injectFault(FaultRule(drop: true))
        #expect(await fixture.send().reason == .connectionLost)
        #expect(await fixture.send().status == 200)  // on a new connection
        try await fixture.stop()
    }

    @Test func refreshAuthWhenTheProviderTokenIsOld() async throws {
        // The client's wall clock runs two hours behind: its tokens look expired to APNs.
        let fixture = try await ClientFixture.start(wallClock: { Date().addingTimeInterval(-7200) })
        #expect(await fixture.send() == .refreshAuth(reason: .expiredProviderToken))
        try await fixture.stop()
    }

    @Test func configurationFaultOutcomes() async throws {
        let fixture = try await ClientFixture.start(simulator: { configuration in
            configuration.keys[0].bundleIDs = [ClientFixture.bundleID]
        })
        // A topic the key may not push to.
        var other = ClientFixture.notification()
        other.topic = "com.example.other.push-type.liveactivity"
        #expect(await fixture.send(other) == .configurationFault(reason: .topicDisallowed, status: 400))
        // A bundle id the client does not know.
        #expect(
            await fixture.client.send(ClientFixture.notification(), app: "com.unknown")
                == .configurationFault(reason: .unknownApp, status: nil))
        // A key the simulator does not accept.
        let stranger = try ClientFixture.makeClient(
            simulator: fixture.simulator, key: APNsSigningKey(keyID: "STRANGER01", privateKey: .init()))
        #expect(
            await stranger.send(ClientFixture.notification(), app: ClientFixture.bundleID)
                == .configurationFault(reason: .invalidProviderToken, status: 403))
        await stranger.shutdown()
        // A key restricted to the other environment.
        let sandboxKey = APNsSigningKey(keyID: "SANDBOX001", privateKey: .init())
        let restricted = try await ClientFixture.start(simulator: { configuration in
            configuration.keys = [
                .init(
                    keyID: "SANDBOX001", teamID: "TEAM123456", publicKey: sandboxKey.privateKey.publicKey,
                    environment: .sandbox)
            ]
        })
        let sandboxClient = try ClientFixture.makeClient(simulator: restricted.simulator, key: sandboxKey)
        #expect(
            await sandboxClient.send(ClientFixture.notification(), app: ClientFixture.bundleID)
                == .configurationFault(reason: .badEnvironmentKeyIDInToken, status: 403))
        await sandboxClient.shutdown()
        try await restricted.stop()
        // A server certificate the client does not trust.
        let untrusting = try ClientFixture.makeClient(simulator: fixture.simulator, key: fixture.key) { configuration in
            configuration.caFile = nil
        }
        #expect(
            await untrusting.send(ClientFixture.notification(), app: ClientFixture.bundleID)
                == .configurationFault(reason: .tlsFailure, status: nil))
        await untrusting.shutdown()
        try await fixture.stop()
    }

    @Test("a trusted certificate for another host is refused: a TLS configuration fault, never a push")
    func certificateForAnotherHostIsRefused() async throws {
        // The client trusts the simulator's certificate (its CA file), but it names another host.
        let fixture = try await ClientFixture.start(
            simulator: { $0.certificateHostNames = ["api.push.example.net"] })
        #expect(await fixture.send() == .configurationFault(reason: .tlsFailure, status: nil))
        #expect(fixture.simulator.pushes().isEmpty, "nothing reached the simulator")
        try await fixture.stop()
    }

    @Test func payloadFaultOutcomesAndUnknownReasons() async throws {
        let fixture = try await ClientFixture.start()
        let big = Array(("{\"aps\":{},\"pad\":\"" + String(repeating: "x", count: 5000) + "\"}").utf8)
        #expect(
            await fixture.send(ClientFixture.notification(payload: big))
                == .payloadFault(reason: .payloadTooLarge, status: 413))
        #expect(
            await fixture.send(ClientFixture.notification(priority: APNsPriority(rawValue: 7)))
                == .payloadFault(reason: .badPriority, status: 400))
        #expect(
            await fixture.send(ClientFixture.notification(collapseID: String(repeating: "c", count: 65)))
                == .payloadFault(reason: .badCollapseID, status: 400))
        #expect(
            await fixture.send(ClientFixture.notification(payload: []))
                == .payloadFault(reason: .payloadEmpty, status: 400))
        fixture.simulator.injectFault(FaultRule(status: 400, reason: "BrandNewReason2027"))
        #expect(await fixture.send() == .payloadFault(reason: APNsReason(rawValue: "BrandNewReason2027"), status: 400))
        fixture.simulator.injectFault(FaultRule(status: 418, reason: "Teapot"))
        #expect(await fixture.send() == .payloadFault(reason: APNsReason(rawValue: "Teapot"), status: 418))
        try await fixture.stop()
    }

    @Test func oneProviderTokenIsSharedByEveryConnectionAndTask() async throws {
        let fixture = try await ClientFixture.start(client: { $0.maxConnectionsPerHost = 3 })
        let outcomes = await withTaskGroup(of: APNsOutcome.self) { group in
            for _ in 0..<300 { group.addTask { await fixture.send() } }
            return await group.reduce(into: [APNsOutcome]()) { $0.append($1) }
        }
        // Each request is sent once: under the whole suite's load a connection may be lost or refused while the
        // pool grows, which the dispatcher retries. Anything else (a refused token above all) is a failure.
        let transport: Set<APNsReason> = [.connectionLost, .couldNotConnect, .timedOut]
        let unexpected = outcomes.filter { outcome in
            switch outcome {
            case .delivered: false
            case .retryLater(let reason, _, _): !transport.contains(reason)
            default: true
            }
        }
        #expect(unexpected.isEmpty, "\(unexpected.prefix(3))")
        #expect(outcomes.contains { if case .delivered = $0 { true } else { false } })
        let fingerprints = Set(fixture.simulator.pushes().compactMap(\.providerTokenFingerprint))
        #expect(fingerprints.count == 1)
        #expect(await fixture.client.providerTokensSigned == 1)
        try await fixture.stop()
    }

    @Test func providerTokenIsRefreshedAfterTheIntervalAndAPNsAcceptsTheChange() async throws {
        let clock = ManualClock()
        let wallClock = clock.wallClock()
        let fixture = try await ClientFixture.start(
            simulator: { $0.now = wallClock }, client: { $0.tokenRefreshInterval = .seconds(50 * 60) },
            clock: clock, wallClock: wallClock)
        for _ in 0..<5 { #expect(await fixture.send().status == 200) }
        clock.advance(by: .seconds(49 * 60))
        #expect(await fixture.send().status == 200)
        #expect(Set(fixture.simulator.pushes().compactMap(\.providerTokenFingerprint)).count == 1)
        clock.advance(by: .seconds(2 * 60))
        for _ in 0..<5 { #expect(await fixture.send().status == 200) }
        let records = fixture.simulator.pushes()
        #expect(Set(records.compactMap(\.providerTokenFingerprint)).count == 2)
        #expect(records.allSatisfy { $0.status == 200 })
        #expect(await fixture.client.providerTokensSigned == 2)
        try await fixture.stop()
    }

    @Test func reconnectsAfterGoaway() async throws {
        let fixture = try await ClientFixture.start(client: { $0.maxConnectionsPerHost = 1 })
        #expect(await fixture.send().status == 200)
        #expect(fixture.client.connectionsOpened == 1)
        fixture.simulator.injectFault(FaultRule(goaway: true))
        // The request the GOAWAY cut off is returned, once, for the caller to send again.
        let outcome = await fixture.send()
        guard case .retryLater(reason: let reason, status: nil, after: _) = outcome else {
            Issue.record("a request cut off by GOAWAY gave \(outcome)")
            return
        }
        #expect(reason == .connectionLost)
        #expect(fixture.simulator.statistics.goawaysSent == 1)
        #expect(await fixture.send().status == 200)
        #expect(fixture.client.connectionsOpened == 2)
        try await fixture.stop()
    }

    @Test func reconnectsAfterTheServerRestarts() async throws {
        let fixture = try await ClientFixture.start(client: { $0.maxConnectionsPerHost = 1 })
        #expect(await fixture.send().status == 200)
        let port = fixture.simulator.port
        let certificate = fixture.simulator.certificateFiles
        try await fixture.simulator.shutdown()

        var configuration = SimulatorConfiguration()
        configuration.port = port
        configuration.certificate = certificate
        configuration.threads = 1
        configuration.keys = [
            .init(keyID: fixture.key.keyID, teamID: fixture.teamID, publicKey: fixture.key.privateKey.publicKey)
        ]
        let restarted = try await APNsSimulator.start(
            configuration, logger: Logger(label: "apns-sim", factory: { _ in SwiftLogNoOpLogHandler() }))
        #expect(await fixture.send().status == 200)
        #expect(restarted.pushes().count == 1)
        #expect(fixture.client.connectionsOpened == 2)
        await fixture.client.shutdown()
        try await restarted.shutdown()
    }

    @Test func thousandConcurrentPushesUseAtMostTheConfiguredConnections() async throws {
        let fixture = try await ClientFixture.start(client: { configuration in
            configuration.maxConnectionsPerHost = 2
            configuration.maxConcurrentStreamsPerConnection = 100
        })
        let outcomes = await withTaskGroup(of: APNsOutcome.self) { group in
            for _ in 0..<1000 { group.addTask { await fixture.send() } }
            return await group.reduce(into: [APNsOutcome]()) { $0.append($1) }
        }
        #expect(outcomes.filter { $0.status == 200 }.count == 1000)
        #expect(fixture.simulator.statistics.connectionsAccepted <= 2)
        #expect(fixture.client.connectionsOpened <= 2)
        #expect(fixture.simulator.pushes().count == 1000)
        try await fixture.stop()
    }

    @Test func stalledServerTimesOut() async throws {
        let fixture = try await ClientFixture.start(client: { configuration in
            // Long enough for a healthy request on a loaded machine, short enough to wait out.
            configuration.requestTimeout = .seconds(2)
        })
        #expect(await fixture.send().status == 200)
        fixture.simulator.injectFault(FaultRule(percent: 100, stall: true))
        let outcome = await fixture.send()
        #expect(outcome == .retryLater(reason: .timedOut, status: nil, after: .seconds(1)))
        // One request: sending again is the caller's decision.
        #expect(fixture.simulator.pushes().filter { $0.verdict.detail == "stalled" }.count == 1)
        fixture.simulator.clearFaults()
        #expect(await fixture.send().status == 200)
        try await fixture.stop()
    }

    @Test func severalAppsOfDifferentTeamsNeverShareAConnection() async throws {
        let otherKey = APNsSigningKey(keyID: "OTHERKEY01", privateKey: .init())
        let fixture = try await ClientFixture.start(simulator: { configuration in
            configuration.keys.append(
                .init(keyID: "OTHERKEY01", teamID: "OTHERTEAM1", publicKey: otherKey.privateKey.publicKey))
        })
        var configuration = APNsClientConfiguration(apps: [
            APNsApp(
                bundleID: ClientFixture.bundleID, teamID: fixture.teamID, key: fixture.key, environment: .production,
                baseURL: fixture.simulator.baseURL),
            APNsApp(
                bundleID: "com.example.other", teamID: "OTHERTEAM1", key: otherKey, environment: .sandbox,
                baseURL: fixture.simulator.baseURL),
        ])
        configuration.caFile = fixture.simulator.certificatePEMPath
        configuration.maxConnectionsPerHost = 1
        let client = try APNsClient(
            configuration: configuration, logger: Logger(label: "apns-test", factory: { _ in SwiftLogNoOpLogHandler() })
        )
        var other = ClientFixture.notification()
        other.topic = "com.example.other.push-type.liveactivity"
        for _ in 0..<3 {
            #expect(await client.send(ClientFixture.notification(), app: ClientFixture.bundleID).status == 200)
            #expect(await client.send(other, app: "com.example.other").status == 200)
        }
        let records = fixture.simulator.pushes()
        #expect(Set(records.map(\.keyID)) == [fixture.key.keyID, "OTHERKEY01"])
        // Each connection carried one team's key only.
        let keysPerConnection = Dictionary(grouping: records, by: \.connectionID).mapValues { Set($0.map(\.keyID)) }
        #expect(keysPerConnection.count == 2)
        #expect(keysPerConnection.values.allSatisfy { $0.count == 1 })
        #expect(client.connectionsOpened == 2)
        await client.shutdown()
        try await fixture.stop()
    }

    @Test func logsAndDescriptionsNeverShowTokensOrKeys() async throws {
        let sink = LogSink()
        var logger = Logger(label: "apns-test", factory: { _ in CapturingLogHandler(sink: sink) })
        logger.logLevel = .trace
        let fixture = try await ClientFixture.start(logger: logger)
        let notification = ClientFixture.notification()
        fixture.simulator.markUnregistered(token: notification.deviceToken)
        _ = await fixture.send(notification)
        _ = await fixture.send()
        let jwt = try #require(fixture.simulator.pushes().first?.providerTokenFingerprint)
        let text = sink.lines.withLock { $0.joined(separator: "\n") }
        #expect(!text.isEmpty)
        #expect(!text.contains(notification.deviceToken))
        #expect(text.contains(String(notification.deviceToken.prefix(8))))
        #expect(!text.contains("bearer"))
        #expect(!text.contains("eyJ"))  // base64url of '{"' starts every JWT
        #expect(!text.contains(jwt) || jwt.count < 8)
        #expect(!"\(notification)".contains(notification.deviceToken))
        #expect(!"\(fixture.key)".contains(fixture.key.privateKey.pemRepresentation))
        try await fixture.stop()
    }
}

/// Collects log lines with their metadata.
final class LogSink: Sendable {
    let lines = Mutex<[String]>([])
}

struct CapturingLogHandler: LogHandler {
    let sink: LogSink
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .trace

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        let merged = self.metadata.merging(event.metadata ?? [:]) { $1 }
        sink.lines.withLock { $0.append("\(event.level) \(event.message) \(merged)") }
    }
}
