import Foundation
import LiveDeliveryTime
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

    /// `scheduled_start` set to a JSON value (raw text), with the reason, field and exact message of its refusal.
    @Test(
        "a malformed scheduled_start refuses the event with its field and why",
        arguments: [
            // Not a string.
            ("1795255290", EventRejection.Reason.invalidTimestamp, "scheduled_start must be an RFC 3339 string"),
            ("true", .invalidTimestamp, "scheduled_start must be an RFC 3339 string"),
            (#"{"at":"2026-11-21T18:00:00Z"}"#, .invalidTimestamp, "scheduled_start must be an RFC 3339 string"),
            (#"["2026-11-21T18:00:00Z"]"#, .invalidTimestamp, "scheduled_start must be an RFC 3339 string"),
            // A string that is no date.
            (
                #""tonight""#, .invalidTimestamp,
                "scheduled_start is not an RFC 3339 timestamp with an offset (like 2026-11-21T10:04:05Z)"
            ),
            (
                #""2026-11-21T18:00:00""#, .invalidTimestamp,
                "scheduled_start is not an RFC 3339 timestamp with an offset (like 2026-11-21T10:04:05Z)"
            ),
            (
                #""2026-02-30T18:00:00Z""#, .invalidTimestamp,
                "scheduled_start is not an RFC 3339 timestamp with an offset (like 2026-11-21T10:04:05Z)"
            ),
            (
                #""2026-11-21T25:00:00Z""#, .invalidTimestamp,
                "scheduled_start is not an RFC 3339 timestamp with an offset (like 2026-11-21T10:04:05Z)"
            ),
            // Past the bound after occurred_at (2026-11-21T10:00:00Z): a second over 7 days, the year 9999.
            (
                #""2026-11-28T10:00:01Z""#, .invalidField,
                "scheduled_start is 604801 s after occurred_at, more than the 7 days (604800 s) allowed"
            ),
            (
                #""2026-11-28T12:00:00+01:00""#, .invalidField,
                "scheduled_start is 608400 s after occurred_at, more than the 7 days (604800 s) allowed"
            ),
            (
                #""9999-12-31T23:59:59Z""#, .invalidField,
                "scheduled_start is 251607045599 s after occurred_at, more than the 7 days (604800 s) allowed"
            ),
        ])
    func aMalformedScheduledStartIsRefused(_ value: String, _ reason: EventRejection.Reason, _ message: String) throws {
        var object: [String: Any] = [
            "type": "activity.token", "version": 1, "event_id": "evt-token-malformed", "occurred_at": Fixtures.iso(0),
            "order_id": "A-10023", "activity_id": "ACT-1", "device_id": "iphone", "token": Fixtures.updateHex,
            "bundle_id": "com.example.pizza", "environment": "sandbox",
        ]
        object["scheduled_start"] = try JSONSerialization.jsonObject(
            with: Data(value.utf8), options: .fragmentsAllowed)
        guard case .failure(let rejection) = EventDecoder.decode(Fixtures.json(object), routingKey: "activity.token")
        else {
            Issue.record("accepted an activity.token with scheduled_start \(value)")
            return
        }
        #expect(rejection.reason == reason)
        #expect(rejection.field == "scheduled_start")
        #expect(rejection.message == message)
    }

    @Test("scheduled_start counts from occurred_at, whatever the clock; null or empty is no schedule")
    func theBoundCountsFromOccurredAt() {
        func decoded(occurredAt: String, scheduled: Any) -> Result<Date?, EventRejection> {
            let object: [String: Any] = [
                "type": "activity.token", "version": 1, "event_id": "evt-token-bound", "occurred_at": occurredAt,
                "order_id": "A-10023", "activity_id": "ACT-1", "token": Fixtures.updateHex,
                "bundle_id": "com.example.pizza", "environment": "sandbox", "scheduled_start": scheduled,
            ]
            return EventDecoder.decode(Fixtures.json(object)).map { event in
                guard case .activityToken(let token) = event else { return nil }
                return token.scheduledStart
            }
        }
        // Years from today's clock either way: only occurred_at matters.
        #expect(
            decoded(occurredAt: "2001-01-01T00:00:00Z", scheduled: "2001-01-08T00:00:00Z")
                == .success(RFC3339.parse("2001-01-08T00:00:00Z")))
        #expect(
            decoded(occurredAt: "2091-01-01T00:00:00Z", scheduled: "2091-01-07T23:00:00-01:00")
                == .success(RFC3339.parse("2091-01-08T00:00:00Z")))
        guard case .failure(let late) = decoded(occurredAt: "2001-01-01T00:00:00Z", scheduled: "2001-01-08T00:00:01Z")
        else {
            Issue.record("accepted a scheduled start a second past 7 days")
            return
        }
        #expect(late.reason == .invalidField && late.field == "scheduled_start")
        #expect(decoded(occurredAt: Fixtures.iso(0), scheduled: NSNull()) == .success(nil))
        // As every optional field: an empty string is no value.
        #expect(decoded(occurredAt: Fixtures.iso(0), scheduled: "") == .success(nil))
        #expect(decoded(occurredAt: Fixtures.iso(0), scheduled: "  ") == .success(nil))
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

    /// An `activity.token` for ACT-1 reported at `reported` with a scheduled start at `minute` (nil: none).
    static func report(at reported: Double, scheduled minute: Double?) -> InboundEvent {
        var object: [String: Any] = [
            "type": "activity.token", "version": 1, "event_id": "evt-token-\(reported)-\(minute ?? -1)",
            "occurred_at": Fixtures.iso(reported), "order_id": "A-10023", "activity_id": "ACT-1",
            "device_id": "iphone", "token": Fixtures.updateHex, "bundle_id": "com.example.pizza",
            "environment": "sandbox",
        ]
        if let minute { object["scheduled_start"] = Fixtures.iso(minute) }
        return Fixtures.decode(object)
    }

    @Test("a newer report that moves the schedule moves the sweeper's clocks: they count from the new start")
    func aMovedScheduleCountsFromTheNewStart() {
        // Later: idle 4 hours after the new start (600), not the old one (300).
        var later = Fixtures.Run()
        later.apply(Fixtures.status("confirmed", seq: 1, minute: -1))
        later.apply(Self.report(at: 0, scheduled: 300))
        #expect(later.state.nextSweepAt == Fixtures.at(300 + 240))
        let moved = later.apply(Self.report(at: 5, scheduled: 600))
        #expect(moved.decisions.codes().contains("activity_scheduled"), "the new start is announced")
        #expect(later.activity.scheduledStart == Fixtures.at(600))
        #expect(later.state.nextSweepAt == Fixtures.at(600 + 240))
        #expect(later.sweep(at: 541).decisions.isEmpty, "the old start's idle deadline has no effect")
        #expect(later.sweep(at: 839).decisions.isEmpty, "4 idle hours after the new start, less a minute")
        let swept = later.sweep(at: 841)
        #expect(swept.decisions.codes().contains("sweep_idle"))
        #expect(swept.pushes.map(\.kind) == [.end], "the end goes out once the new start's time has come")

        // Earlier: the lifetime (8 hours less 30 minutes) runs from the new start (60), not the old one (300).
        var earlier = Fixtures.Run()
        earlier.apply(Fixtures.status("confirmed", seq: 1, minute: -1))
        earlier.apply(Self.report(at: 0, scheduled: 300))
        earlier.apply(Self.report(at: 5, scheduled: 60))
        #expect(earlier.activity.scheduledStart == Fixtures.at(60))
        earlier.apply(Fixtures.status("preparing", seq: 2, minute: 200))
        earlier.apply(Fixtures.status("ready_for_pickup", seq: 3, minute: 300))
        earlier.apply(Fixtures.status("picked_up", seq: 4, minute: 400))
        #expect(earlier.sweep(at: 509).decisions.isEmpty, "7.5 hours after the new start, less a minute")
        #expect(earlier.sweep(at: 511).decisions.codes().contains("sweep_lifetime"), "not at 300 + 450 = 750")

        // An older report naming another start changes nothing.
        var older = Fixtures.Run()
        older.apply(Fixtures.status("confirmed", seq: 1, minute: -1))
        older.apply(Self.report(at: 5, scheduled: 600))
        #expect(older.apply(Self.report(at: 0, scheduled: 300)).decisions.codes().first == "token_older")
        #expect(older.activity.scheduledStart == Fixtures.at(600))
        #expect(older.sweep(at: 541).decisions.isEmpty)
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
