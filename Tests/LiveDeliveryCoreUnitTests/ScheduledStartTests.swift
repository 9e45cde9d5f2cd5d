import Foundation
import Testing

@testable import LiveDeliveryCore

@Suite("Tracking: activities the app scheduled to start later")
struct ScheduledStartTests {
    static func scheduled(at minute: Double?) -> InboundEvent {
        var object: [String: Any] = [
            "type": "activity.token", "version": 1, "event_id": "evt-token-scheduled-\(minute ?? -1)",
            "occurred_at": Fixtures.iso(0),
            "order_id": "A-10023", "activity_id": "ACT-1", "device_id": "iphone", "token": Fixtures.updateHex,
            "bundle_id": "com.example.pizza", "environment": "sandbox",
        ]
        if let minute { object["scheduled_start"] = Fixtures.iso(minute) }
        return Fixtures.decode(object)
    }

    @Test func theSweepersClocksCountFromTheScheduledStart() {
        // Idle after 4 hours without news, ended 30 minutes before 8 hours.
        var run = Fixtures.Run()
        run.apply(Fixtures.status("confirmed", seq: 1, minute: -1))
        let reported = run.apply(Self.scheduled(at: 300))
        #expect(reported.decisions.codes().contains("activity_scheduled"))
        #expect(run.activity.scheduledStart == Fixtures.at(300))
        #expect(run.state.nextSweepAt == Fixtures.at(300 + 240), "idle counts from the scheduled start")
        #expect(run.sweep(at: 260).decisions.isEmpty, "past 4 idle hours after the order's news, not after the start")
        #expect(run.sweep(at: 541).decisions.codes().contains("sweep_idle"))

        // The lifetime, too: news keeps the order from idling, and the 8 hours (less 30 minutes) run from the
        // scheduled start, not from when the app reported the activity.
        var busy = Fixtures.Run()
        busy.apply(Fixtures.status("confirmed", seq: 1, minute: -1))
        busy.apply(Self.scheduled(at: 120))
        busy.apply(Fixtures.status("preparing", seq: 2, minute: 200))
        busy.apply(Fixtures.status("ready_for_pickup", seq: 3, minute: 400))
        busy.apply(Fixtures.status("picked_up", seq: 4, minute: 440))
        #expect(!busy.sweep(at: 455).decisions.codes().contains("sweep_lifetime"))
        #expect(busy.sweep(at: 571).decisions.codes().contains("sweep_lifetime"))
    }

    @Test func aLaterReportMovesOrClearsTheSchedule() {
        var run = Fixtures.Run()
        run.apply(Fixtures.status("confirmed", seq: 1, minute: -1))
        run.apply(Self.scheduled(at: 300))
        var moved = Fixtures.decode([
            "type": "activity.token", "version": 1, "event_id": "evt-token-moved", "occurred_at": Fixtures.iso(5),
            "order_id": "A-10023", "activity_id": "ACT-1", "device_id": "iphone", "token": Fixtures.rotatedHex,
            "bundle_id": "com.example.pizza", "environment": "sandbox",
        ])
        run.apply(moved)
        #expect(run.activity.scheduledStart == nil, "started now: the newest report has no schedule")
        moved = Self.scheduled(at: 10)
        #expect(run.apply(moved).decisions.codes().first == "token_older")
        #expect(run.activity.scheduledStart == nil)
    }
}
