import Foundation
import Testing

@testable import LiveDeliveryCore

extension Fixtures {
    static func settings(
        device: String = "iphone", activities: Bool = true, frequent: Bool = false, minute: Double
    ) -> InboundEvent {
        decode([
            "type": "activity.settings", "version": 1, "event_id": "evt-settings-\(device)-\(minute)",
            "occurred_at": iso(minute), "user_id": "u-991", "device_id": device, "activities_enabled": activities,
            "frequent_pushes_enabled": frequent,
        ])
    }
}

extension Fixtures.Run {
    /// Files the report as the worker does (newest wins, in the context every later step sees), then applies it.
    @discardableResult
    mutating func report(_ event: InboundEvent) -> Step {
        guard case .activitySettings(let e) = event else { fatalError("not a settings report") }
        if context.deviceSettings[e.deviceID].map({ e.key.isNewer(than: $0.key) }) ?? true {
            context.deviceSettings[e.deviceID] = e.settings
        }
        return apply(event)
    }
}

@Suite("Tracking: the person's Live Activity settings")
struct SettingsTests {
    static func active(_ tracker: OrderTracker) -> Fixtures.Run {
        var run = Fixtures.Run(tracker: tracker)
        run.apply(Fixtures.token(minute: 0))
        run.apply(Fixtures.status("preparing", seq: 1, minute: 1, eta: (30, 40)))
        return run
    }

    static let tight = Fixtures.tracker {
        $0.priority10PerHour = 1
        $0.frequentPriority10PerHour = 3
    }

    @Test func frequentUpdatesChooseTheLargerBudget() throws {
        var run = Self.active(Self.tight)
        let on = run.report(Fixtures.settings(frequent: true, minute: 1.5))
        #expect(on.decisions.codes() == ["settings_reported", "frequent_updates_on"])
        #expect(run.activity.frequentPushes == true)
        #expect(on.pushes.isEmpty, "a setting changes no content")
        #expect(run.apply(Fixtures.status("preparing", seq: 2, minute: 2, eta: (50, 60))).pushes.first?.priority == 10)
        let onTheWay = run.apply(Fixtures.status("out_for_delivery", seq: 3, minute: 3, courier: "Sam", eta: (50, 60)))
        #expect(onTheWay.pushes.first?.priority == 10, "the second priority-10 push of the hour, within 3")
        #expect(onTheWay.decisions.contains { $0.message.contains("budget: 1 of 3 used this hour") })

        // Turned off: the standard budget, already spent, so the next non-essential alert goes at priority 5.
        var off = Self.active(Self.tight)
        off.report(Fixtures.settings(frequent: true, minute: 1.5))
        let turnedOff = off.report(Fixtures.settings(frequent: false, minute: 1.8))
        #expect(turnedOff.decisions.codes() == ["settings_reported", "frequent_updates_off"])
        #expect(off.apply(Fixtures.status("preparing", seq: 2, minute: 2, eta: (50, 60))).pushes.first?.priority == 10)
        let downgraded = off.apply(
            Fixtures.status("out_for_delivery", seq: 3, minute: 3, courier: "Sam", eta: (50, 60)))
        #expect(downgraded.pushes.first?.priority == 5)
        #expect(downgraded.decisions.codes().contains("budget_downgrade"))
    }

    @Test func liveActivitiesOffEndsTheDevicesActivityAndStartsNothingThere() throws {
        var run = Self.active(Fixtures.tracker())
        run.context.pushToStartTokens = [Fixtures.registration(device: "ipad")]
        let off = run.report(Fixtures.settings(device: "iphone", activities: false, minute: 2))
        #expect(Array(off.decisions.codes().prefix(2)) == ["settings_reported", "activities_disabled"])
        #expect(run.activity.phase == .ended && run.activity.closeReason == .decided(.activitiesDisabled))
        #expect(off.pushes.allSatisfy { $0.activityKey != run.activity.key }, "no end push: the person ended it")
        let next = run.apply(Fixtures.status("picked_up", seq: 2, minute: 3, courier: "Sam"))
        #expect(next.pushes.allSatisfy { $0.activityKey != run.activity.key })

        // A device with Live Activities off is not started remotely; turned on again, it is.
        var starts = Fixtures.Run(tracker: Fixtures.tracker())
        starts.context.pushToStartTokens = [Fixtures.registration(device: "ipad")]
        starts.report(Fixtures.settings(device: "ipad", activities: false, minute: -10))
        let confirmed = starts.apply(Fixtures.status("confirmed", seq: 1, minute: 0))
        #expect(confirmed.pushes.isEmpty)
        #expect(confirmed.decisions.codes().contains("start_activities_disabled"))
        let back = starts.report(Fixtures.settings(device: "ipad", activities: true, minute: 1))
        #expect(back.pushes.map(\.kind) == [.start])
    }

    @Test func anOlderReportOrAnOlderSettingChangesNothing() throws {
        var run = Self.active(Fixtures.tracker())
        run.report(Fixtures.settings(activities: true, frequent: true, minute: 5))
        let older = run.report(Fixtures.settings(activities: false, minute: 4))
        #expect(older.decisions.codes() == ["settings_older"])
        #expect(run.activity.phase == .active && run.activity.frequentPushes == true)

        // The app reported its token after the person turned Live Activities off: they are on again.
        var later = Fixtures.Run(tracker: Fixtures.tracker())
        later.report(Fixtures.settings(activities: false, minute: -5))
        later.apply(Fixtures.token(minute: 0))
        later.apply(Fixtures.status("preparing", seq: 1, minute: 1))
        #expect(later.activity.phase == .active)
        #expect(later.pushes.count == 1)
    }

    @Test func reportsAboutOtherDevicesLeaveTheOrderAlone() {
        var run = Self.active(Fixtures.tracker())
        let other = run.report(Fixtures.settings(device: "watch", activities: false, minute: 2))
        #expect(other.decisions.isEmpty && other.pushes.isEmpty)
        #expect(run.activity.phase == .active)
    }

    /// A field set to a JSON value (`null` for none) and the refusal it gets.
    @Test(arguments: [
        ("activities_enabled", #""yes""#, "activities_enabled must be true or false, not string"),
        ("activities_enabled", "1", "activities_enabled must be true or false, not integer"),
        ("frequent_pushes_enabled", "null", "frequent_pushes_enabled is required"),
        ("device_id", #""""#, "device_id must be 1–128 characters of at most 512 bytes (has 0, 0 bytes)"),
    ])
    func badReportsAreRefusedWithTheirField(_ field: String, _ value: String, _ message: String) throws {
        var object: [String: Any] = [
            "type": "activity.settings", "version": 1, "event_id": "e-1", "occurred_at": Fixtures.iso(0),
            "user_id": "u-991", "device_id": "iphone", "activities_enabled": true, "frequent_pushes_enabled": false,
        ]
        object[field] = try JSONSerialization.jsonObject(with: Data(value.utf8), options: .fragmentsAllowed)
        guard case .failure(let rejection) = EventDecoder.decode(Fixtures.json(object), routingKey: "activity.settings")
        else {
            Issue.record("accepted")
            return
        }
        #expect(rejection.field == field)
        #expect(rejection.message == message)
    }
}
