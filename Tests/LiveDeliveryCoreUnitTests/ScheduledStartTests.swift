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

    @Test("a scheduled start at most 7 days after the report is kept; a later one is refused on arrival")
    func theScheduledStartIsBounded() {
        let week = EventDecoder.maximumScheduleAheadSeconds / 60
        #expect(week == 7 * 24 * 60)
        #expect(Self.scheduledToken(at: week).map { $0 != nil } == .success(true), "7 days ahead: kept")
        #expect(Self.scheduledToken(at: -60).map { $0 != nil } == .success(true), "before the report: started")
        let later: [Double] = [week + 1.0 / 60, week + 1, 60 * 24 * 365]
        for minute in later {
            guard case .failure(let rejection) = Self.scheduledToken(at: minute) else {
                Issue.record("accepted a scheduled start \(minute) minutes after occurred_at")
                continue
            }
            #expect(rejection.reason == .invalidField)
            #expect(rejection.field == "scheduled_start")
            #expect(rejection.message.contains("7 days"), "\(rejection.message)")
        }
    }

    /// Decodes an `activity.token` reported at minute 0 with a scheduled start `minute` minutes later.
    static func scheduledToken(at minute: Double) -> Result<Date?, EventRejection> {
        let object: [String: Any] = [
            "type": "activity.token", "version": 1, "event_id": "evt-token-bound", "occurred_at": Fixtures.iso(0),
            "order_id": "A-10023", "activity_id": "ACT-1", "token": Fixtures.updateHex,
            "bundle_id": "com.example.pizza", "environment": "sandbox", "scheduled_start": Fixtures.iso(minute),
        ]
        return EventDecoder.decode(Fixtures.json(object)).map { event in
            guard case .activityToken(let token) = event else { return nil }
            return token.scheduledStart
        }
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
