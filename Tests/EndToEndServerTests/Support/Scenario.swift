import Foundation
import LiveDeliveryCore
import LiveDeliveryJSON
import LiveDeliveryTime

/// One event as published: routing key, message id and body.
struct ScenarioEvent: Sendable, Hashable {
    var type: String
    var eventID: String
    var orderID: String?
    var body: [UInt8]
}

/// What an order must look like once every event has been processed, whatever the arrival order.
struct OrderExpectation: Sendable {
    var orderID: String
    var activityID: String
    var deviceToken: String
    var finalStatus: String
    /// `currentStep` of the final content-state.
    var finalStep: String
    var finalDriver: String
    /// `estimatedDeliveryTime` as ActivityKit encodes it: seconds since 2001-01-01.
    var finalETA: [Double]
}

/// Generates realistic delivery event streams for many orders, in order, with their expected outcome.
///
/// Every order has an app-started activity (its `activity.token` arrives after the order is confirmed) and
/// ends delivered (four in five) or cancelled. The terminal event carries all details (courier, ETA), so the
/// final content-state does not depend on which older events arrived before it; a cancellation comes right
/// after `confirmed`, so the step it keeps is `confirmed` in any arrival order.
struct Scenario: Sendable {
    var events: [ScenarioEvent] = []
    var orders: [OrderExpectation] = []

    static let bundleID = "com.example.pizza"
    private static let appleEpoch = 978_307_200.0

    static func deliveries(orders count: Int, prefix: String, now: Date = Date()) -> Scenario {
        var scenario = Scenario()
        let base = now.addingTimeInterval(-20 * 60)
        for index in 0..<count {
            let orderID = "\(prefix)-\(index)"
            let userID = "u-\(prefix)-\(index)"
            let activityID = UUID().uuidString
            let token = (0..<32).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined()
            let cancelled = index % 5 == 4
            let courier = ["Sam", "Alex", "Kim", "Noor", "Lee"][index % 5]
            var clock = base.addingTimeInterval(Double(index % 7))
            var sequence = 0
            func tick() -> Date {
                clock = clock.addingTimeInterval(60)
                return clock
            }
            func eta(_ minutes: Double) -> (Date, Date) {
                (now.addingTimeInterval(minutes * 60), now.addingTimeInterval((minutes + 10) * 60))
            }
            func status(_ status: String, courier: String? = nil, eta: (Date, Date)? = nil) {
                sequence += 1
                var body: [String: Any] = [
                    "type": "order.status", "version": 1, "event_id": "\(orderID)-s\(sequence)",
                    "occurred_at": rfc3339(tick()), "order_id": orderID, "user_id": userID,
                    "sequence": sequence, "status": status, "order_number": 10_000 + index,
                    "merchant": ["name": "Merchant \(index % 9)"],
                ]
                if let courier { body["courier"] = ["name": courier] }
                if let eta { body["eta"] = ["earliest": rfc3339(eta.0), "latest": rfc3339(eta.1)] }
                scenario.events.append(event(body, type: "order.status", id: "\(orderID)-s\(sequence)", order: orderID))
            }
            status("placed")
            status("confirmed")
            let tokenID = "\(orderID)-tok"
            scenario.events.append(
                event(
                    [
                        "type": "activity.token", "version": 1, "event_id": tokenID, "occurred_at": rfc3339(tick()),
                        "order_id": orderID, "activity_id": activityID, "device_id": "device-\(orderID)",
                        "token": token, "bundle_id": bundleID, "environment": "production",
                    ], type: "activity.token", id: tokenID, order: orderID))
            let finalETA: (Date, Date)
            let finalDriver: String
            if cancelled {
                finalETA = eta(40)
                finalDriver = ""
                status("cancelled", eta: finalETA)
            } else {
                status("preparing", eta: eta(30))
                status("preparing", eta: eta(35))
                status("picked_up", courier: courier, eta: eta(35))
                status("out_for_delivery", courier: courier, eta: eta(25))
                status("out_for_delivery", courier: courier, eta: eta(45))
                status("arriving", courier: courier, eta: eta(5))
                finalETA = eta(2)
                finalDriver = courier
                status("delivered", courier: courier, eta: finalETA)
            }
            scenario.orders.append(
                OrderExpectation(
                    orderID: orderID, activityID: activityID, deviceToken: token,
                    finalStatus: cancelled ? "cancelled" : "delivered",
                    finalStep: cancelled ? "confirmed" : "delivered",
                    finalDriver: finalDriver,
                    // What the events say (whole seconds as the formatter wrote them; it may round a time a
                    // hair before the next second up), as seconds since 2001.
                    finalETA: [finalETA.0, finalETA.1].map { date in
                        (RFC3339.parse(rfc3339(date)) ?? date).timeIntervalSince1970 - appleEpoch
                    }))
        }
        return scenario
    }

    /// The events in a random order, with a fraction of them published again at a random later position.
    func shuffled(duplicateRate: Double, seed: UInt64) -> [ScenarioEvent] {
        var generator = SplitMix64(seed: seed)
        var messages = events.shuffled(using: &generator)
        var duplicates: [(Int, ScenarioEvent)] = []
        for (index, event) in messages.enumerated() where Double.random(in: 0..<1, using: &generator) < duplicateRate {
            duplicates.append((Int.random(in: index...messages.count, using: &generator), event))
        }
        for (position, event) in duplicates.sorted(by: { $0.0 > $1.0 }) {
            messages.insert(event, at: min(position + 1, messages.count))
        }
        return messages
    }

    private static func event(_ body: [String: Any], type: String, id: String, order: String?) -> ScenarioEvent {
        let data = try! JSONSerialization.data(withJSONObject: body, options: [.sortedKeys, .withoutEscapingSlashes])
        return ScenarioEvent(type: type, eventID: id, orderID: order, body: Array(data))
    }
}

func rfc3339(_ date: Date) -> String {
    let formatter = ISO8601DateFormatter()
    formatter.formatOptions = [.withInternetDateTime]
    return formatter.string(from: date)
}
