import Foundation

// A test copy of the reference app's types (events.md, "The default app contract"), with `Codable`
// in place of `ActivityAttributes`. Payloads are proven by decoding into these with a default
// `JSONDecoder`, exactly as ActivityKit does.

struct DeliveryAttributes: Codable, Hashable {
    var orderNumber: Int
    var restaurantName: String
    struct ContentState: Codable, Hashable {
        var driverName: String
        var estimatedDeliveryTime: ClosedRange<Date>
        var currentStep: DeliveryStep
    }
}

enum DeliveryStep: String, Codable, Hashable, CaseIterable {
    case confirmed, preparing, pickedUp, delivering, delivered
}
