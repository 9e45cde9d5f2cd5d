import Foundation
import Testing

@testable import LiveDeliveryCore

/// What a publisher can make an order or a user hold is bounded (docs/events.md, Limits).
@Suite("Limits")
struct LimitsTests {
    static func hex(_ index: Int) -> String { String(format: "%064x", index + 1) }

    @Test("an order tracks at most maxActivities activities; further reports are on the timeline, not tracked")
    func activitiesPerOrder() throws {
        var run = Fixtures.Run()
        run.apply(Fixtures.status("preparing", seq: 1, minute: 0))
        let limit = OrderState.maxActivities
        for index in 0..<limit {
            let step = run.apply(
                Fixtures.token(
                    Self.hex(index), minute: 1, id: "t\(index)", activity: "ACT-\(index)", device: "d\(index)"))
            #expect(step.decisions.codes().contains("activity_discovered"))
        }
        #expect(run.state.activities.count == limit)
        let refused = run.apply(Fixtures.token(Self.hex(limit), minute: 2, id: "tX", activity: "ACT-X", device: "dX"))
        #expect(refused.decisions.codes().contains("activity_limit"))
        #expect(refused.pushes.isEmpty)
        let ended = run.apply(Fixtures.ended("dismissed_by_user", minute: 3, activity: "ACT-Y"))
        #expect(ended.decisions.codes().contains("activity_limit"))
        #expect(run.state.activities.count == limit)
        // A known activity still gets its token rotated and its end.
        let rotated = run.apply(Fixtures.token(Self.hex(99), minute: 4, id: "t0b", activity: "ACT-0", device: "d0"))
        #expect(rotated.decisions.codes().contains("token_rotated"))
    }

    @Test("a user has push-to-start tokens for at most maxPushToStartDevices devices; a known device still rotates")
    func pushToStartDevicesPerUser() throws {
        let limit = OrderState.maxPushToStartDevices
        let onFile = (0..<limit).map { Fixtures.registration(device: "d\($0)", hex: Self.hex($0)) }
        var run = Fixtures.Run(context: TrackingContext(pushToStartTokens: onFile))
        func pushToStart(_ device: String, _ hex: String, minute: Double) -> InboundEvent {
            Fixtures.decode([
                "type": "activity.push_to_start_token", "version": 1, "event_id": "p2s-\(device)-\(minute)",
                "occurred_at": Fixtures.iso(minute), "user_id": "u-991", "device_id": device, "token": hex,
                "bundle_id": "com.example.pizza", "environment": "sandbox", "attributes_type": "DeliveryAttributes",
            ])
        }
        let refused = run.apply(pushToStart("d-new", Self.hex(50), minute: 0))
        #expect(refused.decisions.codes().contains("push_to_start_device_limit"))
        #expect(!run.state.pushToStartTokens.contains { $0.deviceID == "d-new" })
        #expect(run.state.pushToStartTokens.count == limit)
        let rotated = run.apply(pushToStart("d3", Self.hex(51), minute: 1))
        #expect(rotated.decisions.codes().contains("push_to_start_registered"))
    }

    /// `devices` push-to-start registrations for each of `followers` followers (devices `f<i>-d<j>`), after the
    /// order's own user's `own` devices.
    static func groupTokens(followers: Int, devices: Int, own: Int, round: Int = 0) -> [PushToStartRegistration] {
        var tokens = (0..<own).map { Fixtures.registration(device: "own-d\($0)", hex: hex(900 + $0)) }
        for follower in 0..<followers {
            for device in 0..<devices {
                tokens.append(
                    Fixtures.followerRegistration(
                        "u-f\(follower)", device: "f\(follower)-d\(device)-r\(round)",
                        hex: hex(1000 * (round + 1) + follower * devices + device)))
            }
        }
        return tokens
    }

    @Test(
        "remote starts stop at maxActivities: 20 followers with 10 devices each start 20 activities, the user's first")
    func remoteStartsPerOrder() throws {
        let followers = (0..<20).map { "u-f\($0)" }
        // No channel counts (per-token pushes to every follower's device).
        var run = Fixtures.Run(
            context: TrackingContext(pushToStartTokens: Self.groupTokens(followers: 20, devices: 10, own: 2)))
        run.apply(Fixtures.status("placed", seq: 1, minute: 0))
        run.apply(
            Fixtures.decode([
                "type": "order.followers", "version": 1, "event_id": "evt-followers", "occurred_at": Fixtures.iso(0.5),
                "order_id": "A-10023", "followers": followers,
            ]))
        let started = run.apply(Fixtures.status("confirmed", seq: 2, minute: 1))
        let limit = OrderState.maxActivities
        #expect(run.state.activities.count == limit)
        #expect(started.pushes.filter { $0.kind == .start }.count == limit)
        #expect(run.state.pushToStartTokens.count <= limit, "the order's row holds no more devices than it may start")
        #expect(run.state.activity("device:own-d0") != nil && run.state.activity("device:own-d1") != nil)
        let refusal = try #require(started.decisions.first { $0.code == .activityLimit })
        #expect(refusal.message.contains("182 more of its people's devices are not offered"))

        // Tokens retired and new devices filed: the order still tracks 20, and starts nothing more.
        run.context.pushToStartTokens = Self.groupTokens(followers: 20, devices: 10, own: 2, round: 1)
        for minute in 2..<8 {
            let step = run.apply(
                Fixtures.status(minute % 2 == 0 ? "preparing" : "confirmed", seq: minute + 1, minute: Double(minute)))
            #expect(!step.pushes.contains { $0.kind == .start })
        }
        #expect(run.state.activities.count == limit)
        #expect(run.state.pushToStartTokens.count <= limit)
    }

    @Test("activities the app reported count too: remote starts fill only what is left of the 20")
    func remoteStartsAfterAppActivities() throws {
        var run = Fixtures.Run(
            context: TrackingContext(pushToStartTokens: Self.groupTokens(followers: 1, devices: 10, own: 0)))
        run.apply(Fixtures.status("placed", seq: 1, minute: 0))
        for index in 0..<18 {
            run.apply(
                Fixtures.token(
                    Self.hex(index), minute: 0.5, id: "t\(index)", activity: "ACT-\(index)", device: "d\(index)"))
        }
        run.apply(
            Fixtures.decode([
                "type": "order.followers", "version": 1, "event_id": "evt-followers", "occurred_at": Fixtures.iso(0.6),
                "order_id": "A-10023", "followers": ["u-f0"],
            ]))
        let started = run.apply(Fixtures.status("confirmed", seq: 2, minute: 1))
        #expect(run.state.activities.count == OrderState.maxActivities)
        #expect(started.pushes.filter { $0.kind == .start }.count == 2)
        let refusal = try #require(started.decisions.first { $0.code == .activityLimit })
        #expect(refusal.message.contains("8 devices that could be started remotely are not started"))
    }

    @Test("a user's own push-to-start limit counts the user's devices, not the followers' the order holds")
    func ownDeviceLimitIgnoresFollowers() throws {
        var run = Fixtures.Run(
            context: TrackingContext(pushToStartTokens: Self.groupTokens(followers: 1, devices: 10, own: 0)))
        run.apply(Fixtures.status("placed", seq: 1, minute: 0))
        let step = run.apply(
            Fixtures.decode([
                "type": "activity.push_to_start_token", "version": 1, "event_id": "p2s-own",
                "occurred_at": Fixtures.iso(1),
                "user_id": "u-991", "device_id": "own-new", "token": Self.hex(77), "bundle_id": "com.example.pizza",
                "environment": "sandbox", "attributes_type": "DeliveryAttributes",
            ]))
        #expect(step.decisions.codes().contains("push_to_start_registered"))
        #expect(!step.decisions.codes().contains("push_to_start_device_limit"))
    }
}

/// The one assembly of an order's context that the consumer, the sweeper and `render` share.
@Suite("Tracking: an order's context")
struct TrackingContextTests {
    @Test("the user's tokens and settings first, then each follower's by id; the user's settings of a device win")
    func assembly() {
        var state = OrderState(orderID: "A-10023", now: Fixtures.t0)
        state.followers = ["u-b", "u-a", "u-991"]
        let own = Fixtures.registration(device: "own")
        let a = Fixtures.followerRegistration("u-a", device: "a", hex: LimitsTests.hex(1))
        let b = Fixtures.followerRegistration("u-b", device: "b", hex: LimitsTests.hex(2))
        let on = DeviceSettings(
            userID: "u-991", deviceID: "shared", activitiesEnabled: true, frequentPushesEnabled: true, key: own.key)
        let off = DeviceSettings(
            userID: "u-b", deviceID: "shared", activitiesEnabled: false, frequentPushesEnabled: false, key: own.key)
        let context = TrackingContext(
            order: state, userID: "u-991", joining: ["u-c"],
            tokens: ["u-991": [own], "u-a": [a], "u-b": [b], "u-z": [Fixtures.registration(device: "z")]],
            settings: ["u-991": ["shared": on], "u-b": ["shared": off, "b": off]], startRefusedDevices: ["x"],
            openChannels: ["app": 1])
        #expect(context.pushToStartTokens.map(\.deviceID) == ["own", "a", "b"])
        #expect(context.deviceSettings["shared"] == on && context.deviceSettings["b"] == off)
        #expect(context.startRefusedDevices == ["x"] && context.openChannels == ["app": 1])
        #expect(TrackingContext.users(of: state, userID: "u-991", joining: ["u-c"]) == ["u-991", "u-a", "u-b", "u-c"])
        #expect(TrackingContext.users(of: OrderState(orderID: "o", now: Fixtures.t0), userID: "u-1") == ["u-1"])
    }
}

@Suite("Tracking: the event ids an order remembers")
struct SeenEventIDsTests {
    @Test("the last 64 ids, oldest evicted first; a duplicate within them changes nothing, an older one is absorbed")
    func window() {
        var run = Fixtures.Run()
        for index in 0..<70 {
            run.apply(Fixtures.status("preparing", seq: index + 1, minute: Double(index) / 10, id: "evt-\(index)"))
        }
        let limit = OrderState.seenEventIDLimit
        #expect(run.state.seenEventIDs == (70 - limit..<70).map { "evt-\($0)" })
        #expect(
            run.apply(Fixtures.status("preparing", seq: 70, minute: 6.9, id: "evt-69")).decisions.codes() == [
                "duplicate_event"
            ])
        let evicted = run.apply(Fixtures.status("preparing", seq: 1, minute: 0, id: "evt-0"))
        #expect(evicted.decisions.codes().contains("older_event"))
        #expect(evicted.pushes.isEmpty)
        #expect(run.state.seenEventIDs.last == "evt-0" && run.state.seenEventIDs.count == limit)
    }
}
