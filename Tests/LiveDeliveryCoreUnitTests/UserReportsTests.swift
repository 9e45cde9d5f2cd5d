import Foundation
import Testing

@testable import LiveDeliveryCore

/// A user's reports (push-to-start tokens, device settings): newest per device, and the orders they reach.
@Suite("User reports")
struct UserReportsTests {
    static func pushToStart(device: String, hex: String, minute: Double) -> InboundEvent {
        Fixtures.decode([
            "type": "activity.push_to_start_token", "version": 1, "event_id": "evt-p2s-\(device)-\(minute)",
            "occurred_at": Fixtures.iso(minute), "user_id": "u-991", "device_id": device, "token": hex,
            "bundle_id": "com.example.pizza", "environment": "sandbox", "attributes_type": "DeliveryAttributes",
        ])
    }

    static func settings(device: String, enabled: Bool, minute: Double) -> InboundEvent {
        Fixtures.decode([
            "type": "activity.settings", "version": 1, "event_id": "evt-settings-\(device)-\(minute)",
            "occurred_at": Fixtures.iso(minute), "user_id": "u-991", "device_id": device,
            "activities_enabled": enabled, "frequent_pushes_enabled": false,
        ])
    }

    @Test("the newest report per device stands, whatever order they arrive in; an older one changes nothing")
    func newestPerDevice() {
        var reports = UserReports()
        let old = String(repeating: "a1", count: 32)
        let new = String(repeating: "b2", count: 32)
        let filed1 = reports.file(Self.pushToStart(device: "iphone", hex: new, minute: 5))
        #expect(filed1)
        let filed2 = reports.file(Self.pushToStart(device: "iphone", hex: old, minute: 1))  // older: ignored
        #expect(!filed2)
        let filed3 = reports.file(Self.pushToStart(device: "ipad", hex: old, minute: 1))  // another device
        #expect(filed3)
        #expect(reports.tokens["u-991"]?.map(\.deviceID) == ["iphone", "ipad"])
        #expect(reports.tokens["u-991"]?.first?.token.hex == new)

        let filed4 = reports.file(Self.settings(device: "iphone", enabled: false, minute: 7))
        #expect(filed4)
        let filed5 = reports.file(Self.settings(device: "iphone", enabled: true, minute: 6))
        #expect(!filed5)
        #expect(reports.settings["u-991"]?["iphone"]?.activitiesEnabled == false)
        let filed6 = reports.file(Self.settings(device: "iphone", enabled: true, minute: 8))
        #expect(filed6)
        #expect(reports.settings["u-991"]?["iphone"]?.activitiesEnabled == true)
    }

    @Test("an order holds registrations for at most its room of devices; a known device is still replaced")
    func room() {
        var registrations: [PushToStartRegistration] = []
        let filed7 = registrations.file(Fixtures.registration(device: "a", minute: 1), room: 1)
        #expect(filed7)
        let filed8 = registrations.file(Fixtures.registration(device: "b", minute: 2), room: 1)
        #expect(!filed8)
        let filed9 = registrations.file(Fixtures.registration(device: "a", minute: 3), room: 1)
        #expect(filed9)
        #expect(registrations.count == 1)
    }

    @Test("a user's report reaches each of the user's open orders in id order; any other event its own order")
    func ordersReached() {
        let open = { (user: String) in user == "u-991" ? ["B-2", "A-1"] : [] }
        let token = Self.pushToStart(device: "iphone", hex: String(repeating: "a1", count: 32), minute: 1)
        #expect(token.orders(openOrdersOfUser: open) == ["A-1", "B-2"])
        #expect(Self.settings(device: "iphone", enabled: true, minute: 1).orders(openOrdersOfUser: { _ in [] }).isEmpty)
        #expect(Fixtures.status("confirmed", seq: 1, minute: 0).orders(openOrdersOfUser: open) == ["A-10023"])
    }
}
