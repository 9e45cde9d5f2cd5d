public import Foundation

#if canImport(ActivityKit) && os(iOS)
public import ActivityKit
#endif

/// The default contract's attributes: what the worker sends in `aps.attributes` when it starts an activity
/// remotely (push-to-start), and what the app passes to `Activity.request` when it starts one itself.
///
/// ActivityKit decodes `attributes` and `content-state` with a default `JSONDecoder`: keys are these property
/// names, a `Date` is seconds since 2001-01-01, and a `ClosedRange<Date>` is the array `[lower, upper]`. The
/// worker's default content mapping (Config/content-mapping.json) writes exactly that.
public struct DeliveryAttributes: Codable, Hashable, Sendable {
    /// The order's number, shown to the person (`order_number` of `order.status`).
    public var orderNumber: Int
    /// The merchant's name (`merchant.name` of `order.status`).
    public var restaurantName: String

    /// What each update shows.
    public struct ContentState: Codable, Hashable, Sendable {
        /// The courier's name (`courier.name` of `order.status`), empty until one is known.
        public var driverName: String
        /// The estimated delivery window (`eta.earliest`…`eta.latest` of `order.status`).
        public var estimatedDeliveryTime: ClosedRange<Date>
        /// The step of the delivery, from the order's status.
        public var currentStep: DeliveryStep

        /// A content state.
        public init(driverName: String, estimatedDeliveryTime: ClosedRange<Date>, currentStep: DeliveryStep) {
            self.driverName = driverName
            self.estimatedDeliveryTime = estimatedDeliveryTime
            self.currentStep = currentStep
        }
    }

    /// The attributes of one order's activity.
    public init(orderNumber: Int, restaurantName: String) {
        self.orderNumber = orderNumber
        self.restaurantName = restaurantName
    }

    /// The attributes type's name, as an `activity.push_to_start_token` reports it (`attributes_type`) and
    /// the worker sends it in `aps.attributes-type`.
    public static let typeName = "DeliveryAttributes"
}

/// The steps a delivery shows, in order. The worker's status → step table (Config/content-mapping.json)
/// maps each order status to one of them.
public enum DeliveryStep: String, Codable, Hashable, CaseIterable, Sendable {
    /// The merchant accepted the order.
    case confirmed
    /// The merchant is preparing it.
    case preparing
    /// A courier picked it up.
    case pickedUp
    /// It is on the way.
    case delivering
    /// It was delivered.
    case delivered
}

#if canImport(ActivityKit) && os(iOS)
@available(iOS 16.1, *)
extension DeliveryAttributes: ActivityAttributes {}
#endif
