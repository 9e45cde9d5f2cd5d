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
}
