package import Foundation

/// `order.status`: an order moved, or its details changed. Every optional field is nil when it was
/// absent, `null`, or an empty (or all-whitespace) string.
package struct OrderStatusEvent: Hashable, Sendable, Codable {
    package var eventID: String
    package var occurredAt: Date
    package var orderID: String
    package var userID: String
    package var sequence: Int?
    package var status: OrderStatus
    package var orderNumber: Int?
    package var merchantName: String?
    package var courierName: String?
    package var eta: ETAWindow?

    package init(
        eventID: String, occurredAt: Date, orderID: String, userID: String, sequence: Int? = nil,
        status: OrderStatus, orderNumber: Int? = nil, merchantName: String? = nil, courierName: String? = nil,
        eta: ETAWindow? = nil
    ) {
        self.eventID = eventID
        self.occurredAt = occurredAt
        self.orderID = orderID
        self.userID = userID
        self.sequence = sequence
        self.status = status
        self.orderNumber = orderNumber
        self.merchantName = merchantName
        self.courierName = courierName
        self.eta = eta
    }

    package var key: EventKey { EventKey(sequence: sequence, occurredAt: occurredAt, eventID: eventID) }
}

/// `activity.token`: the app reports (or rotates) an activity's per-activity update token.
package struct ActivityTokenEvent: Hashable, Sendable, Codable {
    package var eventID: String
    package var occurredAt: Date
    package var orderID: String
    package var activityID: String
    package var deviceID: String?
    package var token: DeviceToken
    package var bundleID: String
    package var environment: APNsEnvironment

    package init(
        eventID: String, occurredAt: Date, orderID: String, activityID: String, deviceID: String? = nil,
        token: DeviceToken, bundleID: String, environment: APNsEnvironment
    ) {
        self.eventID = eventID
        self.occurredAt = occurredAt
        self.orderID = orderID
        self.activityID = activityID
        self.deviceID = deviceID
        self.token = token
        self.bundleID = bundleID
        self.environment = environment
    }

    package var key: EventKey { EventKey(sequence: nil, occurredAt: occurredAt, eventID: eventID) }
}

/// `activity.push_to_start_token`: the app reports a push-to-start token for one device of a user.
package struct PushToStartTokenEvent: Hashable, Sendable, Codable {
    package var eventID: String
    package var occurredAt: Date
    package var userID: String
    package var deviceID: String
    package var token: DeviceToken
    package var bundleID: String
    package var environment: APNsEnvironment
    package var attributesType: String

    package init(
        eventID: String, occurredAt: Date, userID: String, deviceID: String, token: DeviceToken,
        bundleID: String, environment: APNsEnvironment, attributesType: String
    ) {
        self.eventID = eventID
        self.occurredAt = occurredAt
        self.userID = userID
        self.deviceID = deviceID
        self.token = token
        self.bundleID = bundleID
        self.environment = environment
        self.attributesType = attributesType
    }

    package var key: EventKey { EventKey(sequence: nil, occurredAt: occurredAt, eventID: eventID) }

    /// The registration this event makes (what the worker stores per user and device).
    package var registration: PushToStartRegistration {
        PushToStartRegistration(
            userID: userID, deviceID: deviceID, token: token, bundleID: bundleID, environment: environment,
            attributesType: attributesType, key: key
        )
    }
}

/// `activity.ended`: the app reports that an activity ended on the device.
package struct ActivityEndedEvent: Hashable, Sendable, Codable {
    package var eventID: String
    package var occurredAt: Date
    package var orderID: String
    package var activityID: String
    package var reason: ActivityEndReason

    package init(eventID: String, occurredAt: Date, orderID: String, activityID: String, reason: ActivityEndReason) {
        self.eventID = eventID
        self.occurredAt = occurredAt
        self.orderID = orderID
        self.activityID = activityID
        self.reason = reason
    }
}

/// One validated inbound event.
package enum InboundEvent: Hashable, Sendable, Codable {
    case orderStatus(OrderStatusEvent)
    case activityToken(ActivityTokenEvent)
    case pushToStartToken(PushToStartTokenEvent)
    case activityEnded(ActivityEndedEvent)

    package var type: EventType {
        switch self {
        case .orderStatus: .orderStatus
        case .activityToken: .activityToken
        case .pushToStartToken: .pushToStartToken
        case .activityEnded: .activityEnded
        }
    }

    package var eventID: String {
        switch self {
        case .orderStatus(let e): e.eventID
        case .activityToken(let e): e.eventID
        case .pushToStartToken(let e): e.eventID
        case .activityEnded(let e): e.eventID
        }
    }

    package var occurredAt: Date {
        switch self {
        case .orderStatus(let e): e.occurredAt
        case .activityToken(let e): e.occurredAt
        case .pushToStartToken(let e): e.occurredAt
        case .activityEnded(let e): e.occurredAt
        }
    }

    /// The order the event belongs to; nil for push-to-start tokens (they belong to a user).
    package var orderID: String? {
        switch self {
        case .orderStatus(let e): e.orderID
        case .activityToken(let e): e.orderID
        case .pushToStartToken: nil
        case .activityEnded(let e): e.orderID
        }
    }

    /// The user the event names, if any (order.status and push-to-start tokens).
    package var userID: String? {
        switch self {
        case .orderStatus(let e): e.userID
        case .pushToStartToken(let e): e.userID
        case .activityToken, .activityEnded: nil
        }
    }
}

/// A push-to-start token on file for one device of a user.
package struct PushToStartRegistration: Hashable, Sendable, Codable {
    package var userID: String
    package var deviceID: String
    package var token: DeviceToken
    package var bundleID: String
    package var environment: APNsEnvironment
    package var attributesType: String
    /// The reporting event; a newer registration for the same device replaces an older one.
    package var key: EventKey

    package init(
        userID: String, deviceID: String, token: DeviceToken, bundleID: String, environment: APNsEnvironment,
        attributesType: String, key: EventKey
    ) {
        self.userID = userID
        self.deviceID = deviceID
        self.token = token
        self.bundleID = bundleID
        self.environment = environment
        self.attributesType = attributesType
        self.key = key
    }
}
