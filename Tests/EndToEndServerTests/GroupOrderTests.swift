import APNsSimulator
import Foundation
import LiveDeliveryJSON
import TestSupport
import Testing
import WorkerHarness

/// Orders that several people follow: the worker, apns-sim's channel API and its phones, end to end.
@Suite(.timeLimit(.minutes(6)))
struct GroupOrderTests {
    /// One group order's events, built step by step.
    struct GroupOrder {
        let orderID: String
        let owner = "u-owner"
        let followers: [String]
        /// Push-to-start token per user.
        var startTokens: [String: String] = [:]
        private var sequence = 0
        private var minute = 0

        init(_ prefix: String, followers: Int) {
            orderID = "\(prefix)-group"
            self.followers = (1...followers).map { "u-follower-\($0)" }
            for user in [owner] + self.followers { startTokens[user] = Events.token() }
        }

        typealias Message = (routingKey: String, body: [UInt8], messageID: String?)

        static func message(_ object: [String: Any]) -> Message {
            let body = Array(try! JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]))
            return (object["type"] as! String, body, object["event_id"] as? String)
        }

        mutating func time() -> String {
            minute += 1
            return ISO8601DateFormatter().string(from: Date(timeIntervalSince1970: 1_795_000_000 + Double(minute * 60)))
        }

        mutating func registrations() -> [Message] {
            ([owner] + followers).map { user in
                Self.message([
                    "type": "activity.push_to_start_token", "version": 1, "event_id": "\(orderID)-p2s-\(user)",
                    "occurred_at": time(), "user_id": user, "device_id": "phone-\(user)",
                    "token": startTokens[user]!, "bundle_id": Scenario.bundleID, "environment": "production",
                    "attributes_type": "DeliveryAttributes",
                ])
            }
        }

        mutating func followersReport(_ users: [String]? = nil) -> Message {
            Self.message([
                "type": "order.followers", "version": 1, "event_id": "\(orderID)-followers-\(minute)",
                "occurred_at": time(), "order_id": orderID, "followers": users ?? followers,
            ])
        }

        mutating func status(_ status: String, courier: String? = nil) -> Message {
            sequence += 1
            var object: [String: Any] = [
                "type": "order.status", "version": 1, "event_id": "\(orderID)-s\(sequence)", "occurred_at": time(),
                "order_id": orderID, "user_id": owner, "sequence": sequence, "status": status,
                "order_number": 50_330, "merchant": ["name": "Pizza Place"],
            ]
            if let courier { object["courier"] = ["name": courier] }
            return Self.message(object)
        }

        mutating func ownerToken(activityID: String, token: String) -> Message {
            Self.message([
                "type": "activity.token", "version": 1, "event_id": "\(orderID)-tok", "occurred_at": time(),
                "order_id": orderID, "activity_id": activityID, "device_id": "phone-\(owner)", "token": token,
                "bundle_id": Scenario.bundleID, "environment": "production",
            ])
        }
    }

    /// Publishes one step and waits until the worker applied it and sent what it planned.
    static func step(_ fixture: Fixture, _ messages: [GroupOrder.Message]) async throws {
        try await fixture.publish(messages)
        try await fixture.waitUntilSettled(eventIDs: Set(messages.compactMap(\.messageID)))
    }

    /// The start the phone of `user` received, once it has.
    static func start(_ fixture: Fixture, _ order: GroupOrder, _ user: String) async throws -> PushRecord {
        try await eventuallyValue("\(user)'s phone to be started", timeout: .seconds(60)) {
            fixture.pushes(token: order.startTokens[user]!).first { $0.status == 200 && $0.verdict.kind == .started }
        }
    }

    static func currentStep(_ view: ActivityView?) -> String? {
        if case .string(let step)? = view?.contentState?["currentStep"] { return step }
        return nil
    }

    @Test("a group order on three phones: one channel, each update one broadcast to both followers, deleted at the end")
    func aGroupOrderOnThreePhones() async throws {
        try await Fixture.with("group-order") { fixture in
            try await fixture.startWorker("w1")
            var order = GroupOrder(fixture.name, followers: 2)
            try await Self.step(fixture, order.registrations() + [order.status("placed"), order.followersReport()])
            try await Self.step(fixture, [order.status("confirmed")])

            // One channel, created by the worker, that both followers' phones joined; the owner's phone was
            // started with its own update token.
            let channel = try await eventuallyValue("the order's channel", timeout: .seconds(60)) {
                fixture.simulator.channels(bundleID: Scenario.bundleID).first { $0.activityIDs.count == 2 }
            }
            #expect(fixture.simulator.channels(bundleID: Scenario.bundleID).count == 1)
            #expect(channel.messageStoragePolicy == 1)
            let ownerStart = try await Self.start(fixture, order, order.owner)
            #expect(ownerStart.channelID == nil)
            let ownerActivity = try #require(ownerStart.activityID)
            let ownerToken = try #require(ownerStart.issuedUpdateToken)
            var followerActivities: [String] = []
            for follower in order.followers {
                let start = try await Self.start(fixture, order, follower)
                #expect(start.channelID == channel.channelID && start.issuedUpdateToken == nil)
                followerActivities.append(try #require(start.activityID))
            }
            #expect(Set(followerActivities) == Set(channel.activityIDs))
            try await Self.step(fixture, [order.ownerToken(activityID: ownerActivity, token: ownerToken)])

            // Each step: one push to the owner's token, one broadcast that every follower's phone displays.
            for (status, courier) in [("preparing", nil), ("out_for_delivery", "Lena"), ("delivered", "Lena")] {
                try await Self.step(fixture, [order.status(status, courier: courier)])
            }
            try await eventually("the channel to be deleted", timeout: .seconds(60)) {
                fixture.simulator.channel(id: channel.channelID)?.deletedAt != nil
            }
            let broadcasts = fixture.simulator.pushes(channel: channel.channelID).filter { $0.kind == .broadcast }
            #expect(broadcasts.map(\.status) == [200, 200, 200])
            for broadcast in broadcasts {
                #expect(broadcast.topic == nil && broadcast.verdict.kind == .broadcast)
                #expect(Set(broadcast.deliveries?.map(\.activityID) ?? []) == Set(followerActivities))
                #expect(broadcast.deliveries?.allSatisfy { [.displayed, .ended].contains($0.verdict.kind) } == true)
            }
            for follower in order.followers {
                let records = fixture.pushes(token: order.startTokens[follower]!)
                #expect(records.count == 1, "\(follower)'s phone got only its start by token")
            }
            // Every phone shows the delivered order, ended; nothing is left on a Lock Screen.
            for activityID in followerActivities + [ownerActivity] {
                let view = fixture.simulator.activity(id: activityID)
                #expect(view?.ended == true && Self.currentStep(view) == "delivered", "\(activityID)")
            }
            // What admins see: the channel closed, three activities ended, the channel's requests recorded.
            #expect(
                try await fixture.strings("SELECT phase || ' ' || (closed_at IS NOT NULL) FROM broadcast_channels")
                    == ["ended true"])
            #expect(try await fixture.count("SELECT sum(open)::int FROM report_broadcast_channels") == 0)
            #expect(try await fixture.count("SELECT count(*) FROM activities WHERE state = 'ended'") == 3)
            #expect(
                Set(try await fixture.strings("SELECT DISTINCT kind FROM push_attempts WHERE activity_key = 'channel'"))
                    == ["open_channel", "update", "end", "close_channel"])
            #expect(try await fixture.count("SELECT count(*) FROM orders WHERE NOT settled") == 0)
        }
    }

    @Test("channel errors: a refused creation falls back to per-token pushes, a lost channel gives up its activities")
    func channelErrors() async throws {
        try await Fixture.with("group-errors") { fixture in
            try await fixture.startWorker(
                "w1",
                extraEnvironment: [
                    "LIVEDELIVERY_DISPATCHER_BACKOFF_BASE_SECONDS": "0.01",
                    "LIVEDELIVERY_DISPATCHER_BACKOFF_MAX_SECONDS": "0.1",
                ])
            // APNs' channel limit reached: CannotCreateChannelConfig. The followers' phones get per-token pushes.
            fixture.simulator.channelLimit = 0
            var full = GroupOrder(fixture.name + "-full", followers: 2)
            try await Self.step(fixture, full.registrations() + [full.followersReport(), full.status("confirmed")])
            for follower in full.followers {
                let start = try await Self.start(fixture, full, follower)
                #expect(start.channelID == nil && start.issuedUpdateToken != nil, "started with its own token")
            }
            #expect(
                try await fixture.strings(
                    "SELECT close_reason FROM broadcast_channels WHERE order_id = '\(full.orderID)'")
                    == ["channel_refused: 400 CannotCreateChannelConfig"])
            #expect(fixture.simulator.channels().isEmpty)

            // A channel APNs lost (deleted on Apple's side): the next broadcast gets ChannelNotRegistered, and
            // the followers' activities in it are given up, not retried.
            fixture.simulator.channelLimit = 10
            var lost = GroupOrder(fixture.name + "-lost", followers: 2)
            try await Self.step(fixture, lost.registrations() + [lost.followersReport(), lost.status("confirmed")])
            let channel = try await eventuallyValue("the channel", timeout: .seconds(60)) {
                fixture.simulator.channels(bundleID: Scenario.bundleID).first { $0.activityIDs.count == 2 }
            }
            // A 429 first: the broadcast is sent again.
            fixture.simulator.injectFault(
                FaultRule(status: 429, reason: "TooManyRequests", count: 1, kind: .broadcast))
            try await Self.step(fixture, [lost.status("preparing")])
            let answered = fixture.simulator.pushes(channel: channel.channelID).filter { $0.kind == .broadcast }
            #expect(answered.map(\.status) == [429, 200])

            _ = fixture.simulator.deleteChannel(id: channel.channelID)
            try await Self.step(fixture, [lost.status("picked_up", courier: "Lena")])
            let last = try #require(fixture.simulator.pushes(channel: channel.channelID).last)
            #expect(last.status == 400 && last.reason == "ChannelNotRegistered")
            #expect(
                try await fixture.strings(
                    "SELECT state FROM activities WHERE order_id = '\(lost.orderID)' AND activity_key <> 'device:phone-u-owner' ORDER BY 1"
                ) == ["failed", "failed"])
            #expect(
                try await fixture.count(
                    "SELECT count(*) FROM timeline_decisions WHERE order_id = '\(lost.orderID)' AND code = 'channel_gone'"
                )
                    == 1)
            // Nothing more goes to the lost channel.
            try await Self.step(fixture, [lost.status("delivered", courier: "Lena")])
            #expect(fixture.simulator.pushes(channel: channel.channelID).last?.sequence == last.sequence)
        }
    }

    @Test(
        "near the worker's channel limit, and with the app's broadcast capability off, followers get per-token pushes")
    func channelLimitAndCapabilityFallBack() async throws {
        try await Fixture.with("group-limit") { fixture in
            // A limit of 1 channel per app, none kept free: the first group order takes it.
            let config = try fixture.config { policy in
                policy["broadcast"] = ["channelLimit": 1, "channelHeadroom": 0]
            }
            try await fixture.startWorker("w1", extraEnvironment: ["LIVEDELIVERY_CONFIG_DIR": config.path])
            var first = GroupOrder(fixture.name + "-first", followers: 2)
            try await Self.step(fixture, first.registrations() + [first.followersReport(), first.status("confirmed")])
            _ = try await eventuallyValue("the first order's channel", timeout: .seconds(60)) {
                fixture.simulator.channels(bundleID: Scenario.bundleID).first { $0.activityIDs.count == 2 }
            }
            var second = GroupOrder(fixture.name + "-second", followers: 2)
            try await Self.step(
                fixture, second.registrations() + [second.followersReport(), second.status("confirmed")])
            for follower in second.followers {
                let start = try await Self.start(fixture, second, follower)
                #expect(start.channelID == nil && start.issuedUpdateToken != nil)
            }
            #expect(fixture.simulator.channels().count == 1, "no second channel was asked for")
            #expect(
                try await fixture.strings(
                    "SELECT close_reason FROM broadcast_channels WHERE order_id = '\(second.orderID)'")
                    == ["channel_limit_near"])

            // The first order ends: its channel is deleted and no longer counts; the next group order would get
            // one, but the app's broadcast capability is off (FeatureNotEnabled): per-token pushes again.
            try await Self.step(fixture, [first.status("delivered")])
            #expect(try await fixture.count("SELECT sum(open)::int FROM report_broadcast_channels") == 0)
            fixture.simulator.setBroadcast(enabled: false, bundleID: Scenario.bundleID)
            var third = GroupOrder(fixture.name + "-third", followers: 2)
            try await Self.step(fixture, third.registrations() + [third.followersReport(), third.status("confirmed")])
            for follower in third.followers {
                let start = try await Self.start(fixture, third, follower)
                #expect(start.channelID == nil && start.issuedUpdateToken != nil)
            }
            #expect(
                try await fixture.strings(
                    "SELECT close_reason FROM broadcast_channels WHERE order_id = '\(third.orderID)'")
                    == ["channel_refused: 400 FeatureNotEnabled"])
        }
    }
}
