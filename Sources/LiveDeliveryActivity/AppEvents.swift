public import Foundation

/// `activity.token`: the app reports an activity's update token (`Activity.pushTokenUpdates`); the token can
/// rotate, and each new one is reported.
public struct ActivityTokenReport: Codable, Hashable, Sendable {
    /// The routing key and `type`.
    public static let type = "activity.token"

    private var envelope: Envelope
    /// The order the activity tracks.
    public private(set) var orderID: String
    /// ActivityKit's `Activity.id`.
    public private(set) var activityID: String
    /// The device, as the app names it in every report (optional here).
    public private(set) var deviceID: String?
    /// The activity's update token.
    public private(set) var token: PushToken
    /// The app's bundle identifier.
    public private(set) var bundleID: String
    /// Which APNs the token belongs to.
    public private(set) var environment: PushEnvironment
    /// When the app scheduled the activity to start (iOS 26 `request(…, start:)`), at most 7 days after
    /// ``occurredAt``; kept in whole seconds.
    public private(set) var scheduledStart: Date?

    /// The idempotency key.
    public var eventID: String { envelope.eventID }
    /// When the app saw the token (as the worker reads it back: milliseconds).
    public var occurredAt: Date { envelope.occurredAt }

    /// A report, checked against the contract.
    public init(
        orderID: String, activityID: String, deviceID: String? = nil, token: PushToken, bundleID: String,
        environment: PushEnvironment, scheduledStart: Date? = nil,
        eventID: String = EventContract.newEventID(), occurredAt: Date = Date()
    ) throws(EventContractError) {
        envelope = try Envelope(eventID: eventID, occurredAt: occurredAt)
        try EventContract.checkText(orderID, field: "order_id", length: EventContract.identifierLength)
        try EventContract.checkText(activityID, field: "activity_id", length: EventContract.activityIDLength)
        let deviceID = deviceID.flatMap { $0.allSatisfy(\.isWhitespace) ? nil : $0 }
        if let deviceID {
            try EventContract.checkText(deviceID, field: "device_id", length: EventContract.deviceIDLength)
        }
        try EventContract.checkBundleID(bundleID)
        self.orderID = orderID
        self.activityID = activityID
        self.deviceID = deviceID
        self.token = token
        self.bundleID = bundleID
        self.environment = environment
        if let scheduledStart {
            // Whole seconds, compared exactly as the worker compares what it reads.
            let start = Date(timeIntervalSince1970: scheduledStart.timeIntervalSince1970.rounded(.down))
            guard let read = Timestamp.parse(Timestamp.format(start)),
                read.timeIntervalSince(envelope.occurredAt) <= EventContract.maximumScheduleAhead
            else {
                throw EventContractError(field: "scheduled_start", "must be at most 7 days after occurred_at")
            }
            self.scheduledStart = read
        }
    }

    /// Decodes a report, checked as the initializer checks it.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: EventCodingKey.self)
        let envelope = try Envelope(type: Self.type, from: c)
        let token = try c.decode(PushToken.self, forKey: EventCodingKey("token"))
        let environment = try c.decode(PushEnvironment.self, forKey: EventCodingKey("environment"))
        let orderID = try c.decode(String.self, forKey: EventCodingKey("order_id"))
        let activityID = try c.decode(String.self, forKey: EventCodingKey("activity_id"))
        let deviceID = try c.optionalText("device_id")
        let bundleID = try c.decode(String.self, forKey: EventCodingKey("bundle_id"))
        let scheduledText = try c.optionalText("scheduled_start")
        let scheduledStart = scheduledText == nil ? nil : try c.timestamp("scheduled_start")
        self = try c.checked { () throws(EventContractError) in
            try ActivityTokenReport(
                orderID: orderID, activityID: activityID, deviceID: deviceID, token: token, bundleID: bundleID,
                environment: environment, scheduledStart: scheduledStart, eventID: envelope.eventID,
                occurredAt: envelope.occurredAt)
        }
    }

    /// Encodes the event the worker reads.
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: EventCodingKey.self)
        try envelope.encode(type: Self.type, into: &c)
        try c.encode(orderID, forKey: EventCodingKey("order_id"))
        try c.encode(activityID, forKey: EventCodingKey("activity_id"))
        try c.encodeIfPresent(deviceID, forKey: EventCodingKey("device_id"))
        try c.encode(token, forKey: EventCodingKey("token"))
        try c.encode(bundleID, forKey: EventCodingKey("bundle_id"))
        try c.encode(environment, forKey: EventCodingKey("environment"))
        try c.encodeIfPresent(scheduledStart.map(Timestamp.format), forKey: EventCodingKey("scheduled_start"))
    }
}

/// `activity.push_to_start_token`: the app reports the device's push-to-start token
/// (`Activity.pushToStartTokenUpdates`), with which the worker may start an order's activity remotely.
public struct PushToStartTokenReport: Codable, Hashable, Sendable {
    /// The routing key and `type`.
    public static let type = "activity.push_to_start_token"

    private var envelope: Envelope
    /// The signed-in person.
    public private(set) var userID: String
    /// The device, as the app names it in every report.
    public private(set) var deviceID: String
    /// The push-to-start token.
    public private(set) var token: PushToken
    /// The app's bundle identifier.
    public private(set) var bundleID: String
    /// Which APNs the token belongs to.
    public private(set) var environment: PushEnvironment
    /// The `ActivityAttributes` type the token starts (``DeliveryAttributes/typeName`` by default).
    public private(set) var attributesType: String

    /// The idempotency key.
    public var eventID: String { envelope.eventID }
    /// When the app saw the token (as the worker reads it back: milliseconds).
    public var occurredAt: Date { envelope.occurredAt }

    /// A report, checked against the contract.
    public init(
        userID: String, deviceID: String, token: PushToken, bundleID: String, environment: PushEnvironment,
        attributesType: String = DeliveryAttributes.typeName,
        eventID: String = EventContract.newEventID(), occurredAt: Date = Date()
    ) throws(EventContractError) {
        envelope = try Envelope(eventID: eventID, occurredAt: occurredAt)
        try EventContract.checkAttributesType(attributesType)
        try EventContract.checkText(userID, field: "user_id", length: EventContract.identifierLength)
        try EventContract.checkText(deviceID, field: "device_id", length: EventContract.deviceIDLength)
        try EventContract.checkBundleID(bundleID)
        self.userID = userID
        self.deviceID = deviceID
        self.token = token
        self.bundleID = bundleID
        self.environment = environment
        self.attributesType = attributesType
    }

    /// Decodes a report, checked as the initializer checks it.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: EventCodingKey.self)
        let envelope = try Envelope(type: Self.type, from: c)
        let userID = try c.decode(String.self, forKey: EventCodingKey("user_id"))
        let deviceID = try c.decode(String.self, forKey: EventCodingKey("device_id"))
        let token = try c.decode(PushToken.self, forKey: EventCodingKey("token"))
        let bundleID = try c.decode(String.self, forKey: EventCodingKey("bundle_id"))
        let environment = try c.decode(PushEnvironment.self, forKey: EventCodingKey("environment"))
        let attributesType = try c.decode(String.self, forKey: EventCodingKey("attributes_type"))
        self = try c.checked { () throws(EventContractError) in
            try PushToStartTokenReport(
                userID: userID, deviceID: deviceID, token: token, bundleID: bundleID, environment: environment,
                attributesType: attributesType, eventID: envelope.eventID, occurredAt: envelope.occurredAt)
        }
    }

    /// Encodes the event the worker reads.
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: EventCodingKey.self)
        try envelope.encode(type: Self.type, into: &c)
        try c.encode(userID, forKey: EventCodingKey("user_id"))
        try c.encode(deviceID, forKey: EventCodingKey("device_id"))
        try c.encode(token, forKey: EventCodingKey("token"))
        try c.encode(bundleID, forKey: EventCodingKey("bundle_id"))
        try c.encode(environment, forKey: EventCodingKey("environment"))
        try c.encode(attributesType, forKey: EventCodingKey("attributes_type"))
    }
}

/// `activity.settings`: the app reports the person's Live Activity settings on the device
/// (`ActivityAuthorizationInfo`), at launch and whenever one changes.
public struct ActivitySettingsReport: Codable, Hashable, Sendable {
    /// The routing key and `type`.
    public static let type = "activity.settings"

    private var envelope: Envelope
    /// The signed-in person.
    public private(set) var userID: String
    /// The device, as the app names it in every report.
    public private(set) var deviceID: String
    /// `areActivitiesEnabled`.
    public private(set) var activitiesEnabled: Bool
    /// `frequentPushesEnabled`.
    public private(set) var frequentPushesEnabled: Bool

    /// The idempotency key.
    public var eventID: String { envelope.eventID }
    /// When the app read the settings (as the worker reads it back: milliseconds). The newest report wins.
    public var occurredAt: Date { envelope.occurredAt }

    /// A report, checked against the contract.
    public init(
        userID: String, deviceID: String, activitiesEnabled: Bool, frequentPushesEnabled: Bool,
        eventID: String = EventContract.newEventID(), occurredAt: Date = Date()
    ) throws(EventContractError) {
        envelope = try Envelope(eventID: eventID, occurredAt: occurredAt)
        try EventContract.checkText(userID, field: "user_id", length: EventContract.identifierLength)
        try EventContract.checkText(deviceID, field: "device_id", length: EventContract.deviceIDLength)
        self.userID = userID
        self.deviceID = deviceID
        self.activitiesEnabled = activitiesEnabled
        self.frequentPushesEnabled = frequentPushesEnabled
    }

    /// Decodes a report, checked as the initializer checks it.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: EventCodingKey.self)
        let envelope = try Envelope(type: Self.type, from: c)
        let userID = try c.decode(String.self, forKey: EventCodingKey("user_id"))
        let deviceID = try c.decode(String.self, forKey: EventCodingKey("device_id"))
        let activitiesEnabled = try c.decode(Bool.self, forKey: EventCodingKey("activities_enabled"))
        let frequentPushesEnabled = try c.decode(Bool.self, forKey: EventCodingKey("frequent_pushes_enabled"))
        self = try c.checked { () throws(EventContractError) in
            try ActivitySettingsReport(
                userID: userID, deviceID: deviceID, activitiesEnabled: activitiesEnabled,
                frequentPushesEnabled: frequentPushesEnabled, eventID: envelope.eventID,
                occurredAt: envelope.occurredAt)
        }
    }

    /// Encodes the event the worker reads.
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: EventCodingKey.self)
        try envelope.encode(type: Self.type, into: &c)
        try c.encode(userID, forKey: EventCodingKey("user_id"))
        try c.encode(deviceID, forKey: EventCodingKey("device_id"))
        try c.encode(activitiesEnabled, forKey: EventCodingKey("activities_enabled"))
        try c.encode(frequentPushesEnabled, forKey: EventCodingKey("frequent_pushes_enabled"))
    }
}

/// `activity.ended`: the app reports that an activity ended on the device (`activityStateUpdates`); the worker
/// stops pushing to it.
public struct ActivityEndedReport: Codable, Hashable, Sendable {
    /// The routing key and `type`.
    public static let type = "activity.ended"

    /// Why the activity ended.
    public enum Reason: String, Codable, Hashable, CaseIterable, Sendable {
        /// The person removed it (`ActivityState.dismissed`).
        case dismissedByUser = "dismissed_by_user"
        /// The app ended it on the device (`ActivityState.ended`).
        case endedOnDevice = "ended_on_device"
        /// The system ended it at its time limit.
        case expired
    }

    private var envelope: Envelope
    /// The order the activity tracked.
    public private(set) var orderID: String
    /// ActivityKit's `Activity.id`.
    public private(set) var activityID: String
    /// Why it ended.
    public private(set) var reason: Reason

    /// The idempotency key.
    public var eventID: String { envelope.eventID }
    /// When the app saw the end (as the worker reads it back: milliseconds).
    public var occurredAt: Date { envelope.occurredAt }

    /// A report, checked against the contract.
    public init(
        orderID: String, activityID: String, reason: Reason,
        eventID: String = EventContract.newEventID(), occurredAt: Date = Date()
    ) throws(EventContractError) {
        envelope = try Envelope(eventID: eventID, occurredAt: occurredAt)
        try EventContract.checkText(orderID, field: "order_id", length: EventContract.identifierLength)
        try EventContract.checkText(activityID, field: "activity_id", length: EventContract.activityIDLength)
        self.orderID = orderID
        self.activityID = activityID
        self.reason = reason
    }

    /// Decodes a report, checked as the initializer checks it.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: EventCodingKey.self)
        let envelope = try Envelope(type: Self.type, from: c)
        let reason = try c.decode(Reason.self, forKey: EventCodingKey("reason"))
        let orderID = try c.decode(String.self, forKey: EventCodingKey("order_id"))
        let activityID = try c.decode(String.self, forKey: EventCodingKey("activity_id"))
        self = try c.checked { () throws(EventContractError) in
            try ActivityEndedReport(
                orderID: orderID, activityID: activityID, reason: reason, eventID: envelope.eventID,
                occurredAt: envelope.occurredAt)
        }
    }

    /// Encodes the event the worker reads.
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: EventCodingKey.self)
        try envelope.encode(type: Self.type, into: &c)
        try c.encode(orderID, forKey: EventCodingKey("order_id"))
        try c.encode(activityID, forKey: EventCodingKey("activity_id"))
        try c.encode(reason, forKey: EventCodingKey("reason"))
    }
}

/// One event the app reports, for the app's backend to publish to the exchange `delivery.events` with
/// ``routingKey`` (and, for an order's event in a deployment of cells, the AMQP header `order_id`:
/// ``orderID``).
public enum AppEvent: Codable, Hashable, Sendable {
    /// `activity.token`.
    case activityToken(ActivityTokenReport)
    /// `activity.push_to_start_token`.
    case pushToStartToken(PushToStartTokenReport)
    /// `activity.settings`.
    case settings(ActivitySettingsReport)
    /// `activity.ended`.
    case ended(ActivityEndedReport)

    /// The AMQP routing key, equal to the body's `type`.
    public var routingKey: String {
        switch self {
        case .activityToken: ActivityTokenReport.type
        case .pushToStartToken: PushToStartTokenReport.type
        case .settings: ActivitySettingsReport.type
        case .ended: ActivityEndedReport.type
        }
    }

    /// The idempotency key; set it as the AMQP `message_id` too.
    public var eventID: String {
        switch self {
        case .activityToken(let report): report.eventID
        case .pushToStartToken(let report): report.eventID
        case .settings(let report): report.eventID
        case .ended(let report): report.eventID
        }
    }

    /// The order the event concerns (the AMQP header `order_id` in a deployment of cells); nil for a user's
    /// events, which every cell takes.
    public var orderID: String? {
        switch self {
        case .activityToken(let report): report.orderID
        case .ended(let report): report.orderID
        case .pushToStartToken, .settings: nil
        }
    }

    /// The message body: UTF-8 JSON, one event.
    public func jsonData() throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return try encoder.encode(self)
    }

    /// Decodes whichever report `type` names.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: EventCodingKey.self)
        let type = try c.decode(String.self, forKey: EventCodingKey("type"))
        switch type {
        case ActivityTokenReport.type: self = .activityToken(try ActivityTokenReport(from: decoder))
        case PushToStartTokenReport.type: self = .pushToStartToken(try PushToStartTokenReport(from: decoder))
        case ActivitySettingsReport.type: self = .settings(try ActivitySettingsReport(from: decoder))
        case ActivityEndedReport.type: self = .ended(try ActivityEndedReport(from: decoder))
        default: throw c.contractError("type", "is not an event the app reports ('\(type)')")
        }
    }

    /// Encodes the report.
    public func encode(to encoder: any Encoder) throws {
        switch self {
        case .activityToken(let report): try report.encode(to: encoder)
        case .pushToStartToken(let report): try report.encode(to: encoder)
        case .settings(let report): try report.encode(to: encoder)
        case .ended(let report): try report.encode(to: encoder)
        }
    }
}
