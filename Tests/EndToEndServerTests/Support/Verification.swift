import APNsSimulator
import Foundation
import LiveDeliveryJSON
import Testing

/// Device-side verdicts that must never happen for a correct worker: an older state after a newer one, an
/// update after the end, a payload the app could not decode, a malformed or future-dated push.
let forbiddenVerdicts: Set<DeviceVerdict.Kind> = [
    .staleTimestamp, .afterEnd, .wouldNotDecode, .invalidPayload, .futureTimestamp, .notLiveActivity,
]

extension Fixture {
    /// Waits until every order's activity has ended on its simulated device.
    func waitUntilAllEnded(_ scenario: Scenario, timeout: Duration = .seconds(240)) async throws {
        try await eventually("every activity to end on its device", timeout: timeout, every: .milliseconds(250)) {
            scenario.orders.allSatisfy { order in
                simulator.device(token: order.deviceToken)?.activities.contains { $0.ended } ?? false
            }
        }
    }

    /// Checks the converged outcome: the device shows each order's newest content and has ended the activity;
    /// per token, accepted pushes carry strictly increasing `aps.timestamp` (never older after newer); no
    /// forbidden verdict, except for an identical resend after a crash, which must change nothing shown; the database agrees (every activity ended, every order in its final status); and the
    /// inbox holds each published event exactly once.
    /// Without `database`, only what the devices show and were sent (orders in several cells' databases).
    func verifyConverged(
        _ scenario: Scenario, database: Bool = true, sourceLocation: SourceLocation = #_sourceLocation
    ) async throws {
        for order in scenario.orders {
            let device = simulator.device(token: order.deviceToken)
            let activity = try #require(
                device?.activities.first, "no activity for \(order.orderID)", sourceLocation: sourceLocation)
            #expect(
                device?.activities.count == 1, "\(order.orderID): one activity per token",
                sourceLocation: sourceLocation)
            #expect(activity.ended, "\(order.orderID) has not ended", sourceLocation: sourceLocation)
            let state = activity.contentState
            #expect(
                state?["currentStep"]?.stringValue == order.finalStep, "\(order.orderID) step",
                sourceLocation: sourceLocation)
            #expect(
                state?["driverName"]?.stringValue == order.finalDriver, "\(order.orderID) driver",
                sourceLocation: sourceLocation)
            if case .array(let range)? = state?["estimatedDeliveryTime"] {
                #expect(
                    range.compactMap(\.numberValue) == order.finalETA, "\(order.orderID) ETA",
                    sourceLocation: sourceLocation)
            } else {
                Issue.record("\(order.orderID): no estimatedDeliveryTime range", sourceLocation: sourceLocation)
            }

            var previous: Double?
            var applied = Set<String>()
            var accepted: [String: Double?] = [:]  // apns-id → aps.timestamp of pushes APNs accepted
            for push in pushes(token: order.deviceToken) {
                // A worker killed (or cut off from its database) after APNs accepted a push but before it
                // recorded the outcome: once the claim's lease ends, a worker sends the identical push again
                // (at-least-once towards APNs). It must be the very same payload, and it must change nothing
                // the phone shows: either the device drops it (something newer is shown, or the activity
                // ended), or nothing newer came in between, and the device shows the same content-state
                // again under the same timestamp (a timestamp that is not older is applied).
                if push.status == 200, let original = accepted[push.apnsID] {
                    #expect(
                        apsTimestamp(push.payload) == original,
                        "\(order.orderID): a resend of apns-id \(push.apnsID) changed its payload",
                        sourceLocation: sourceLocation)
                    let reapplied = push.verdict.kind == .displayed && original != nil && original == previous
                    #expect(
                        reapplied || [.staleTimestamp, .afterEnd].contains(push.verdict.kind),
                        "\(order.orderID): a resend of apns-id \(push.apnsID) was applied (\(push.verdict.kind.rawValue)) over newer content",
                        sourceLocation: sourceLocation)
                    continue
                }
                #expect(
                    !forbiddenVerdicts.contains(push.verdict.kind),
                    "\(order.orderID): push #\(push.sequence) \(push.verdict.kind.rawValue) \(push.verdict.detail ?? "")",
                    sourceLocation: sourceLocation)
                guard push.status == 200 else { continue }
                let timestamp = apsTimestamp(push.payload)
                accepted[push.apnsID] = timestamp
                if let previous, let timestamp {
                    #expect(
                        timestamp > previous, "\(order.orderID): timestamp \(timestamp) after \(previous)",
                        sourceLocation: sourceLocation)
                }
                previous = timestamp ?? previous
                if [.displayed, .started, .ended].contains(push.verdict.kind) {
                    #expect(
                        applied.insert(push.apnsID).inserted, "\(order.orderID): apns-id \(push.apnsID) applied twice",
                        sourceLocation: sourceLocation)
                }
            }
        }
        guard database else { return }
        let open = try await strings("SELECT activity_key || ' ' || state FROM activities WHERE state <> 'ended'")
        #expect(open.isEmpty, "activities not ended: \(open.prefix(5))", sourceLocation: sourceLocation)
        let statuses = Dictionary(
            uniqueKeysWithValues: try await strings("SELECT order_id || '=' || status FROM orders").map {
                let parts = $0.split(separator: "=", maxSplits: 1).map(String.init)
                return (parts[0], parts.count > 1 ? parts[1] : "")
            })
        for order in scenario.orders {
            #expect(
                statuses[order.orderID] == order.finalStatus, "\(order.orderID) status in orders",
                sourceLocation: sourceLocation)
        }
        // Every published event exactly once (event_id is the inbox's key: a duplicate would have failed to insert).
        let published = Set(scenario.events.map(\.eventID))
        let recorded = try await inboxEventIDs().filter { published.contains($0) }
        #expect(
            recorded.count == published.count,
            "\(published.count - Set(recorded).count) published events missing from the inbox",
            sourceLocation: sourceLocation)
        #expect(Set(recorded).count == recorded.count, "the inbox holds an event twice", sourceLocation: sourceLocation)
    }
}

/// `aps.timestamp` of a payload.
func apsTimestamp(_ payload: String) -> Double? {
    guard let object = try? JSONSerialization.jsonObject(with: Data(payload.utf8)) as? [String: Any],
        let aps = object["aps"] as? [String: Any]
    else { return nil }
    return (aps["timestamp"] as? NSNumber)?.doubleValue
}
