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
    /// When the app scheduled the activity to start (iOS 26 `request(…, start:)`); until then it is pending
    /// on the device.
    package var scheduledStart: Date?

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
}

/// `activity.settings`: the app reports the person's Live Activity settings on one device
/// (`ActivityAuthorizationInfo`'s `areActivitiesEnabled` and `frequentPushesEnabled`).
package struct ActivitySettingsEvent: Hashable, Sendable, Codable {
    package var eventID: String
    package var occurredAt: Date
    package var userID: String
    package var deviceID: String
    package var activitiesEnabled: Bool
    package var frequentPushesEnabled: Bool

    package var key: EventKey { EventKey(sequence: nil, occurredAt: occurredAt, eventID: eventID) }

    /// What the worker files for the user and device (newest report wins).
    package var settings: DeviceSettings {
        DeviceSettings(
            userID: userID, deviceID: deviceID, activitiesEnabled: activitiesEnabled,
            frequentPushesEnabled: frequentPushesEnabled, key: key)
    }
}

/// `order.followers`: the people who follow an order besides its own user (a group order, a gift, a shared
/// tracking link). Each report is the whole list; the newest wins.
package struct OrderFollowersEvent: Hashable, Sendable, Codable {
    package var eventID: String
    package var occurredAt: Date
    package var orderID: String
    package var sequence: Int?
    /// User ids, sorted, without repeats.
    package var followers: [String]

    package init(eventID: String, occurredAt: Date, orderID: String, sequence: Int? = nil, followers: [String]) {
        self.eventID = eventID
        self.occurredAt = occurredAt
        self.orderID = orderID
        self.sequence = sequence
        self.followers = Array(Set(followers)).sorted()
    }

    package var key: EventKey { EventKey(sequence: sequence, occurredAt: occurredAt, eventID: eventID) }
}

/// A person's Live Activity settings on one device, as the app last reported them.
package struct DeviceSettings: Hashable, Sendable, Codable {
    package var userID: String
    package var deviceID: String
    /// Off: the person turned Live Activities off for the app. Nothing is started on the device, and its
    /// running activities count as ended by the person.
    package var activitiesEnabled: Bool
    /// On: the app's larger priority-10 budget (`budget.frequentPriority10PerHour`) applies.
    package var frequentPushesEnabled: Bool
    /// The reporting event; a newer report for the same device replaces an older one.
    package var key: EventKey

    package init(
        userID: String, deviceID: String, activitiesEnabled: Bool, frequentPushesEnabled: Bool, key: EventKey
    ) {
        self.userID = userID
        self.deviceID = deviceID
        self.activitiesEnabled = activitiesEnabled
        self.frequentPushesEnabled = frequentPushesEnabled
        self.key = key
    }
}

/// One validated inbound event.
package enum InboundEvent: Hashable, Sendable, Codable {
    case orderStatus(OrderStatusEvent)
    case activityToken(ActivityTokenEvent)
    case pushToStartToken(PushToStartTokenEvent)
    case activityEnded(ActivityEndedEvent)
    case activitySettings(ActivitySettingsEvent)
    case orderFollowers(OrderFollowersEvent)

    package var type: EventType {
        switch self {
        case .orderStatus: .orderStatus
        case .activityToken: .activityToken
        case .pushToStartToken: .pushToStartToken
        case .activityEnded: .activityEnded
        case .activitySettings: .activitySettings
        case .orderFollowers: .orderFollowers
        }
    }

    package var eventID: String {
        switch self {
        case .orderStatus(let e): e.eventID
        case .activityToken(let e): e.eventID
        case .pushToStartToken(let e): e.eventID
        case .activityEnded(let e): e.eventID
        case .activitySettings(let e): e.eventID
        case .orderFollowers(let e): e.eventID
        }
    }

    package var occurredAt: Date {
        switch self {
        case .orderStatus(let e): e.occurredAt
        case .activityToken(let e): e.occurredAt
        case .pushToStartToken(let e): e.occurredAt
        case .activityEnded(let e): e.occurredAt
        case .activitySettings(let e): e.occurredAt
        case .orderFollowers(let e): e.occurredAt
        }
    }

    /// The order the event belongs to; nil for push-to-start tokens and settings (they belong to a user).
    package var orderID: String? {
        switch self {
        case .orderStatus(let e): e.orderID
        case .activityToken(let e): e.orderID
        case .pushToStartToken, .activitySettings: nil
        case .activityEnded(let e): e.orderID
        case .orderFollowers(let e): e.orderID
        }
    }

    /// Whether the event is about a user rather than one order (a push-to-start token, settings): the
    /// worker applies it to each of the user's open orders.
    package var reachesUser: Bool {
        switch self {
        case .pushToStartToken, .activitySettings: true
        case .orderStatus, .activityToken, .activityEnded, .orderFollowers: false
        }
    }

    /// The user the event names, if any (order.status, push-to-start tokens and settings).
    package var userID: String? {
        switch self {
        case .orderStatus(let e): e.userID
        case .pushToStartToken(let e): e.userID
        case .activitySettings(let e): e.userID
        case .activityToken, .activityEnded, .orderFollowers: nil
        }
    }

    /// Every user the event names: its user, or an order's followers. The worker reads their push-to-start
    /// tokens and settings for the batch.
    package var namedUsers: [String] {
        if case .orderFollowers(let e) = self { return e.followers }
        return userID.map { [$0] } ?? []
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

    /// `"<bundle id> <environment>"`, as ``ActivityState/Broadcast/app``.
    package var app: String { "\(bundleID) \(environment.rawValue)" }
}
