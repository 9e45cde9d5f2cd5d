import Foundation
import LiveDeliveryActivity
import LiveDeliveryJSON
import Testing

@testable import LiveDeliveryCore

extension Fixtures {
    static func followers(_ users: [String], minute: Double, id: String? = nil) -> InboundEvent {
        decode([
            "type": "order.followers", "version": 1, "event_id": id ?? "evt-followers-\(minute)",
            "occurred_at": iso(minute), "order_id": "A-10023", "followers": users,
        ])
    }

    /// A follower's push-to-start token (user `user`, device `device`).
    static func followerRegistration(_ user: String, device: String, hex: String) -> PushToStartRegistration {
        var registration = registration(device: device, hex: hex)
        registration.userID = user
        return registration
    }
}

/// Runs events as the worker would, answering each push as `answer` says (a channel's creation gets a channel
/// id), and sending what an answer plans too.
private struct GroupRun {
    static let channelID = "Q0hBTk5FTC1BLTEwMDIzLTE="
    let tracker: OrderTracker
    var state = OrderState(orderID: "A-10023", now: Fixtures.t0)
    var context: TrackingContext
    var sent: [PlannedPush] = []
    var decisions: [Decision] = []
    var answer: (PlannedPush) -> PushOutcome = { push in
        push.kind == .openChannel ? .channelCreated(channelID: GroupRun.channelID) : .accepted
    }

    init(tracker: OrderTracker = Fixtures.tracker(), followers: Int = 2, openChannels: [String: Int]? = [:]) {
        self.tracker = tracker
        var tokens = [Fixtures.registration(device: "iphone-owner")]
        for index in 0..<followers {
            tokens.append(
                Fixtures.followerRegistration(
                    "u-f\(index)", device: "iphone-f\(index)", hex: String(repeating: "d\(index)", count: 32)))
        }
        context = TrackingContext(pushToStartTokens: tokens, openChannels: openChannels)
    }

    /// The pushes of one event (and of the answers to them).
    @discardableResult
    mutating func apply(_ event: InboundEvent) -> [PlannedPush] {
        let step = tracker.apply(event, to: state, context: context, now: event.occurredAt)
        return absorb(step, now: event.occurredAt)
    }

    @discardableResult
    mutating func sweep(at minute: Double) -> [PlannedPush] {
        absorb(tracker.sweep(state, context: context, now: Fixtures.at(minute)), now: Fixtures.at(minute))
    }

    /// As the worker: sends each push and records its answer; followers' devices waiting for the channel's
    /// answer (created or refused) are started by the sweeper, here at once.
    mutating func absorb(_ step: Step, now: Date) -> [PlannedPush] {
        var pushes = send(step, now: now)
        let latest = pushes.map(\.notBefore).reduce(now, max)
        if let due = tracker.configuration.followersWaitingSince(state), due <= latest {
            pushes += send(tracker.sweep(state, context: context, now: latest), now: latest)
        }
        return pushes
    }

    private mutating func send(_ step: Step, now: Date) -> [PlannedPush] {
        state = step.state
        decisions += step.decisions
        var queue = step.pushes
        var pushes: [PlannedPush] = []
        while !queue.isEmpty {
            let push = queue.removeFirst()
            pushes.append(push)
            let recorded = tracker.record(answer(push), for: push, in: state, now: max(now, push.notBefore))
            state = recorded.state
            decisions += recorded.decisions
            queue.removeAll { pending in recorded.pushes.contains { $0.activityKey == pending.activityKey } }
            queue += recorded.pushes
        }
        sent += pushes
        return pushes
    }

    func activity(_ device: String) -> ActivityState? { state.activity("device:\(device)") }
}

@Suite("Tracking: orders that several people follow, and their broadcast channel")
struct ChannelTests {
    @Test func followersJoinOneChannelAndEachUpdateIsOneBroadcast() throws {
        var run = GroupRun()
        run.apply(Fixtures.status("placed", seq: 1, minute: 0))
        run.apply(Fixtures.followers(["u-f0", "u-f1"], minute: 0.5))
        #expect(run.decisions.codes().contains("followers_changed"))
        #expect(run.state.channel == nil, "placed may not start activities: no channel yet")

        let opening = run.apply(Fixtures.status("confirmed", seq: 2, minute: 1))
        let create = try #require(opening.first { $0.kind == .openChannel })
        #expect(create.method == "POST" && create.path == "/1/apps/com.example.pizza/channels")
        #expect(create.host == "api-manage-broadcast.sandbox.push.apple.com:2195")
        let body = try JSONSerialization.jsonObject(with: Data(create.payload)) as? [String: Any]
        #expect(body?["message-storage-policy"] as? Int == 1 && body?["push-type"] as? String == "LiveActivity")
        #expect(run.state.channel?.channelID == GroupRun.channelID && run.state.channel?.phase == .active)

        // The owner is started per token; each follower into the channel, with no update token asked for.
        let ownerStart = try #require(opening.first { $0.activityKey == "device:iphone-owner" })
        #expect(try aps(ownerStart)["input-push-token"] as? Int == 1)
        #expect(try aps(ownerStart)["input-push-channel"] == nil)
        for device in ["iphone-f0", "iphone-f1"] {
            let start = try #require(opening.first { $0.activityKey == "device:\(device)" })
            #expect(start.kind == .start && start.deviceToken != nil)
            #expect(try aps(start)["input-push-channel"] as? String == GroupRun.channelID)
            #expect(try aps(start)["input-push-token"] == nil)
            let (content, attributes) = try decodeApp(start)
            #expect(content.currentStep == .confirmed && attributes != nil, "the start decodes with the app's types")
            #expect(run.activity(device)?.phase == .active && run.activity(device)?.channelID == GroupRun.channelID)
        }
        #expect(opening.count == 4, "create, and three starts")

        // An update: one per-token push for the owner, one broadcast for both followers.
        run.apply(Fixtures.token(minute: 1.2, activity: "ACT-OWNER", device: "iphone-owner"))
        let update = run.apply(Fixtures.status("preparing", seq: 3, minute: 2, eta: (30, 40)))
        #expect(update.count == 2)
        let broadcast = try #require(update.first { $0.activityKey == OrderTracker.channelKey })
        #expect(broadcast.kind == .update && broadcast.deviceToken == nil)
        #expect(broadcast.path == "/4/broadcasts/apps/com.example.pizza" && broadcast.method == "POST")
        #expect(broadcast.header("apns-channel-id") == GroupRun.channelID)
        #expect(broadcast.header("apns-topic") == nil, "a broadcast carries no topic")
        #expect(broadcast.header("apns-request-id") == broadcast.apnsID)
        #expect(Int(broadcast.header("apns-expiration") ?? "") ?? 0 > 0, "the channel stores the most recent message")
        #expect(try decodeApp(broadcast).0.currentStep == .preparing)

        // The end: a broadcast end, then the channel's deletion; every activity ended, the order settled.
        let end = run.apply(Fixtures.status("delivered", seq: 4, minute: 30))
        #expect(end.map(\.kind) == [.end, .end, .closeChannel])
        let close = try #require(end.last)
        #expect(close.method == "DELETE" && close.header("apns-channel-id") == GroupRun.channelID)
        #expect(run.state.channel?.phase == .ended)
        #expect(run.state.activities.allSatisfy { $0.phase == .ended })
        #expect(run.state.isSettled)
        #expect(run.decisions.codes().contains("channel_closed"))
    }

    @Test func belowTheMinimumFollowersArePushedPerToken() throws {
        var run = GroupRun(followers: 1)
        run.apply(Fixtures.followers(["u-f0"], minute: 0))
        let opening = run.apply(Fixtures.status("confirmed", seq: 1, minute: 1))
        #expect(run.state.channel == nil)
        let start = try #require(opening.first { $0.activityKey == "device:iphone-f0" })
        #expect(try aps(start)["input-push-token"] as? Int == 1)

        // The order's own user listed as a follower does not count.
        var own = GroupRun(followers: 1)
        own.apply(Fixtures.followers(["u-f0", "u-991"], minute: 0))
        own.apply(Fixtures.status("confirmed", seq: 1, minute: 1))
        #expect(own.state.channel == nil)

        // minimumFollowers 0: never a channel.
        var never = GroupRun(tracker: Fixtures.tracker { $0.broadcast.minimumFollowers = 0 })
        never.apply(Fixtures.followers(["u-f0", "u-f1"], minute: 0))
        never.apply(Fixtures.status("confirmed", seq: 1, minute: 1))
        #expect(never.state.channel == nil && never.state.activities.count == 3)
    }

    @Test func nearTheChannelLimitFollowersArePushedPerToken() throws {
        let limit = Fixtures.tracker {
            $0.broadcast.channelLimit = 10
            $0.broadcast.channelHeadroom = 2
        }
        var run = GroupRun(tracker: limit, openChannels: ["com.example.pizza sandbox": 8])
        run.apply(Fixtures.followers(["u-f0", "u-f1"], minute: 0))
        let opening = run.apply(Fixtures.status("confirmed", seq: 1, minute: 1))
        #expect(run.decisions.codes().contains("channel_limit_near"))
        #expect(run.state.channel?.phase == .failed && run.state.channel?.closeReason == .decided(.channelLimitNear))
        #expect(!opening.contains { $0.kind == .openChannel })
        #expect(opening.filter { $0.kind == .start }.count == 3)
        for push in opening { #expect(try aps(push)["input-push-channel"] == nil) }

        // One fewer open: the channel is opened.
        var room = GroupRun(tracker: limit, openChannels: ["com.example.pizza sandbox": 7])
        room.apply(Fixtures.followers(["u-f0", "u-f1"], minute: 0))
        #expect(room.apply(Fixtures.status("confirmed", seq: 1, minute: 1)).contains { $0.kind == .openChannel })
        #expect(room.state.channel?.phase == .active)

        // Not counted (the worker read no count): no decision yet.
        var uncounted = GroupRun(openChannels: nil)
        uncounted.apply(Fixtures.followers(["u-f0", "u-f1"], minute: 0))
        uncounted.apply(Fixtures.status("confirmed", seq: 1, minute: 1))
        #expect(uncounted.state.channel == nil)
    }

    @Test(arguments: [
        PushOutcome.dropped(reason: "400 CannotCreateChannelConfig"), .dropped(reason: "400 FeatureNotEnabled"),
    ])
    func aChannelAPNsRefusesLeavesTheFollowersToPerTokenPushes(_ refusal: PushOutcome) throws {
        var run = GroupRun()
        run.answer = { $0.kind == .openChannel ? refusal : .accepted }
        run.apply(Fixtures.followers(["u-f0", "u-f1"], minute: 0))
        run.apply(Fixtures.status("confirmed", seq: 1, minute: 1))
        #expect(run.decisions.codes().contains("channel_refused"))
        #expect(run.state.channel?.phase == .failed)
        guard case .channelRefused(let refusal)? = run.state.channel?.closeReason else {
            Issue.record("the channel's close reason is \(String(describing: run.state.channel?.closeReason))")
            return
        }
        #expect(refusal.hasPrefix("400 "))
        let starts = run.sent.filter { $0.kind == .start }
        #expect(starts.count == 3)
        for start in starts { #expect(try aps(start)["input-push-token"] as? Int == 1) }
        #expect(run.state.activities.allSatisfy { $0.channelID == nil && $0.phase == .starting })
    }

    @Test func aChannelRetriedLaterIsCreatedOnceUnderTheSameRequestID() throws {
        var run = GroupRun()
        run.answer = { $0.kind == .openChannel ? .retryLater(reason: "TooManyRequests") : .accepted }
        run.apply(Fixtures.followers(["u-f0", "u-f1"], minute: 0))
        let first = try #require(run.apply(Fixtures.status("confirmed", seq: 1, minute: 1)).first)
        #expect(run.state.channel?.phase == .pendingStart)
        #expect(run.decisions.codes().contains("waiting_for_channel"))
        let retried = run.tracker.retry(run.state, now: Fixtures.at(2))
        let again = try #require(retried.pushes.first { $0.kind == .openChannel })
        #expect(again.apnsID == first.apnsID, "one channel, whatever the retries")
    }

    /// A follower's phone applies its start (to its token) and the channel's broadcasts alike, and keeps what it
    /// shows for an older timestamp: a broadcast is timed after every start into the channel, and a start after
    /// the channel's last broadcast, even within one second.
    @Test func aBroadcastIsTimedAfterTheStartsIntoTheChannelAndAStartAfterTheBroadcasts() throws {
        var run = GroupRun()
        run.answer = { push in
            switch push.kind {
            case .openChannel: .channelCreated(channelID: GroupRun.channelID)
            case .start: .retryLater(reason: "TooManyRequests")
            default: .accepted
            }
        }
        run.apply(Fixtures.followers(["u-f0", "u-f1"], minute: 0))
        run.apply(Fixtures.status("confirmed", seq: 1, minute: 1))
        let second = Int(Fixtures.at(1).timeIntervalSince1970)

        // iphone-f0's start, retried within the same second, is held past its first timestamp, and accepted.
        run.answer = { push in
            push.kind == .start && push.activityKey != "device:iphone-f0"
                ? .retryLater(reason: "TooManyRequests") : .accepted
        }
        let retried = run.absorb(run.tracker.retry(run.state, now: Fixtures.at(1)), now: Fixtures.at(1))
        let start = try #require(retried.first { $0.activityKey == "device:iphone-f0" })
        #expect(start.timestamp == second + 1)
        #expect(run.activity("iphone-f0")?.phase == .active)

        // News in the same second: the broadcast comes after the start iphone-f0 shows (and after iphone-f1's,
        // replanned with the news and perhaps accepted first).
        let news = run.apply(Fixtures.status("preparing", seq: 2, minute: 1))
        let broadcast = try #require(news.first { $0.activityKey == OrderTracker.channelKey })
        #expect(broadcast.kind == .update && broadcast.timestamp > start.timestamp)
        #expect(
            run.decisions.contains {
                $0.code == .timestampHeld && $0.activityKey == OrderTracker.channelKey
                    && $0.message.contains("started into the channel")
            })

        // iphone-f1's start, still waiting, comes after that broadcast: the phone may get it too.
        let late = run.absorb(run.tracker.retry(run.state, now: Fixtures.at(1)), now: Fixtures.at(1))
        let lateStart = try #require(late.first { $0.activityKey == "device:iphone-f1" })
        #expect(lateStart.timestamp > broadcast.timestamp)
    }

    @Test func aChannelThatVanishedGivesUpItsActivities() throws {
        var run = GroupRun()
        run.apply(Fixtures.followers(["u-f0", "u-f1"], minute: 0))
        run.apply(Fixtures.status("confirmed", seq: 1, minute: 1))
        run.answer = {
            $0.isChannelRequest ? .tokenRejected(reason: "ChannelNotRegistered", unregisteredAt: nil) : .accepted
        }
        run.apply(Fixtures.status("preparing", seq: 2, minute: 2))
        #expect(run.decisions.codes().contains("channel_gone"))
        #expect(run.state.channel?.phase == .failed)
        #expect(run.activity("iphone-f0")?.phase == .failed && run.activity("iphone-f1")?.phase == .failed)
        #expect(run.activity("iphone-owner")?.phase != .failed, "the owner's own activity is not in the channel")
        let next = run.apply(Fixtures.status("picked_up", seq: 3, minute: 3, courier: "Sam"))
        #expect(!next.contains { $0.isChannelRequest })
    }

    @Test func aChannelThatStoresNoMessageBroadcastsWithExpirationZero() throws {
        var run = GroupRun(tracker: Fixtures.tracker { $0.broadcast.storeMostRecent = false })
        run.apply(Fixtures.followers(["u-f0", "u-f1"], minute: 0))
        let opening = run.apply(Fixtures.status("confirmed", seq: 1, minute: 1))
        let create = try #require(opening.first { $0.kind == .openChannel })
        let body = try JSONSerialization.jsonObject(with: Data(create.payload)) as? [String: Any]
        #expect(body?["message-storage-policy"] as? Int == 0)
        let update = try #require(
            run.apply(Fixtures.status("preparing", seq: 2, minute: 2)).first { $0.isChannelRequest })
        #expect(update.header("apns-expiration") == "0")
    }

    @Test func theNewestFollowersReportWinsAndARemovedFollowerStartsNothing() throws {
        var run = GroupRun(followers: 3)
        run.apply(Fixtures.followers(["u-f0", "u-f1", "u-f2"], minute: 2, id: "evt-f-new"))
        run.apply(Fixtures.followers(["u-f0"], minute: 1, id: "evt-f-old"))
        #expect(run.decisions.codes().contains("followers_older"))
        #expect(run.state.followers == ["u-f0", "u-f1", "u-f2"])

        run.apply(Fixtures.followers(["u-f0", "u-f1"], minute: 3, id: "evt-f-newest"))
        #expect(run.state.followers == ["u-f0", "u-f1"])
        #expect(!run.state.pushToStartTokens.contains { $0.userID == "u-f2" })
        run.context.pushToStartTokens.removeAll { $0.userID == "u-f2" }  // as the worker reads them
        run.apply(Fixtures.status("confirmed", seq: 1, minute: 4))
        #expect(run.activity("iphone-f2") == nil)
        #expect(run.activity("iphone-f0")?.channelID != nil && run.activity("iphone-f1")?.channelID != nil)
    }

    @Test func theSweeperEndsAChannelNearTheLifetimeAndRetriesADeletion() throws {
        var run = GroupRun()
        run.apply(Fixtures.followers(["u-f0", "u-f1"], minute: 0))
        run.apply(Fixtures.status("confirmed", seq: 1, minute: 1))
        let due = try #require(run.state.nextSweepAt)
        #expect(due <= Fixtures.at(1 + 8 * 60))
        run.answer = { push in
            push.kind == .closeChannel ? .dropped(reason: "500 retries exhausted") : .accepted
        }
        let swept = run.sweep(at: 7.9 * 60)
        #expect(swept.contains { $0.activityKey == OrderTracker.channelKey && $0.kind == .end })
        #expect(run.state.channel?.phase == .ending && run.state.channel?.pending == nil)
        #expect(run.decisions.codes().contains("channel_close_failed"))
        run.answer = { _ in .accepted }
        let retried = run.sweep(at: 7.95 * 60)
        #expect(retried.map(\.kind).contains(.closeChannel))
        #expect(run.state.channel?.phase == .ended)
    }

    @Test func aFollowersReportIsRefusedWhenMalformed() throws {
        func refusal(_ followers: Any) -> EventRejection? {
            let body = Fixtures.json([
                "type": "order.followers", "version": 1, "event_id": "evt-f", "occurred_at": Fixtures.iso(0),
                "order_id": "A-10023", "followers": followers,
            ])
            if case .failure(let rejection) = EventDecoder.decode(body) { return rejection }
            return nil
        }
        #expect(refusal("u-1")?.reason == .invalidField)
        #expect(refusal([1])?.field == "followers.0")
        #expect(refusal([""])?.reason == .invalidField)
        #expect(refusal((0...OrderState.maxFollowers).map { "u-\($0)" })?.message.contains("at most 20") == true)
        #expect(refusal([]) == nil, "an empty list: nobody follows any more")
        let missing = Fixtures.json([
            "type": "order.followers", "version": 1, "event_id": "evt-f", "occurred_at": Fixtures.iso(0),
            "order_id": "A-10023",
        ])
        guard case .failure(let rejection) = EventDecoder.decode(missing) else {
            Issue.record("a report without followers was accepted")
            return
        }
        #expect(rejection.reason == .missingField && rejection.field == "followers")
    }
}
