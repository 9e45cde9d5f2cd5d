import Foundation
import LiveDeliveryActivity
import Testing

@testable import LiveDeliveryCore

@Suite("Tracking: statuses and policy")
struct StatusTableTests {
    struct Row: Sendable, CustomTestStringConvertible {
        var status: String
        var kind: PlannedPush.Kind?
        var priority: Int
        var alert: String?
        var step: DeliveryStep
        var relevance: Double
        var dismissAfter: Int?
        var testDescription: String { status }
    }

    /// What each status does to an active activity last shown at `placed` (same ETA throughout).
    static let rows: [Row] = [
        Row(status: "placed", kind: nil, priority: 0, alert: nil, step: .confirmed, relevance: 30),
        Row(status: "confirmed", kind: .update, priority: 5, alert: nil, step: .confirmed, relevance: 40),
        Row(status: "preparing", kind: .update, priority: 5, alert: nil, step: .preparing, relevance: 50),
        Row(status: "ready_for_pickup", kind: .update, priority: 5, alert: nil, step: .preparing, relevance: 55),
        Row(status: "picked_up", kind: .update, priority: 5, alert: nil, step: .pickedUp, relevance: 70),
        Row(
            status: "out_for_delivery", kind: .update, priority: 10, alert: "Sam is on the way", step: .delivering,
            relevance: 85),
        Row(
            status: "arriving", kind: .update, priority: 10, alert: "Sam is arriving", step: .delivering, relevance: 100
        ),
        Row(
            status: "delivered", kind: .end, priority: 10, alert: "Delivered", step: .delivered, relevance: 10,
            dismissAfter: 1800),
        Row(
            status: "cancelled", kind: .end, priority: 10, alert: "Order cancelled", step: .confirmed, relevance: 10,
            dismissAfter: 300),
        Row(
            status: "delivery_failed", kind: .end, priority: 10, alert: "Delivery failed", step: .confirmed,
            relevance: 10, dismissAfter: 1800),
    ]

    @Test(arguments: rows)
    func statusOnAnActiveActivity(_ row: Row) throws {
        var run = Fixtures.Run()
        run.apply(Fixtures.status("placed", seq: 1, minute: 0, courier: "Sam", eta: (30, 40)))
        run.apply(Fixtures.token(minute: 1, device: nil))
        #expect(run.pushes.count == 1)
        let step = run.apply(Fixtures.status(row.status, seq: 2, minute: 2, courier: "Sam", eta: (30, 40)))
        guard let kind = row.kind else {
            #expect(step.pushes.isEmpty)
            #expect(step.decisions.codes().contains("content_unchanged"))
            return
        }
        let push = try #require(step.pushes.first)
        #expect(push.kind == kind)
        #expect(push.priority == row.priority)
        #expect(push.header("apns-priority") == String(row.priority))
        #expect(push.alert.map { "\($0.title)" } == row.alert)
        let body = try aps(push)
        #expect(body["relevance-score"] as? Double == row.relevance)
        #expect(body["event"] as? String == kind.rawValue)
        let (state, _) = try decodeApp(push)
        #expect(state.currentStep == row.step)
        #expect(state.estimatedDeliveryTime == Fixtures.at(30)...Fixtures.at(40))
        if let dismissAfter = row.dismissAfter {
            #expect(body["dismissal-date"] as? Int == push.timestamp + dismissAfter)
            #expect(body["stale-date"] == nil)
            #expect(run.activity.phase == .ended)
            #expect(run.state.isSettled)
        } else {
            #expect(body["stale-date"] as? Int == Int(Fixtures.at(40).timeIntervalSince1970) + 900)
            #expect(body["dismissal-date"] == nil)
            #expect(run.activity.phase == .active)
        }
    }

    @Test(arguments: OrderStatus.known)
    func startOnlyOnConfiguredStatuses(_ status: OrderStatus) throws {
        var run = Fixtures.Run(context: TrackingContext(pushToStartTokens: [Fixtures.registration()]))
        let step = run.apply(Fixtures.status(status.rawValue, seq: 1, minute: 0, courier: "Sam", eta: (30, 40)))
        let starts = Policy().startOn.contains(status)
        #expect(step.pushes.count == (starts ? 1 : 0))
        guard let push = step.pushes.first else {
            #expect(run.state.activities.isEmpty)
            return
        }
        #expect(push.kind == .start)
        #expect(push.priority == 10)
        #expect(push.alert != nil)
        #expect(push.deviceToken?.hex == Fixtures.pushToStartHex)
        #expect(push.activityKey == "device:iphone")
        let body = try aps(push)
        #expect(body["input-push-token"] as? Int == 1)
        #expect(body["attributes-type"] as? String == "DeliveryAttributes")
        #expect(body["alert"] != nil)
        let (_, attributes) = try decodeApp(push)
        #expect(attributes == DeliveryAttributes(orderNumber: 10023, restaurantName: "Pizza Place"))
        #expect(run.activity.phase == .starting)
        #expect(run.activity.alertedSteps == [Policy().rule(for: status).step])
    }
}

@Suite("Tracking: transitions")
struct TransitionTests {
    static let p2s = TrackingContext(pushToStartTokens: [Fixtures.registration()])

    @Test func pushToStartThenTokenThenNewestStateAsUpdate() throws {
        var run = Fixtures.Run(context: Self.p2s)
        run.apply(Fixtures.status("placed", seq: 1, minute: 0))
        #expect(run.state.activities.isEmpty)
        #expect(run.decisions.codes().contains("start_not_on_status"))
        run.apply(Fixtures.status("confirmed", seq: 2, minute: 1))
        #expect(run.activity.phase == .starting)
        run.apply(Fixtures.status("preparing", seq: 3, minute: 2, eta: (30, 40)))
        #expect(run.pushes.count == 1)
        #expect(run.decisions.codes().contains("waiting_for_token"))
        let step = run.apply(Fixtures.token(minute: 3))
        #expect(run.activity.phase == .active)
        #expect(run.activity.activityID == "ACT-1")
        #expect(run.activity.key == "device:iphone")
        let update = try #require(step.pushes.first)
        #expect(update.kind == .update)
        #expect(update.deviceToken?.hex == Fixtures.updateHex)
        #expect(try decodeApp(update).0.currentStep == .preparing)
    }

    @Test func tokenBeforeAnyOrderStatusWaits() throws {
        var run = Fixtures.Run()
        let first = run.apply(Fixtures.token(minute: 0))
        #expect(first.pushes.isEmpty)
        #expect(first.decisions.codes().contains("waiting_for_order"))
        #expect(run.activity.phase == .active)
        let step = run.apply(Fixtures.status("preparing", seq: 1, minute: 1))
        #expect(step.pushes.map(\.kind) == [.update])
    }

    @Test func tokenRotationRetargetsThePendingPush() throws {
        var run = Fixtures.Run()
        run.accept = false
        run.apply(Fixtures.token(minute: 0))
        run.apply(Fixtures.status("preparing", seq: 1, minute: 1))
        #expect(run.activity.pending != nil)
        let step = run.apply(Fixtures.token(Fixtures.rotatedHex, minute: 2))
        #expect(step.decisions.codes().contains("token_rotated"))
        #expect(step.pushes.map(\.deviceToken?.hex) == [Fixtures.rotatedHex])
        let older = run.apply(Fixtures.token(Fixtures.updateHex, minute: 1.5, id: "late-token"))
        #expect(older.decisions.codes().first == "token_older")
        #expect(older.pushes.isEmpty)
        #expect(run.activity.updateToken?.token.hex == Fixtures.rotatedHex)
    }

    @Test func rotationWithNothingPendingSendsNothing() {
        var run = Fixtures.Run()
        run.apply(Fixtures.token(minute: 0))
        run.apply(Fixtures.status("preparing", seq: 1, minute: 1))
        let step = run.apply(Fixtures.token(Fixtures.rotatedHex, minute: 2))
        #expect(step.pushes.isEmpty)
        #expect(run.activity.updateToken?.token.hex == Fixtures.rotatedHex)
    }

    @Test(arguments: [("dismissed_by_user", "ended"), ("ended_on_device", "ended"), ("expired", "expired")])
    func activityEndedOnDevice(_ reason: String, _ phase: String) {
        var run = Fixtures.Run()
        run.accept = false
        run.apply(Fixtures.token(minute: 0))
        run.apply(Fixtures.status("preparing", seq: 1, minute: 1))
        let step = run.apply(Fixtures.ended(reason, minute: 2))
        #expect(step.withdrawn == ["activity:ACT-1"])
        #expect(run.activity.phase.rawValue == phase)
        #expect(run.activity.closeReason == .reportedByApp(ActivityEndReason(rawValue: reason)))
        #expect(run.apply(Fixtures.status("picked_up", seq: 2, minute: 3)).pushes.isEmpty)
        let token = run.apply(Fixtures.token(Fixtures.rotatedHex, minute: 4))
        #expect(token.pushes.isEmpty)
        #expect(token.decisions.codes().contains("token_for_final_activity"))
        #expect(run.activity.updateToken?.token.hex == Fixtures.rotatedHex)
    }

    @Test func duplicatesAndOlderEventsChangeNothing() {
        var run = Fixtures.Run()
        run.apply(Fixtures.token(minute: 0))
        run.apply(Fixtures.status("picked_up", seq: 5, minute: 5, courier: "Sam"))
        let before = run.state
        let duplicate = run.tracker.apply(
            Fixtures.status("picked_up", seq: 5, minute: 5, courier: "Sam"), to: before, now: Fixtures.at(6))
        #expect(duplicate.state == before && duplicate.pushes.isEmpty)
        #expect(duplicate.decisions.codes() == ["duplicate_event"])
        let older = run.apply(Fixtures.status("preparing", seq: 4, minute: 4, courier: "Sam"))
        #expect(older.pushes.isEmpty)
        #expect(older.decisions.codes() == ["older_event"])
        #expect(run.state.record == before.record)
        let byTime = Fixtures.Run()
        var timeRun = byTime
        timeRun.apply(Fixtures.token(minute: 0))
        timeRun.apply(Fixtures.status("picked_up", seq: nil, minute: 5))
        #expect(timeRun.apply(Fixtures.status("preparing", seq: nil, minute: 4)).decisions.codes() == ["older_event"])
    }

    @Test func olderEventFillsOnlyMissingDetails() throws {
        var run = Fixtures.Run()
        run.apply(Fixtures.token(minute: 0))
        run.apply(Fixtures.status("out_for_delivery", seq: 6, minute: 6))
        let step = run.apply(Fixtures.status("picked_up", seq: 5, minute: 5, courier: "Sam"))
        #expect(step.decisions.codes().first == "older_event_filled_details")
        #expect(run.state.record?.status == .outForDelivery)
        let push = try #require(step.pushes.first)
        #expect(try decodeApp(push).0.driverName == "Sam")
        #expect(try decodeApp(push).0.currentStep == .delivering)
    }

    @Test func terminalAbsorbsLaterEventsAndWinsEvenIfOlder() {
        var run = Fixtures.Run()
        run.apply(Fixtures.token(minute: 0))
        run.apply(Fixtures.status("out_for_delivery", seq: 6, minute: 6))
        let end = run.apply(Fixtures.status("delivered", seq: 5, minute: 5))
        #expect(end.pushes.map(\.kind) == [.end])
        #expect(run.state.record?.status == .delivered)
        let later = run.apply(Fixtures.status("arriving", seq: 9, minute: 9))
        #expect(later.pushes.isEmpty)
        #expect(later.decisions.codes() == ["terminal_absorbed"])
        #expect(run.state.status == .delivered)
        #expect(run.apply(Fixtures.status("cancelled", seq: 10, minute: 10)).pushes.isEmpty)
    }

    @Test func terminalBeforeTheStartWentOutWithdrawsIt() {
        var run = Fixtures.Run(context: Self.p2s)
        run.accept = false
        run.apply(Fixtures.status("confirmed", seq: 1, minute: 0))
        #expect(run.activity.phase == .pendingStart)
        let step = run.apply(Fixtures.status("cancelled", seq: 2, minute: 1))
        #expect(step.withdrawn == ["device:iphone"])
        #expect(step.pushes.isEmpty)
        #expect(run.activity.phase == .ended)
        #expect(run.state.isSettled)
    }

    @Test func anAcceptedStartWithdrawsANewerPendingStart() throws {
        var run = Fixtures.Run(context: Self.p2s)
        run.accept = false
        let first = try #require(run.apply(Fixtures.status("confirmed", seq: 1, minute: 0)).pushes.first)
        let second = run.apply(Fixtures.status("preparing", seq: 2, minute: 1))
        #expect(second.pushes.map(\.kind) == [.start])
        #expect(second.decisions.codes().contains("superseded"))
        let recorded = run.tracker.record(.accepted, for: first, in: run.state, now: Fixtures.at(1))
        #expect(recorded.withdrawn == ["device:iphone"])
        #expect(recorded.state.activities[0].phase == .starting)
        #expect(recorded.state.activities[0].pending == nil)
        run.state = recorded.state
        run.accept = true
        let adopted = run.apply(Fixtures.token(minute: 2))
        #expect(adopted.pushes.map(\.kind) == [.update])
        #expect(try decodeApp(adopted.pushes[0]).0.currentStep == .preparing)
    }

    @Test func wrongAttributesTypeAndStartLimit() {
        var wrong = Fixtures.Run(
            context: TrackingContext(pushToStartTokens: [Fixtures.registration(type: "OtherAttributes")]))
        #expect(wrong.apply(Fixtures.status("confirmed", seq: 1, minute: 0)).pushes.isEmpty)
        #expect(wrong.decisions.codes().contains("start_wrong_attributes_type"))

        var limited = Fixtures.Run(
            context: TrackingContext(pushToStartTokens: [Fixtures.registration()], startRefusedDevices: ["iphone"]))
        #expect(limited.apply(Fixtures.status("confirmed", seq: 1, minute: 0)).pushes.isEmpty)
        #expect(limited.activity.phase == .pendingStart)
        #expect(limited.decisions.codes().contains("start_device_refused"))
        #expect(limited.state.nextSweepAt == Fixtures.at(5))
        limited.context.startRefusedDevices = []
        #expect(limited.sweep(at: 5).pushes.map(\.kind) == [.start])
    }

    @Test func aPushToStartTokenOfferedToAnOpenOrderStartsIt() {
        var run = Fixtures.Run()
        run.apply(Fixtures.status("preparing", seq: 1, minute: 0))
        let registration = Fixtures.registration(minute: 1)
        let event = InboundEvent.pushToStartToken(
            PushToStartTokenEvent(
                eventID: "p2s-late", occurredAt: Fixtures.at(1), userID: "u-991", deviceID: "iphone",
                token: registration.token, bundleID: registration.bundleID, environment: .sandbox,
                attributesType: "DeliveryAttributes"))
        let step = run.apply(event)
        #expect(step.pushes.map(\.kind) == [.start])
        #expect(run.state.pushToStartTokens.count == 1)
    }

    @Test func eventsForAnotherOrderAreIgnored() {
        let tracker = Fixtures.tracker()
        let state = OrderState(orderID: "B-1", now: Fixtures.t0)
        let step = tracker.apply(Fixtures.status("placed", seq: 1, minute: 0), to: state, now: Fixtures.t0)
        #expect(step.decisions.codes() == ["wrong_order"])
        #expect(step.state == state)
    }
}

@Suite("Tracking: alerts, budget, coalescing, timestamps")
struct AlertBudgetTests {
    static func active(_ tracker: OrderTracker = Fixtures.tracker()) -> Fixtures.Run {
        var run = Fixtures.Run(tracker: tracker)
        run.apply(Fixtures.token(minute: 0))
        run.apply(Fixtures.status("preparing", seq: 1, minute: 1, eta: (30, 40)))
        return run
    }

    @Test func etaSlipAlertsOnlyPastTheThresholdAndOncePerStep() {
        var run = Self.active()
        let small = run.apply(Fixtures.status("preparing", seq: 2, minute: 2, eta: (35, 49)))
        #expect(small.pushes.first?.alert == nil && small.pushes.first?.priority == 5)
        let big = run.apply(Fixtures.status("preparing", seq: 3, minute: 3, eta: (45, 60)))
        #expect(big.pushes.first?.alert.map { "\($0.title)" } == "Running late")
        #expect(big.pushes.first?.priority == 10)
        #expect(big.decisions.codes().contains("alert_eta_slip"))
        let again = run.apply(Fixtures.status("preparing", seq: 4, minute: 4, eta: (60, 80)))
        #expect(again.pushes.first?.alert == nil)
        #expect(again.decisions.codes().contains("alert_already_sent_for_step"))
        let earlier = run.apply(Fixtures.status("preparing", seq: 5, minute: 5, eta: (30, 40)))
        #expect(earlier.pushes.first?.alert == nil)
    }

    @Test func budgetSpentDowngradesNonEssentialAlerts() {
        var run = Self.active(Fixtures.tracker { $0.priority10PerHour = 1 })
        let slip = run.apply(Fixtures.status("preparing", seq: 2, minute: 2, eta: (50, 60)))
        #expect(slip.pushes.first?.priority == 10)
        let onTheWay = run.apply(Fixtures.status("out_for_delivery", seq: 3, minute: 3, courier: "Sam", eta: (50, 60)))
        #expect(onTheWay.pushes.first?.priority == 5)
        #expect(onTheWay.pushes.first?.alert == nil)
        #expect(onTheWay.decisions.codes().contains("budget_downgrade"))
        #expect(!run.activity.alertedSteps.contains("on_the_way"))
        let arriving = run.apply(Fixtures.status("arriving", seq: 4, minute: 4, courier: "Sam", eta: (50, 60)))
        #expect(arriving.pushes.first?.priority == 10)
        #expect(arriving.pushes.first?.alert != nil)
        let delivered = run.apply(Fixtures.status("delivered", seq: 5, minute: 5, courier: "Sam", eta: (50, 60)))
        #expect(delivered.pushes.first?.priority == 10)
        // An hour later the budget is back.
        var later = Self.active(Fixtures.tracker { $0.priority10PerHour = 1 })
        later.apply(Fixtures.status("preparing", seq: 2, minute: 2, eta: (50, 60)))
        #expect(
            later.apply(Fixtures.status("out_for_delivery", seq: 3, minute: 63, courier: "Sam")).pushes.first?.priority
                == 10)
    }

    @Test func alertCapPerActivity() {
        var run = Self.active(Fixtures.tracker { $0.alertCap = 1 })
        #expect(
            run.apply(Fixtures.status("out_for_delivery", seq: 2, minute: 2, courier: "Sam")).pushes.first?.alert != nil
        )
        let arriving = run.apply(Fixtures.status("arriving", seq: 3, minute: 3, courier: "Sam"))
        #expect(arriving.pushes.first?.alert == nil)
        #expect(arriving.pushes.first?.priority == 5)
        #expect(arriving.decisions.codes().contains("alert_cap_reached"))
    }

    @Test func alertTextsFallBackWhenValuesAreMissing() {
        var run = Self.active()
        let push = run.apply(Fixtures.status("out_for_delivery", seq: 2, minute: 2)).pushes.first
        #expect(push?.alert == AlertContent(title: .plain("Your order is on the way"), sound: "default"))
        var withCourier = Self.active()
        let eta = withCourier.apply(
            Fixtures.status("out_for_delivery", seq: 2, minute: 2, courier: "Zoë 🚲", eta: (20, 25.5)))
        #expect(
            eta.pushes.first?.alert
                == AlertContent(
                    title: .plain("Zoë 🚲 is on the way"), body: .plain("Arriving in about 24 min"), sound: "default"))
    }

    @Test func localisedAlerts() throws {
        let tracker = Fixtures.tracker {
            $0.statuses[.outForDelivery]?.texts = [
                AlertTemplate(
                    title: .localized(key: "COURIER_ON_THE_WAY_%@", args: ["{courier}"]),
                    body: .localized(key: "ETA_%@", args: ["{eta_window}"]))
            ]
        }
        var run = Self.active(tracker)
        let push = try #require(
            run.apply(Fixtures.status("out_for_delivery", seq: 2, minute: 2, courier: "Sam", eta: (20, 30))).pushes
                .first)
        let alert = try #require(try aps(push)["alert"] as? [String: Any])
        let title = try #require(alert["title"] as? [String: Any])
        #expect(title["loc-key"] as? String == "COURIER_ON_THE_WAY_%@")
        #expect(title["loc-args"] as? [String] == ["Sam"])
        #expect((alert["body"] as? [String: Any])?["loc-args"] as? [String] == ["18–28"])
        #expect(alert["sound"] as? String == "default")
    }

    @Test func onlyTheNewestStateWaitsAndItKeepsTheStepsAlert() throws {
        var run = Self.active()
        run.accept = false
        let first = try #require(
            run.apply(Fixtures.status("out_for_delivery", seq: 2, minute: 2, courier: "Sam", eta: (30, 40))).pushes
                .first)
        #expect(first.alert != nil)
        let second = try #require(
            run.apply(Fixtures.status("out_for_delivery", seq: 3, minute: 3, courier: "Sam", eta: (32, 42))).pushes
                .first)
        #expect(second.alert != nil)
        #expect(second.priority == 10)
        #expect(run.activity.alertCount == 1)
        #expect(run.activity.pending?.apnsID == second.apnsID)
        // The first one was in flight and accepted after all: it counts as sent, the second stays pending.
        let recorded = run.tracker.record(.accepted, for: first, in: run.state, now: Fixtures.at(3))
        #expect(recorded.state.activities[0].pending?.apnsID == second.apnsID)
        #expect(recorded.state.activities[0].sent?.statusKey == first.statusKey)
    }

    @Test func timestampsStrictlyIncreaseAndAreNeverInTheFuture() throws {
        var run = Self.active()
        let now = Fixtures.at(10)
        var state = run.state
        var last = run.activity.lastTimestamp
        for seq in 2...5 {
            let step = run.tracker.apply(
                Fixtures.status("preparing", seq: seq, minute: 2, id: "e\(seq)", eta: (30, 40 + Double(seq))),
                to: state,
                now: now)
            let push = try #require(step.pushes.first)
            #expect(push.timestamp > last)
            #expect(push.notBefore.timeIntervalSince1970 >= Double(push.timestamp))
            #expect(try aps(push)["timestamp"] as? Int == push.timestamp)
            if seq > 2 { #expect(step.decisions.codes().contains("timestamp_held")) }
            last = push.timestamp
            state = step.state
        }
        run.state = state
    }
}

@Suite("Tracking: outcomes and sweeps")
struct OutcomeSweepTests {
    static func pending() -> (Fixtures.Run, PlannedPush) {
        var run = Fixtures.Run()
        run.apply(Fixtures.token(minute: 0))
        run.accept = false
        let push = run.apply(Fixtures.status("out_for_delivery", seq: 1, minute: 10, courier: "Sam")).pushes[0]
        return (run, push)
    }

    /// The worker records a delivered current update in the activity's row only and settles it when it
    /// next reads the order: the state it settles to must be the one recording the answer gives.
    @Test func settlingADeliveredUpdateIsRecordingItsAcceptance() throws {
        var (run, push) = Self.pending()
        #expect(push.kind == .update && push.priority == 10)
        let recorded = run.tracker.record(.accepted, for: push, in: run.state, now: Fixtures.at(11))
        var settled = run.state
        let changed = settled.settleDelivered([push.apnsID])
        #expect(changed)
        #expect(settled == recorded.state)
        #expect(settled.activities[0].highPriorityLog == [push.timestamp])
        // Settling twice, or with ids of no pending push, changes nothing.
        let twice = settled.settleDelivered([push.apnsID])
        #expect(!twice)
        var untouched = run.state
        let unknown = untouched.settleDelivered(["00000000-0000-8000-8000-000000000000"])
        #expect(!unknown)
        #expect(untouched == run.state)

        // A priority-5 update on top of that, its log entry an hour and more old by now.
        run.state = recorded.state
        let quiet = try #require(
            run.apply(Fixtures.status("out_for_delivery", seq: 2, minute: 75, courier: "Sam", eta: (80, 90))).pushes
                .first)
        #expect(quiet.priority == 5)
        var again = run.state
        let settledQuiet = again.settleDelivered([quiet.apnsID])
        #expect(settledQuiet)
        #expect(again == run.tracker.record(.accepted, for: quiet, in: run.state, now: Fixtures.at(76)).state)
    }

    @Test func settlingLeavesStartsAndEndsToTheirRecord() throws {
        var run = Fixtures.Run(context: TransitionTests.p2s)
        run.accept = false
        let start = try #require(run.apply(Fixtures.status("confirmed", seq: 1, minute: 1)).pushes.first)
        #expect(start.kind == .start)
        var state = run.state
        let settledStart = state.settleDelivered([start.apnsID])
        #expect(!settledStart)
        #expect(state.activities[0].pending?.apnsID == start.apnsID)
    }

    @Test func unregisteredFailsTheActivityUnlessTheTokenIsNewer() {
        let (run, push) = Self.pending()
        let gone = run.tracker.record(
            .tokenRejected(reason: "Unregistered", unregisteredAt: Fixtures.at(5)), for: push, in: run.state,
            now: Fixtures.at(11))
        #expect(gone.state.activities[0].phase == .failed)
        #expect(gone.decisions.codes() == ["token_gone"])
        let kept = run.tracker.record(
            .tokenRejected(reason: "Unregistered", unregisteredAt: Fixtures.at(-5)), for: push, in: run.state,
            now: Fixtures.at(11))
        #expect(kept.state.activities[0].phase == .active)
        #expect(kept.state.activities[0].pending != nil)
        #expect(kept.decisions.codes() == ["token_gone_ignored"])
        let bad = run.tracker.record(
            .tokenRejected(reason: "BadDeviceToken", unregisteredAt: nil), for: push, in: run.state,
            now: Fixtures.at(11))
        #expect(bad.state.activities[0].phase == .failed)
    }

    @Test func aRejectedOldTokenAfterRotationIsIgnored() {
        var (run, push) = Self.pending()
        run.apply(Fixtures.token(Fixtures.rotatedHex, minute: 10.5))
        let step = run.tracker.record(
            .tokenRejected(reason: "Unregistered", unregisteredAt: nil), for: push, in: run.state, now: Fixtures.at(11))
        #expect(step.state.activities[0].phase == .active)
        #expect(step.decisions.codes() == ["token_gone_ignored"])
    }

    @Test func aGonePushToStartTokenIsRetired() {
        var run = Fixtures.Run(context: TrackingContext(pushToStartTokens: [Fixtures.registration()]))
        run.accept = false
        let start = run.apply(Fixtures.status("confirmed", seq: 1, minute: 0)).pushes[0]
        let step = run.tracker.record(
            .tokenRejected(reason: "ExpiredToken", unregisteredAt: nil), for: start, in: run.state, now: Fixtures.at(1))
        #expect(step.retiredPushToStartTokens.map(\.deviceID) == ["iphone"])
        #expect(step.state.pushToStartTokens.isEmpty)
        #expect(step.state.activities[0].phase == .failed)
    }

    @Test func retryLaterKeepsThePushAndRetryRebuildsIt() throws {
        let (run, push) = Self.pending()
        let kept = run.tracker.record(
            .retryLater(reason: "TooManyRequests"), for: push, in: run.state, now: Fixtures.at(11))
        #expect(kept.state.activities[0].pending?.apnsID == push.apnsID)
        #expect(kept.decisions.codes() == ["push_retry"])
        let rebuilt = run.tracker.retry(kept.state, now: Fixtures.at(20))
        let again = try #require(rebuilt.pushes.first)
        #expect(again.timestamp == Int(Fixtures.at(20).timeIntervalSince1970))
        #expect(again.apnsID != push.apnsID)
        #expect(again.alert != nil)
        #expect(rebuilt.state.activities[0].alertCount == 1)
    }

    @Test func droppedPushesAreGivenUp() {
        let (run, push) = Self.pending()
        let step = run.tracker.record(
            .dropped(reason: "PayloadTooLarge"), for: push, in: run.state, now: Fixtures.at(11))
        #expect(step.state.activities[0].pending == nil)
        #expect(step.state.activities[0].planned == step.state.activities[0].sent)
        #expect(step.decisions.codes() == ["push_dropped"])
    }

    @Test func sweepEndsActivitiesNearTheEightHourLimit() throws {
        var run = Fixtures.Run()
        run.apply(Fixtures.token(minute: 0))
        run.apply(Fixtures.status("preparing", seq: 1, minute: 1))
        #expect(run.sweep(at: 60).pushes.isEmpty)
        run.apply(Fixtures.status("preparing", seq: 2, minute: 200, eta: (300, 320)))
        let step = run.sweep(at: 450)
        let end = try #require(step.pushes.first)
        #expect(end.kind == .end)
        #expect(end.alert == nil)
        #expect(step.decisions.codes().contains("sweep_lifetime"))
        #expect(try aps(end)["dismissal-date"] as? Int == end.timestamp + 900)
        #expect(run.activity.phase == .ended)
    }

    @Test func sweepEndsIdleOrders() {
        var run = Fixtures.Run()
        run.apply(Fixtures.token(minute: 0))
        run.apply(Fixtures.status("preparing", seq: 1, minute: 1))
        #expect(run.state.nextSweepAt == Fixtures.at(241))
        #expect(run.sweep(at: 200).pushes.isEmpty)
        let step = run.sweep(at: 241)
        #expect(step.pushes.map(\.kind) == [.end])
        #expect(step.decisions.codes().contains("sweep_idle"))
    }

    @Test func sweepGivesUpStartsNeverAdopted() {
        var run = Fixtures.Run(context: TrackingContext(pushToStartTokens: [Fixtures.registration()]))
        run.apply(Fixtures.status("confirmed", seq: 1, minute: 0))
        #expect(run.activity.phase == .starting)
        #expect(run.state.nextSweepAt == Fixtures.at(30))
        run.sweep(at: 31)
        #expect(run.activity.phase == .failed)
        #expect(run.activity.closeReason == .decided(.sweepNeverAdopted))
    }

    @Test func anEndNotAcceptedIsSweptOnceMoreThenGivenUp() throws {
        var run = Fixtures.Run()
        run.apply(Fixtures.token(minute: 0))
        run.apply(Fixtures.status("preparing", seq: 1, minute: 1))
        run.accept = false
        let end = try #require(run.apply(Fixtures.status("delivered", seq: 2, minute: 5)).pushes.first)
        #expect(end.kind == .end)
        let dropped = run.tracker.record(
            .dropped(reason: "retries exhausted"), for: end, in: run.state, now: Fixtures.at(6))
        #expect(dropped.state.activities[0].phase == .ending)
        #expect(dropped.state.nextSweepAt == Fixtures.at(6))
        let swept = run.tracker.sweep(dropped.state, now: Fixtures.at(7))
        let again = try #require(swept.pushes.first)
        #expect(again.kind == .end)
        #expect(swept.decisions.codes().contains("sweep_terminal_not_ended"))
        #expect(swept.state.activities[0].closeReason == .decided(.sweepTerminalNotEnded))
        let accepted = run.tracker.record(.accepted, for: again, in: swept.state, now: Fixtures.at(8))
        #expect(accepted.state.activities[0].phase == .ended)
        #expect(accepted.state.activities[0].closeReason == .decided(.sweepTerminalNotEnded))
        let givenUp = run.tracker.record(
            .dropped(reason: "retries exhausted"), for: again, in: swept.state, now: Fixtures.at(8))
        #expect(givenUp.state.activities[0].phase == .ended)
        #expect(givenUp.state.nextSweepAt == nil)
    }

    @Test func anActivityOfAFinishedOrderIsEndedWhenItsTokenArrives() {
        var run = Fixtures.Run(context: TrackingContext(pushToStartTokens: [Fixtures.registration()]))
        run.apply(Fixtures.status("confirmed", seq: 1, minute: 0))
        run.apply(Fixtures.status("delivered", seq: 2, minute: 5))
        #expect(run.activity.phase == .starting)
        let step = run.apply(Fixtures.token(minute: 6))
        #expect(step.pushes.map(\.kind) == [.end])
        #expect(run.activity.phase == .ended)
    }
}
