import Foundation
package import LiveDelivery

/// Event bodies as upstream publishes them (docs/events.md), for the tests that feed the worker's parts.
package enum Events {
    /// The app of the shipped configuration (`Config/apns-apps.json`).
    package static let bundleID = "com.example.delivery"

    /// A delivery window, as `order.status` carries it.
    package struct ETA: Sendable {
        package var earliest: String
        package var latest: String
        package static let sample = ETA(earliest: "2026-11-21T10:20:00Z", latest: "2026-11-21T10:30:00Z")
    }

    /// A random 32-byte device token in hex.
    package static func token() -> String {
        (0..<32).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined()
    }

    package static func status(
        _ orderID: String, _ status: String, sequence: Int, user: String = "u-1", courier: String? = nil,
        eta: ETA? = nil, id: String = UUID().uuidString, at: String = "2026-11-21T10:04:05Z"
    ) -> InboundMessage {
        var fields = [
            "\"type\":\"order.status\"", "\"version\":1", "\"event_id\":\"\(id)\"", "\"occurred_at\":\"\(at)\"",
            "\"order_id\":\"\(orderID)\"", "\"user_id\":\"\(user)\"", "\"sequence\":\(sequence)",
            "\"status\":\"\(status)\"", "\"order_number\":42", "\"merchant\":{\"name\":\"Pizza Place\"}",
        ]
        if let courier { fields.append("\"courier\":{\"name\":\"\(courier)\"}") }
        if let eta { fields.append("\"eta\":{\"earliest\":\"\(eta.earliest)\",\"latest\":\"\(eta.latest)\"}") }
        return InboundMessage(
            body: Array("{\(fields.joined(separator: ","))}".utf8), routingKey: "order.status", messageID: id)
    }

    package static func activityToken(
        _ orderID: String, activity: String, token: String, id: String = UUID().uuidString,
        at: String = "2026-11-21T10:04:06Z", bundleID: String = bundleID, environment: String = "production"
    ) -> InboundMessage {
        let body = """
            {"type":"activity.token","version":1,"event_id":"\(id)","occurred_at":"\(at)","order_id":"\(orderID)",\
            "activity_id":"\(activity)","device_id":"d-\(activity)","token":"\(token)","bundle_id":"\(bundleID)",\
            "environment":"\(environment)"}
            """
        return InboundMessage(body: Array(body.utf8), routingKey: "activity.token", messageID: id)
    }

    /// An `activity.push_to_start_token` of `user`'s `device` (the shipped attributes type).
    package static func pushToStart(
        user: String, device: String, token: String, id: String = UUID().uuidString,
        at: String = "2026-11-21T10:00:00Z"
    ) -> InboundMessage {
        let body = """
            {"type":"activity.push_to_start_token","version":1,"event_id":"\(id)","occurred_at":"\(at)",\
            "user_id":"\(user)","device_id":"\(device)","token":"\(token)","bundle_id":"\(bundleID)",\
            "environment":"production","attributes_type":"DeliveryAttributes"}
            """
        return InboundMessage(body: Array(body.utf8), routingKey: "activity.push_to_start_token", messageID: id)
    }

    /// An `activity.settings` of `user`'s `device`: the person's Live Activity settings as the app read them.
    package static func settings(
        user: String, device: String, activities: Bool = true, frequent: Bool = false, id: String = UUID().uuidString,
        at: String = "2026-11-21T10:05:00Z"
    ) -> InboundMessage {
        let body = """
            {"type":"activity.settings","version":1,"event_id":"\(id)","occurred_at":"\(at)",\
            "user_id":"\(user)","device_id":"\(device)","activities_enabled":\(activities),\
            "frequent_pushes_enabled":\(frequent)}
            """
        return InboundMessage(body: Array(body.utf8), routingKey: "activity.settings", messageID: id)
    }
}
