import LiveDeliveryCore
import Testing

@testable import LiveDelivery

/// What a cell's worker refuses (docs/scaling.md, Cells): an order's event that did not come by its own
/// `order_id` header.
@Suite("Cells: the routing header")
struct OrderRoutingTests {
    static func decode(_ body: String) throws -> InboundEvent {
        try EventDecoder.decode(Array(body.utf8)).get()
    }

    static let status = """
        {"type":"order.status","version":1,"event_id":"e1","occurred_at":"2026-11-21T10:00:00Z",\
        "order_id":"A-1","user_id":"u-1","sequence":1,"status":"placed"}
        """
    static let followers = """
        {"type":"order.followers","version":1,"event_id":"e2","occurred_at":"2026-11-21T10:00:00Z",\
        "order_id":"A-1","followers":["u-2"]}
        """
    static let settings = """
        {"type":"activity.settings","version":1,"event_id":"e3","occurred_at":"2026-11-21T10:00:00Z",\
        "user_id":"u-1","device_id":"d-1","activities_enabled":true,"frequent_pushes_enabled":false}
        """

    @Test func anOrdersEventNeedsItsOwnOrderAsTheHeader() throws {
        for body in [Self.status, Self.followers] {
            let event = try Self.decode(body)
            #expect(OrderRouting.refusal(event, headers: ["order_id": "A-1"]) == nil)
            let missing = try #require(OrderRouting.refusal(event, headers: [:]))
            #expect(missing.reason == .cellRoutingHeader && missing.field == "order_id")
            #expect(missing.message.contains("none was set"))
            let other = try #require(OrderRouting.refusal(event, headers: ["order_id": "B-2"]))
            #expect(other.reason == .cellRoutingHeader && other.message.contains("differs"))
            #expect(!other.message.contains("B-2"), "the header's value is not echoed")
        }
    }

    @Test func aUsersEventNeedsNone() throws {
        #expect(OrderRouting.refusal(try Self.decode(Self.settings), headers: [:]) == nil)
        #expect(OrderRouting.everyCell == [.pushToStartToken, .activitySettings])
    }
}
