import APNsSimulator
import Foundation
import TestSupport
import Testing
import WorkerHarness

/// What the worker promises about when and how it pushes, seen at the device's end (apns-sim's records).
@Suite(.timeLimit(.minutes(5)))
struct PushPolicyTests {
    @Test("a push APNs refuses with a retry-after header is sent again no sooner than that delay")
    func retryWaitsForAPNsDelay() async throws {
        try await Fixture.with("retry-after") { fixture in
            let scenario = Scenario.deliveries(orders: 1, prefix: fixture.name)
            let token = scenario.orders[0].deviceToken
            // The first push to the device: 429 with APNs' own delay of 3 s. The worker's own backoff would
            // retry within a tenth of a second.
            fixture.simulator.injectFault(
                FaultRule(status: 429, reason: "TooManyRequests", count: 1, token: token, retryAfter: 3))
            try await fixture.startWorker(
                "w1",
                extraEnvironment: [
                    "LIVEDELIVERY_DISPATCHER_BACKOFF_BASE_SECONDS": "0.01",
                    "LIVEDELIVERY_DISPATCHER_BACKOFF_MAX_SECONDS": "60",
                ])
            // The events up to the token: one push (the activity's first update), refused once.
            try await fixture.publish(Array(scenario.events.prefix(3)))
            let records = try await eventuallyValue("the push to be accepted after its 429", timeout: .seconds(120)) {
                () -> [PushRecord]? in
                let records = fixture.pushes(token: token)
                return records.contains { $0.status == 200 } ? records : nil
            }
            try #require(records.count == 2, "\(records.map(\.status))")
            #expect(records[0].status == 429 && records[1].status == 200)
            let waited = records[1].receivedAt.timeIntervalSince(records[0].receivedAt)
            #expect(waited >= 3, "sent again after \(waited) s")
            // The attempt is on record with its reason.
            #expect(
                try await fixture.strings("SELECT reason FROM push_attempts WHERE status = 429") == ["TooManyRequests"])
        }
    }

    @Test("the priority-10 budget per activity and hour is never overspent: beyond it only essential steps alert")
    func priority10BudgetHoldsAtTheDevice() async throws {
        try await Fixture.with("p10-budget") { fixture in
            // The shipped policy with a budget of one priority-10 push per activity and hour, and alerts on
            // `preparing` and `picked_up` too: three routine alerts (with `on_the_way`) want priority 10. The
            // essential steps (`arriving`, and the end) keep it when the budget is spent (Config/policy.json).
            var statuses: [String: [String: Any]] = [:]
            let config = try fixture.config { policy in
                policy["budget"] = ["priority10PerHour": 1]
                statuses = policy["statuses"] as? [String: [String: Any]] ?? [:]
                for status in ["preparing", "picked_up"] { statuses[status]?["alert"] = true }
                policy["statuses"] = statuses
            }
            // The relevance scores of the essential statuses tell their pushes apart at the device.
            let essential = Set(
                statuses.values.filter { $0["essential"] as? Bool == true }.compactMap { $0["relevance"] as? Int })
            try await fixture.startWorker("w1", extraEnvironment: ["LIVEDELIVERY_CONFIG_DIR": config.path])

            // Step by step, each step's pushes sent before the next is published (events published at once
            // would coalesce into one push per activity).
            let scenario = Scenario.deliveries(orders: 3, prefix: fixture.name)
            let byOrder = Dictionary(grouping: scenario.events, by: \.orderID)
            for step in 0..<(byOrder.values.map(\.count).max() ?? 0) {
                let events = byOrder.values.compactMap { $0.count > step ? $0[step] : nil }
                try await fixture.publish(events)
                try await fixture.waitUntilSettled(eventIDs: Set(events.map(\.eventID)))
                try await eventually("step \(step)'s pushes to be sent", timeout: .seconds(60)) {
                    try await fixture.count("SELECT count(*) FROM pushes_waiting") == 0
                }
            }
            try await fixture.waitUntilAllEnded(scenario)

            for order in scenario.orders {
                let updates = fixture.pushes(token: order.deviceToken).compactMap(Self.aps).filter {
                    $0.status == 200 && $0.event == "update"
                }
                let routine = updates.filter { $0.priority == 10 && !essential.contains($0.relevance) }
                #expect(routine.count == 1, "\(order.orderID): \(routine.count) routine priority-10 updates, budget 1")
                #expect(updates.contains { $0.priority == 10 && essential.contains($0.relevance) }, "arriving kept 10")
            }
            // The budget bound: an alert that wanted priority 10 went at 5, without its alert.
            #expect(
                try await fixture.count("SELECT count(*) FROM timeline_decisions WHERE code = 'budget_downgrade'") > 0)
            try await fixture.verifyConverged(scenario)
        }
    }

    /// What a push carried: its answer, priority, `aps.event` and `aps.relevance-score`.
    static func aps(_ record: PushRecord) -> (status: Int, priority: Int, event: String, relevance: Int)? {
        guard let payload = try? JSONSerialization.jsonObject(with: Data(record.payload.utf8)) as? [String: Any],
            let aps = payload["aps"] as? [String: Any], let event = aps["event"] as? String
        else { return nil }
        return (record.status, record.priority ?? 10, event, (aps["relevance-score"] as? NSNumber)?.intValue ?? -1)
    }
}
