import Foundation
import LiveDeliveryJSON
import Testing

@testable import APNsSimulator

/// Broadcast channels: what the channel and broadcast requests send and get back.
extension SimulatorFixture {
    var channelsPath: String { "/1/apps/\(bundleID)/channels" }
    var allChannelsPath: String { "/1/apps/\(bundleID)/all-channels" }
    var broadcastPath: String { "/4/broadcasts/apps/\(bundleID)" }

    /// Headers of a channel-management request.
    func channelHeaders(_ channelID: String? = nil) -> [(String, String)] {
        [("authorization", "bearer " + jwt)] + (channelID.map { [("apns-channel-id", $0)] } ?? [])
    }

    /// Headers of a well-formed broadcast to `channelID`.
    func broadcastHeaders(_ channelID: String, priority: String = "10", expiration: String = "0") -> [(String, String)]
    {
        [
            ("authorization", "bearer " + jwt),
            ("apns-push-type", "liveactivity"),
            ("apns-channel-id", channelID),
            ("apns-priority", priority),
            ("apns-expiration", expiration),
        ]
    }

    static func createBody(policy: Int) -> [UInt8] {
        Array(#"{"message-storage-policy":\#(policy),"push-type":"LiveActivity"}"#.utf8)
    }

    /// Creates a channel and returns its id.
    func createChannel(_ connection: H2TestConnection, policy: Int = 1, bundleID: String? = nil) async throws -> String
    {
        let response = try await connection.send(
            path: "/1/apps/\(bundleID ?? self.bundleID)/channels", headers: channelHeaders(),
            body: Self.createBody(policy: policy))
        #expect(response.status == 201)
        return try #require(response.headers["apns-channel-id"])
    }

    /// A push-to-start payload whose activity subscribes to `channelID` (no update token asked for).
    static func channelStartPayload(channel channelID: String, timestamp: Int, step: String = "confirmed") -> [UInt8] {
        let start = String(decoding: payload(event: "start", timestamp: timestamp, step: step), as: UTF8.self)
        return Array(
            start.replacingOccurrences(of: #""input-push-token":1"#, with: #""input-push-channel":"\#(channelID)""#)
                .utf8)
    }

    /// Sends a push-to-start subscribing to `channelID` and returns its record.
    func startSubscribed(
        _ connection: H2TestConnection,
        to channelID: String,
        timestamp: Int,
        step: String = "confirmed"
    ) async throws -> PushRecord {
        let token = Self.token()
        let response = try await connection.send(
            path: "/3/device/\(token)", headers: try headers(),
            body: Self.channelStartPayload(channel: channelID, timestamp: timestamp, step: step))
        #expect(response.status == 200)
        return try #require(simulator.pushes(token: token).last)
    }
}

extension H2TestConnection.Response {
    var json: [String: Any]? { (try? JSONSerialization.jsonObject(with: Data(body))) as? [String: Any] }
}

@Suite("apns-sim's broadcast channels", .timeLimit(.minutes(6)))
struct SimulatorBroadcastTests {
    // MARK: APNs' answers

    struct Case: Sendable, CustomTestStringConvertible {
        var name: String
        var status: Int
        var reason: String
        var method: String = "POST"
        /// `nil`: the broadcast path (or the channels path for a management case).
        var path: String?
        var management = false
        var policy = 1
        var change: @Sendable ([(String, String)]) -> [(String, String)] = { $0 }
        var body: [UInt8]?
        var testDescription: String { name }
    }

    static func replacing(_ name: String, _ value: String?) -> @Sendable ([(String, String)]) -> [(String, String)] {
        SimulatorRequestTests.replacing(name, with: value)
    }
    static let unknownChannel = "AAAAAAAAAAAAAAAAAAAAAA=="

    static let broadcastCases: [Case] = [
        Case(name: "broadcast GET", status: 405, reason: "MethodNotAllowed", method: "GET"),
        Case(name: "broadcast without bundle", status: 404, reason: "BadPath", path: "/4/broadcasts/apps/"),
        Case(name: "broadcast deeper path", status: 404, reason: "BadPath", path: "/4/broadcasts/apps/a/b"),
        Case(
            name: "duplicate channel id", status: 400, reason: "DuplicateHeaders",
            change: { $0 + [("apns-channel-id", unknownChannel)] }),
        Case(
            name: "broadcast without authorization", status: 403, reason: "MissingProviderToken",
            change: replacing("authorization", nil)),
        Case(
            name: "broadcast garbage token", status: 403, reason: "InvalidProviderToken",
            change: replacing("authorization", "bearer a.b.c")),
        Case(
            name: "topic with push-type suffix", status: 400, reason: "TopicDisallowed",
            change: replacing("apns-topic", "com.example.delivery.push-type.liveactivity")),
        Case(name: "no push type", status: 400, reason: "MissingPushType", change: replacing("apns-push-type", nil)),
        Case(
            name: "alert push type", status: 400, reason: "InvalidPushType",
            change: replacing("apns-push-type", "alert")),
        Case(name: "no channel id", status: 400, reason: "MissingChannelId", change: replacing("apns-channel-id", nil)),
        Case(
            name: "channel id not base64", status: 400, reason: "BadChannelId",
            change: replacing("apns-channel-id", "not a channel")),
        Case(
            name: "channel id of 15 bytes", status: 400, reason: "BadChannelId",
            change: replacing("apns-channel-id", "AAAAAAAAAAAAAAAAAAAA")),
        Case(
            name: "unknown channel", status: 400, reason: "ChannelNotRegistered",
            change: replacing("apns-channel-id", unknownChannel)),
        Case(name: "no priority", status: 400, reason: "BadPriority", change: replacing("apns-priority", nil)),
        Case(name: "priority 1", status: 400, reason: "BadPriority", change: replacing("apns-priority", "1")),
        Case(
            name: "no expiration", status: 400, reason: "BadExpirationDate", change: replacing("apns-expiration", nil)),
        Case(
            name: "expiration text", status: 400, reason: "BadExpirationDate",
            change: replacing("apns-expiration", "soon")),
        Case(
            name: "nonzero expiration on a No Message Stored channel", status: 400, reason: "BadExpirationDate",
            policy: 0, change: replacing("apns-expiration", "4102444800")),
        Case(name: "empty body", status: 400, reason: "PayloadEmpty", body: []),
        Case(
            name: "5121-byte body", status: 413, reason: "PayloadTooLarge",
            body: Array(("{\"a\":\"" + String(repeating: "x", count: 5113) + "\"}").utf8)),
        Case(name: "broadcast not JSON", status: 400, reason: "BadRequestPayload", body: Array("hello".utf8)),
        Case(name: "broadcast JSON array", status: 400, reason: "BadRequestPayload", body: Array("[1]".utf8)),
    ]

    static let managementCases: [Case] = [
        Case(name: "PUT channels", status: 405, reason: "MethodNotAllowed", method: "PUT", management: true),
        Case(
            name: "POST all-channels", status: 405, reason: "MethodNotAllowed",
            path: "/1/apps/com.example.delivery/all-channels", management: true),
        Case(
            name: "misspelt channels", status: 404, reason: "BadPath", path: "/1/apps/com.example.delivery/chanels",
            management: true),
        Case(name: "no bundle id", status: 404, reason: "BadPath", path: "/1/apps//channels", management: true),
        Case(
            name: "create without authorization", status: 403, reason: "MissingProviderToken", management: true,
            change: replacing("authorization", nil)),
        Case(
            name: "create not JSON", status: 400, reason: "BadRequestPayload", management: true,
            body: Array("hello".utf8)),
        Case(
            name: "create empty", status: 400, reason: "BadRequestPayload", management: true, body: []),
        Case(
            name: "storage policy 2", status: 400, reason: "BadRequestPayload", management: true,
            body: Array(#"{"message-storage-policy":2,"push-type":"LiveActivity"}"#.utf8)),
        Case(
            name: "storage policy as text", status: 400, reason: "BadRequestPayload", management: true,
            body: Array(#"{"message-storage-policy":"1","push-type":"LiveActivity"}"#.utf8)),
        Case(
            name: "no storage policy", status: 400, reason: "BadRequestPayload", management: true,
            body: Array(#"{"push-type":"LiveActivity"}"#.utf8)),
        Case(
            name: "create without push type", status: 400, reason: "MissingPushType", management: true,
            body: Array(#"{"message-storage-policy":1}"#.utf8)),
        Case(
            name: "create for alerts", status: 400, reason: "InvalidPushType", management: true,
            body: Array(#"{"message-storage-policy":1,"push-type":"alert"}"#.utf8)),
        Case(
            name: "push type a number", status: 400, reason: "BadRequestPayload", management: true,
            body: Array(#"{"message-storage-policy":1,"push-type":1}"#.utf8)),
        Case(
            name: "read without channel id", status: 400, reason: "MissingChannelId", method: "GET",
            management: true, change: replacing("apns-channel-id", nil)),
        Case(
            name: "read bad channel id", status: 400, reason: "BadChannelId", method: "GET", management: true,
            change: replacing("apns-channel-id", "abc")),
        Case(
            name: "read unknown channel", status: 400, reason: "ChannelNotRegistered", method: "GET",
            management: true, change: replacing("apns-channel-id", unknownChannel)),
        Case(
            name: "delete unknown channel", status: 400, reason: "ChannelNotRegistered", method: "DELETE",
            management: true, change: replacing("apns-channel-id", unknownChannel)),
        Case(
            name: "read another app's channel", status: 400, reason: "ChannelNotRegistered", method: "GET",
            path: "/1/apps/com.example.other/channels", management: true),
    ]

    @Test(arguments: broadcastCases + managementCases)
    func rejects(_ testCase: Case) async throws {
        let fixture = try await SimulatorFixture.start()
        let connection = try await fixture.connect()
        let channel = try await fixture.createChannel(connection, policy: testCase.policy)
        let headers =
            testCase.management ? fixture.channelHeaders(channel) : fixture.broadcastHeaders(channel)
        let defaultBody =
            testCase.management
            ? SimulatorFixture.createBody(policy: 1)
            : SimulatorFixture.payload(event: "update", timestamp: Int(Date().timeIntervalSince1970))
        let response = try await connection.send(
            method: testCase.method,
            path: testCase.path ?? (testCase.management ? fixture.channelsPath : fixture.broadcastPath),
            headers: testCase.change(headers), body: testCase.body ?? defaultBody)
        #expect(response.status == testCase.status)
        #expect(response.reason == testCase.reason)
        #expect(response.headers["apns-request-id"] != nil)
        #expect(response.headers["apns-id"] == nil)
        let record = try #require(fixture.simulator.pushes().last)
        #expect(record.status == testCase.status)
        #expect(record.reason == testCase.reason)
        #expect(record.kind == (testCase.management ? .channels : .broadcast))
        #expect(record.verdict.kind == .rejected)
        await connection.close()
        try await fixture.simulator.shutdown()
    }

    @Test func channelsAreCreatedReadListedAndDeleted() async throws {
        let fixture = try await SimulatorFixture.start()
        let connection = try await fixture.connect()
        let requestID = "3F2504E0-4F89-11D3-9A0C-0305E82C3301"
        let created = try await connection.send(
            path: fixture.channelsPath, headers: fixture.channelHeaders() + [("apns-request-id", requestID)],
            body: SimulatorFixture.createBody(policy: 1))
        #expect(created.status == 201)
        #expect(created.headers["apns-request-id"] == requestID)
        #expect(created.body.isEmpty)
        let first = try #require(created.headers["apns-channel-id"])
        #expect(Data(base64Encoded: first)?.count == 16)
        let second = try await fixture.createChannel(connection, policy: 0)
        #expect(first != second)

        let read = try await connection.send(
            method: "GET", path: fixture.channelsPath, headers: fixture.channelHeaders(first), body: [])
        #expect(read.status == 200)
        #expect(read.json?["message-storage-policy"] as? Int == 1)
        #expect(read.json?["push-type"] as? String == "LiveActivity")
        let readSecond = try await connection.send(
            method: "GET", path: fixture.channelsPath, headers: fixture.channelHeaders(second), body: [])
        #expect(readSecond.json?["message-storage-policy"] as? Int == 0)

        func list() async throws -> [String]? {
            let response = try await connection.send(
                method: "GET", path: fixture.allChannelsPath, headers: fixture.channelHeaders(), body: [])
            #expect(response.status == 200)
            return response.json?["channels"] as? [String]
        }
        #expect(try await list() == [first, second])

        let deleted = try await connection.send(
            method: "DELETE", path: fixture.channelsPath, headers: fixture.channelHeaders(first), body: [])
        #expect(deleted.status == 204)
        #expect(deleted.body.isEmpty)
        #expect(try await list() == [second])
        let gone = try await connection.send(
            method: "GET", path: fixture.channelsPath, headers: fixture.channelHeaders(first), body: [])
        #expect(gone.reason == "ChannelNotRegistered")

        let records = fixture.simulator.pushes()
        #expect(records.allSatisfy { $0.kind == .channels })
        #expect(
            records.map(\.verdict.kind) == [
                .channel, .channel, .channel, .channel, .channel, .channel, .channel, .rejected,
            ])
        #expect(records[0].channelID == first)
        #expect(records[0].apnsID == requestID)
        #expect(fixture.simulator.pushes(channel: first).count == 4)
        let view = try #require(fixture.simulator.channel(id: first))
        #expect(view.bundleID == fixture.bundleID)
        #expect(view.environment == .production)
        #expect(view.messageStoragePolicy == 1)
        #expect(view.deletedAt != nil)
        #expect(fixture.simulator.channel(id: second)?.deletedAt == nil)
        try await fixture.simulator.shutdown()
    }

    @Test func theChannelLimitIsPerAppAndSetAtRunTime() async throws {
        let fixture = try await SimulatorFixture.start { configuration, _ in configuration.channelLimit = 2 }
        let connection = try await fixture.connect()
        let first = try await fixture.createChannel(connection)
        _ = try await fixture.createChannel(connection)
        func create() async throws -> H2TestConnection.Response {
            try await connection.send(
                path: fixture.channelsPath, headers: fixture.channelHeaders(),
                body: SimulatorFixture.createBody(policy: 0))
        }
        let refused = try await create()
        #expect(refused.status == 400)
        #expect(refused.reason == "CannotCreateChannelConfig")
        _ = try await fixture.createChannel(connection, bundleID: "com.example.other")  // another app's own limit
        fixture.simulator.deleteChannel(id: first)
        #expect(try await create().status == 201)  // a deleted channel frees its place
        #expect(try await create().reason == "CannotCreateChannelConfig")
        fixture.simulator.channelLimit = 3
        #expect(try await create().status == 201)
        fixture.simulator.reset()
        #expect(fixture.simulator.channelLimit == 2)
        #expect(fixture.simulator.channels().isEmpty)
        try await fixture.simulator.shutdown()
    }

    @Test func keysForOtherAppsAreRefused() async throws {
        let fixture = try await SimulatorFixture.start { configuration, _ in
            configuration.keys[0].bundleIDs = ["com.example.other"]
        }
        let connection = try await fixture.connect()
        let response = try await connection.send(
            path: fixture.channelsPath, headers: fixture.channelHeaders(), body: SimulatorFixture.createBody(policy: 1))
        #expect(response.status == 400)
        #expect(response.reason == "TopicDisallowed")
        try await fixture.simulator.shutdown()
    }

    // MARK: The phones

    @Test func broadcastsReachEverySubscribedActivityByTheDeviceRules() async throws {
        let fixture = try await SimulatorFixture.start { configuration, _ in
            configuration.priority10BudgetPerHour = 1
            configuration.contentStateShape = .deliveryAttributes
        }
        let connection = try await fixture.connect()
        let channel = try await fixture.createChannel(connection, policy: 0)
        let now = Int(Date().timeIntervalSince1970)
        var activityIDs: [String] = []
        for _ in 0..<2 {
            let record = try await fixture.startSubscribed(connection, to: channel, timestamp: now)
            #expect(record.verdict.kind == .started)
            #expect(record.issuedUpdateToken == nil)
            #expect(record.channelID == channel)
            #expect(record.deliveries == nil)
            let activityID = try #require(record.activityID)
            let activity = try #require(fixture.simulator.activity(id: activityID))
            #expect(activity.channelID == channel)
            #expect(activity.updateToken == nil)
            activityIDs.append(activity.activityID)
        }
        #expect(fixture.simulator.channel(id: channel)?.activityIDs == activityIDs)

        func broadcast(_ event: String, _ timestamp: Int, _ step: String) async throws -> PushRecord {
            let response = try await connection.send(
                path: fixture.broadcastPath, headers: fixture.broadcastHeaders(channel),
                body: SimulatorFixture.payload(event: event, timestamp: timestamp, step: step))
            #expect(response.status == 200)
            #expect(response.headers["apns-request-id"] != nil)
            let record = try #require(fixture.simulator.pushes().last)
            #expect(record.kind == .broadcast)
            #expect(record.channelID == channel)
            return record
        }
        func verdicts(_ record: PushRecord) -> [DeviceVerdict.Kind]? { record.deliveries?.map(\.verdict.kind) }

        // Priority 10, three times within a budget of one an hour: broadcasts draw on no budget.
        for offset in 1...3 {
            let record = try await broadcast("update", now + offset, "preparing")
            #expect(record.verdict.kind == .broadcast)
            #expect(record.deliveries?.map(\.activityID) == activityIDs)
            #expect(verdicts(record) == [.displayed, .displayed])
        }
        #expect(verdicts(try await broadcast("update", now + 2, "confirmed")) == [.staleTimestamp, .staleTimestamp])
        #expect(verdicts(try await broadcast("update", now + 4, "flying")) == [.wouldNotDecode, .wouldNotDecode])
        #expect(
            verdicts(try await broadcast("update", now + 9 * 3600, "preparing")) == [
                .futureTimestamp, .futureTimestamp,
            ])
        let start = try await broadcast("start", now + 5, "confirmed")
        #expect(start.verdict.kind == .invalidPayload)
        #expect(start.deliveries == nil)
        #expect(verdicts(try await broadcast("end", now + 6, "delivered")) == [.ended, .ended])
        #expect(verdicts(try await broadcast("update", now + 7, "delivering")) == [.afterEnd, .afterEnd])

        for id in activityIDs {
            let activity = try #require(fixture.simulator.activity(id: id))
            #expect(activity.ended)
            #expect(activity.contentState?["currentStep"] == .string("delivered"))
            #expect(activity.timestamp == Double(now + 6))
            // Its start and the eight broadcasts that reached it (not the one that tried to start).
            #expect(fixture.simulator.pushes(activity: id).count == 9)
        }
        #expect(fixture.simulator.channel(id: channel)?.broadcastCount == 9)
        try await fixture.simulator.shutdown()
    }

    @Test func aStartSubscribesOnlyToALiveChannelOfItsApp() async throws {
        let fixture = try await SimulatorFixture.start()
        let connection = try await fixture.connect()
        let now = Int(Date().timeIntervalSince1970)
        let otherApps = try await fixture.createChannel(connection, bundleID: "com.example.other")
        let deleted = try await fixture.createChannel(connection)
        fixture.simulator.deleteChannel(id: deleted)
        for channel in [Self.unknownChannel, otherApps, deleted, "not a channel"] {
            let record = try await fixture.startSubscribed(connection, to: channel, timestamp: now)
            #expect(record.verdict.kind == .unknownChannel, "\(channel)")
            #expect(record.activityID == nil)
            #expect(record.channelID == channel)
        }

        let live = try await fixture.createChannel(connection)
        let both = SimulatorFixture.channelStartPayload(channel: live, timestamp: now)
        let bodies = [
            Array(
                String(decoding: both, as: UTF8.self).replacingOccurrences(of: "}}", with: #","input-push-token":1}}"#)
                    .utf8),
            Array(String(decoding: both, as: UTF8.self).replacingOccurrences(of: #""\#(live)""#, with: "5").utf8),
        ]
        for body in bodies {
            let token = SimulatorFixture.token()
            let response = try await connection.send(
                path: "/3/device/\(token)", headers: try fixture.headers(), body: body)
            #expect(response.status == 200)
            #expect(fixture.simulator.pushes(token: token).last?.verdict.kind == .invalidPayload)
        }
        #expect(fixture.simulator.channel(id: live)?.activityIDs.isEmpty == true)
        try await fixture.simulator.shutdown()
    }

    @Test func mostRecentMessageStoredChannelsApplyTheirLatestBroadcastToLaterSubscribers() async throws {
        let fixture = try await SimulatorFixture.start()
        let connection = try await fixture.connect()
        let now = Int(Date().timeIntervalSince1970)
        let stored = try await fixture.createChannel(connection, policy: 1)
        let notStored = try await fixture.createChannel(connection, policy: 0)
        for (channel, expiration) in [(stored, String(now + 3600)), (notStored, "0")] {
            for (offset, step) in [(5, "preparing"), (10, "delivering")] {
                let response = try await connection.send(
                    path: fixture.broadcastPath, headers: fixture.broadcastHeaders(channel, expiration: expiration),
                    body: SimulatorFixture.payload(event: "update", timestamp: now + offset, step: step))
                #expect(response.status == 200)
            }
        }

        let late = try await fixture.startSubscribed(connection, to: stored, timestamp: now)
        #expect(late.verdict.kind == .started)
        let activityID = try #require(late.activityID)
        #expect(late.deliveries?.map(\.activityID) == [activityID])
        #expect(late.deliveries?.first?.verdict == DeviceVerdict(.displayed, "stored broadcast"))
        let activity = try #require(fixture.simulator.activity(id: activityID))
        #expect(activity.contentState?["currentStep"] == .string("delivering"))
        #expect(activity.timestamp == Double(now + 10))

        // Newer than the stored broadcast: nothing to apply.
        let newer = try await fixture.startSubscribed(connection, to: stored, timestamp: now + 20, step: "pickedUp")
        #expect(newer.deliveries == nil)
        let newerID = try #require(newer.activityID)
        #expect(fixture.simulator.activity(id: newerID)?.timestamp == Double(now + 20))

        // No Message Stored keeps nothing.
        let unstored = try await fixture.startSubscribed(connection, to: notStored, timestamp: now)
        #expect(unstored.deliveries == nil)
        let unstoredID = try #require(unstored.activityID)
        let shown = fixture.simulator.activity(id: unstoredID)
        #expect(shown?.contentState?["currentStep"] == .string("confirmed"))

        // A deleted channel forgets its message; its activities keep what they show.
        fixture.simulator.deleteChannel(id: stored)
        #expect(
            try await fixture.startSubscribed(connection, to: stored, timestamp: now).verdict.kind == .unknownChannel)
        #expect(fixture.simulator.activity(id: activityID)?.contentState?["currentStep"] == .string("delivering"))
        try await fixture.simulator.shutdown()
    }

    @Test func aStoredBroadcastLastsEightHours() throws {
        var model = DeviceModel(environment: .production, priority10BudgetPerHour: nil, shape: nil)
        let bundleID = "com.example.delivery"
        let sent = Date(timeIntervalSince1970: 1_800_000_000)
        let channelID = try #require(model.handle(.create(bundleID: bundleID, storagePolicy: 1), now: sent).channelID)
        let update = try #require(
            JSONValue.parse(SimulatorFixture.payload(event: "update", timestamp: 1_800_000_010, step: "delivering")))
        let accepted = model.handle(
            .broadcast(bundleID: bundleID, channelID: channelID, priority: 10, expiration: 0, payload: update),
            now: sent)
        #expect(accepted.status == 200)
        #expect(accepted.deliveries == [])

        func start(at now: Date) throws -> DeviceModel.Result {
            let payload = SimulatorFixture.channelStartPayload(channel: channelID, timestamp: 1_800_000_000)
            let parsed: JSONValue = try #require(JSONValue.parse(payload))
            let push = DeviceModel.Push(
                token: SimulatorFixture.token(), bundleID: bundleID, pushType: "liveactivity", priority: 10,
                payload: parsed)
            return model.deliver(push, now: now)
        }
        #expect(try start(at: sent.addingTimeInterval(8 * 3600 - 1)).deliveries?.count == 1)
        let expired = try start(at: sent.addingTimeInterval(8 * 3600))
        #expect(expired.verdict.kind == .started)
        #expect(expired.deliveries == nil)
    }

    @Test func turningTheCapabilityOffDeletesEveryChannelOfTheApp() async throws {
        let fixture = try await SimulatorFixture.start()
        let connection = try await fixture.connect()
        let now = Int(Date().timeIntervalSince1970)
        let channel = try await fixture.createChannel(connection)
        let other = try await fixture.createChannel(connection, bundleID: "com.example.other")
        let subscribed = try #require(
            try await fixture.startSubscribed(connection, to: channel, timestamp: now).activityID)

        fixture.simulator.setBroadcast(enabled: false, bundleID: fixture.bundleID)
        let create = try await connection.send(
            path: fixture.channelsPath, headers: fixture.channelHeaders(), body: SimulatorFixture.createBody(policy: 1))
        #expect(create.reason == "FeatureNotEnabled")
        let list = try await connection.send(
            method: "GET", path: fixture.allChannelsPath, headers: fixture.channelHeaders(), body: [])
        #expect(list.reason == "FeatureNotEnabled")
        let broadcast = try await connection.send(
            path: fixture.broadcastPath, headers: fixture.broadcastHeaders(channel),
            body: SimulatorFixture.payload(event: "update", timestamp: now + 1))
        #expect(broadcast.status == 400)
        #expect(broadcast.reason == "FeatureNotEnabled")
        #expect(fixture.simulator.channel(id: channel)?.deletedAt != nil)
        #expect(fixture.simulator.channel(id: other)?.deletedAt == nil)
        #expect(fixture.simulator.activity(id: subscribed)?.contentState?["currentStep"] == .string("confirmed"))

        // On again: the deleted channels stay deleted.
        fixture.simulator.setBroadcast(enabled: true, bundleID: fixture.bundleID)
        let relisted = try await connection.send(
            method: "GET", path: fixture.allChannelsPath, headers: fixture.channelHeaders(), body: [])
        #expect(relisted.json?["channels"] as? [String] == [])
        let again = try await connection.send(
            path: fixture.broadcastPath, headers: fixture.broadcastHeaders(channel),
            body: SimulatorFixture.payload(event: "update", timestamp: now + 2))
        #expect(again.reason == "ChannelNotRegistered")
        try await fixture.simulator.shutdown()
    }

    // MARK: Control API and faults

    @Test func controlAPIShowsDeletesAndLimitsChannels() async throws {
        let fixture = try await SimulatorFixture.start()
        let simulator = fixture.simulator
        let control = SimulatorControlTests().control
        let connection = try await fixture.connect()
        let now = Int(Date().timeIntervalSince1970)
        let channel = try await fixture.createChannel(connection)
        let activityID = try #require(
            try await fixture.startSubscribed(connection, to: channel, timestamp: now).activityID)
        let urlSafe = channel.replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
        let percentEncoded = try #require(channel.addingPercentEncoding(withAllowedCharacters: .alphanumerics))

        let all = try #require(try await control(simulator, "GET", "/channels", nil).json as? [[String: Any]])
        #expect(all.map { $0["channelID"] as? String } == [channel])
        #expect(all.first?["activityIDs"] as? [String] == [activityID])
        #expect(all.first?["messageStoragePolicy"] as? Int == 1)
        #expect(all.first?["environment"] as? String == "production")
        #expect(all.first?["createdAt"] != nil)
        #expect(all.first?["broadcastCount"] as? Int == 0)
        let none = try await control(simulator, "GET", "/channels?bundle=com.example.other", nil)
        #expect((none.json as? [Any])?.isEmpty == true)
        for id in [urlSafe, percentEncoded] {
            let one = try await control(simulator, "GET", "/channels/\(id)", nil)
            #expect(one.status == 200)
            #expect((one.json as? [String: Any])?["channelID"] as? String == channel)
        }
        #expect(try await control(simulator, "GET", "/channels/\(Self.unknownChannel)", nil).status == 404)
        let activity = try await control(simulator, "GET", "/activities/\(activityID)", nil)
        #expect((activity.json as? [String: Any])?["channelID"] as? String == channel)
        let records = try #require(
            try await control(simulator, "GET", "/pushes?channel=\(percentEncoded)", nil).json as? [[String: Any]])
        #expect(records.map { $0["kind"] as? String } == ["channels", "device"])

        // The limit.
        #expect(try await control(simulator, "POST", "/channels/limit", #"{"limit":-1}"#).status == 400)
        let limit = try await control(simulator, "POST", "/channels/limit", #"{"limit":1}"#)
        #expect((limit.json as? [String: Any])?["limit"] as? Int == 1)
        let refused = try await connection.send(
            path: fixture.channelsPath, headers: fixture.channelHeaders(), body: SimulatorFixture.createBody(policy: 1))
        #expect(refused.reason == "CannotCreateChannelConfig")

        // Deleted as Apple may.
        let deleted = try await control(simulator, "DELETE", "/channels/\(urlSafe)", nil)
        #expect(deleted.status == 200)
        #expect((deleted.json as? [String: Any])?["deletedAt"] != nil)
        #expect(try await control(simulator, "DELETE", "/channels/\(Self.unknownChannel)", nil).status == 404)
        let broadcast = try await connection.send(
            path: fixture.broadcastPath, headers: fixture.broadcastHeaders(channel),
            body: SimulatorFixture.payload(event: "update", timestamp: now + 1))
        #expect(broadcast.reason == "ChannelNotRegistered")

        // The capability.
        #expect(try await control(simulator, "POST", "/apps/\(fixture.bundleID)/broadcast", "{}").status == 400)
        let off = try await control(simulator, "POST", "/apps/\(fixture.bundleID)/broadcast", #"{"enabled":false}"#)
        #expect((off.json as? [String: Any])?["enabled"] as? Bool == false)
        #expect((off.json as? [String: Any])?["bundleID"] as? String == fixture.bundleID)
        let disabled = try await connection.send(
            path: fixture.channelsPath, headers: fixture.channelHeaders(), body: SimulatorFixture.createBody(policy: 1))
        #expect(disabled.reason == "FeatureNotEnabled")

        // A reset forgets channels, the capability and the limit set at run time.
        _ = try await control(simulator, "POST", "/reset", nil)
        #expect((try await control(simulator, "GET", "/channels", nil).json as? [Any])?.isEmpty == true)
        _ = try await fixture.createChannel(connection)
        _ = try await fixture.createChannel(connection)
        try await simulator.shutdown()
    }

    @Test func faultsTargetBroadcastsChannelRequestsOrOneChannel() async throws {
        let fixture = try await SimulatorFixture.start()
        let simulator = fixture.simulator
        let control = SimulatorControlTests().control
        let connection = try await fixture.connect()
        let now = Int(Date().timeIntervalSince1970)
        let channel = try await fixture.createChannel(connection, policy: 0)
        let other = try await fixture.createChannel(connection, policy: 0)
        func broadcast(_ channel: String) async throws -> H2TestConnection.Response {
            try await connection.send(
                path: fixture.broadcastPath, headers: fixture.broadcastHeaders(channel),
                body: SimulatorFixture.payload(event: "update", timestamp: now))
        }
        func devicePush() async throws -> Int {
            try await connection.send(
                path: "/3/device/\(SimulatorFixture.token())", headers: try fixture.headers(),
                body: SimulatorFixture.payload(event: "update", timestamp: now)
            ).status
        }

        let rule = #"{"status":429,"reason":"TooManyRequests","percent":100,"kind":"broadcast"}"#
        #expect(try await control(simulator, "POST", "/faults", rule).status == 200)
        #expect(try await devicePush() == 200)
        let throttled = try await broadcast(channel)
        #expect(throttled.status == 429)
        #expect(throttled.reason == "TooManyRequests")
        #expect(throttled.headers["apns-request-id"] != nil)
        let record = try #require(simulator.pushes().last)
        #expect(record.kind == .broadcast)
        #expect(record.verdict.kind == .fault)
        #expect(record.channelID == channel)
        simulator.clearFaults()

        simulator.injectFault(FaultRule(status: 500, reason: "InternalServerError", count: 1, kind: .channels))
        #expect(try await devicePush() == 200)
        #expect(try await broadcast(channel).status == 200)
        let create = try await connection.send(
            path: fixture.channelsPath, headers: fixture.channelHeaders(), body: SimulatorFixture.createBody(policy: 1))
        #expect(create.status == 500)
        #expect(create.reason == "InternalServerError")
        #expect(try await fixture.createChannel(connection).isEmpty == false)

        simulator.injectFault(FaultRule(status: 503, reason: "ServiceUnavailable", count: 1, channel: channel))
        #expect(try await broadcast(other).status == 200)
        #expect(try await broadcast(channel).status == 503)
        #expect(try await broadcast(channel).status == 200)
        try await simulator.shutdown()
    }
}
