import APNsModel
import Foundation
import LiveDeliveryCore

/// The stored documents' fields, each declared once: ``StoredValue/code(_:)`` walks a value's fields in
/// their stored order, under their names, and a ``StoredCoder`` either reads each one into the value or
/// writes it out. The binary documents (``StoredState``, ``StoredPush``) and the JSON ones (a push-to-start
/// registration in its `json` column, and the order states and pushes an earlier release stored as JSON,
/// ``StoredJSON``) all go through these definitions, so a field added to a core type is added here once,
/// and the round-trip tests fail until it is.
///
/// Binary coders ignore the names; JSON coders ignore the order. A field a later document version added
/// is coded only when ``StoredCoder/version`` has it.
protocol StoredCoder {
    /// Whether the coder fills the values it is given (reading) or reads them (writing).
    var isReading: Bool { get }
    /// The binary document's version byte: what an older version lacks is not coded.
    var version: UInt8 { get }

    mutating func string(_ key: StoredKey, _ value: inout String) throws
    mutating func int(_ key: StoredKey, _ value: inout Int) throws
    mutating func double(_ key: StoredKey, _ value: inout Double) throws
    mutating func bool(_ key: StoredKey, _ value: inout Bool) throws
    /// Bytes: raw in a binary document, the text they hold in a JSON one.
    mutating func bytes(_ key: StoredKey, _ value: inout [UInt8]) throws
    /// A value made of fields of its own (a JSON object; inline in a binary document).
    mutating func nested(_ key: StoredKey, _ body: (inout Self) throws -> Void) throws
    /// A value that may be absent: `body` codes it when present (read into `blank`).
    mutating func optional<Value>(
        _ key: StoredKey, _ value: inout Value?, blank: @autoclosure () -> Value,
        _ body: (inout Self, inout Value) throws -> Void
    ) throws
    mutating func array<Element>(
        _ key: StoredKey, _ value: inout [Element], blank: @autoclosure () -> Element,
        _ body: (inout Self, inout Element) throws -> Void
    ) throws
    /// One of `cases`: a tag byte in a binary document, an object with the case's name as its one member
    /// in a JSON one (as a synthesized `Codable` writes an enum with associated values); `body` codes the
    /// case's fields.
    mutating func variant(
        _ key: StoredKey, _ tag: inout Int, cases: [StaticString], _ body: (inout Self, Int) throws -> Void
    ) throws
}

/// A field's name, or ``this`` for the value a coder stands on (an array's element, an optional's value).
struct StoredKey: ExpressibleByStringLiteral {
    let name: StaticString?

    init(stringLiteral name: StaticString) { self.name = name }
    private init(none: Void) { name = nil }

    static let this = StoredKey(none: ())

    var text: String { name.map { "\($0)" } ?? "" }
}

/// A type stored field by field (see ``StoredCoder``).
protocol StoredValue {
    /// A value to read a stored one into: every field is then read over it.
    static var blank: Self { get }
    mutating func code<Coder: StoredCoder>(_ coder: inout Coder) throws
}

// MARK: Values built of others

extension StoredCoder {
    mutating func value<Value: StoredValue>(_ key: StoredKey, _ value: inout Value) throws {
        try nested(key) { try value.code(&$0) }
    }

    mutating func optional<Value: StoredValue>(_ key: StoredKey, _ value: inout Value?) throws {
        try optional(key, &value, blank: .blank) { try $1.code(&$0) }
    }

    mutating func array<Value: StoredValue>(_ key: StoredKey, _ value: inout [Value]) throws {
        try array(key, &value, blank: .blank) { coder, element in try coder.nested(.this) { try element.code(&$0) } }
    }

    mutating func strings(_ key: StoredKey, _ value: inout [String]) throws {
        try array(key, &value, blank: "") { try $0.string(.this, &$1) }
    }

    mutating func string(_ key: StoredKey, _ value: inout String?) throws {
        try optional(key, &value, blank: "") { try $0.string(.this, &$1) }
    }

    mutating func date(_ key: StoredKey, _ value: inout Date) throws {
        var seconds = value.timeIntervalSinceReferenceDate
        try double(key, &seconds)
        if isReading { value = Date(timeIntervalSinceReferenceDate: seconds) }
    }

    mutating func date(_ key: StoredKey, _ value: inout Date?) throws {
        try optional(key, &value, blank: Date(timeIntervalSinceReferenceDate: 0)) { try $0.date(.this, &$1) }
    }

    /// A value stored as text: `text` gives the text to write, `read` the value a read text stands for.
    mutating func text<Value>(
        _ key: StoredKey, _ value: inout Value, _ text: (Value) -> String, _ read: (String) throws -> Value
    ) throws {
        var stored = isReading ? "" : text(value)
        try string(key, &stored)
        if isReading { value = try read(stored) }
    }

    /// One of a string enum's cases, stored as its raw value; an unknown one is an error naming `what`.
    mutating func raw<Value: RawRepresentable<String>>(
        _ key: StoredKey, _ value: inout Value, _ what: String
    )
        throws
    {
        try text(key, &value, { $0.rawValue }) { text in
            guard let value = Value(rawValue: text) else {
                throw StoredDocumentError(message: "stored document has an unknown \(what)")
            }
            return value
        }
    }

    mutating func token(_ key: StoredKey, _ value: inout DeviceToken) throws {
        try text(key, &value, { $0.hex }) { hex in
            guard let token = DeviceToken(hex: hex) else {
                throw StoredDocumentError(message: "stored document holds a malformed device token")
            }
            return token
        }
    }

    mutating func status(_ key: StoredKey, _ value: inout OrderStatus) throws {
        try text(key, &value, { $0.rawValue }, OrderStatus.init(rawValue:))
    }

    mutating func environment(_ key: StoredKey, _ value: inout APNsEnvironment) throws {
        try text(key, &value, { $0.rawValue }, APNsEnvironment.init(rawValue:))
    }

    /// A value with the key of the event that set it (`{"value": …, "key": …}`).
    mutating func register<Value>(
        _ key: StoredKey, _ register: inout Register<Value>?, blank: Value,
        _ value: (inout Self, inout Value) throws -> Void
    ) throws {
        try optional(key, &register, blank: Register(value: blank, key: .blank)) { coder, register in
            try coder.nested(.this) { coder in
                try value(&coder, &register.value)
                try coder.value("key", &register.key)
            }
        }
    }
}

// MARK: The documents' fields

extension OrderState: StoredValue {
    static var blank: OrderState { OrderState(orderID: "", now: Date(timeIntervalSinceReferenceDate: 0)) }

    /// Coded from copies of the fields, set back only when read: the state keeps its fields in one shared box
    /// (``LiveDeliveryCore/OrderState``), and an `inout` access to a field of a shared box copies the box, which
    /// writing a document must not do.
    mutating func code<Coder: StoredCoder>(_ coder: inout Coder) throws {
        var orderID = self.orderID
        var record = self.record
        var activities = self.activities
        var pushToStartTokens = self.pushToStartTokens
        var followers = self.followers
        var followersKey = self.followersKey
        var channel = self.channel
        var seenEventIDs = self.seenEventIDs
        var createdAt = self.createdAt
        var lastChangeAt = self.lastChangeAt
        var nextSweepAt = self.nextSweepAt
        var handedOver = self.handedOver?.value
        try coder.string("orderID", &orderID)
        try coder.optional("record", &record)
        try coder.array("activities", &activities)
        try coder.array("pushToStartTokens", &pushToStartTokens)
        if coder.version >= 3 {
            try coder.strings("followers", &followers)
            try coder.optional("followersKey", &followersKey)
            try coder.optional("channel", &channel)
        }
        try coder.strings("seenEventIDs", &seenEventIDs)
        try coder.date("createdAt", &createdAt)
        try coder.date("lastChangeAt", &lastChangeAt)
        try coder.date("nextSweepAt", &nextSweepAt)
        if coder.version >= 4 {
            try coder.optional("handedOver", &handedOver)
        }
        guard coder.isReading else { return }
        self.orderID = orderID
        self.record = record
        self.activities = activities
        self.pushToStartTokens = pushToStartTokens
        // Read over a blank state, which has none: set only what is there (each set boxes them anew).
        if !followers.isEmpty { self.followers = followers }
        if followersKey != nil { self.followersKey = followersKey }
        if channel != nil { self.channel = channel }
        self.seenEventIDs = seenEventIDs
        self.createdAt = createdAt
        self.lastChangeAt = lastChangeAt
        self.nextSweepAt = nextSweepAt
        if let handedOver { self.handedOver = OutOfLine(handedOver) }
    }
}

extension OrderState.Handover: StoredValue {
    static var blank: OrderState.Handover { OrderState.Handover(cell: "", state: .blank) }

    mutating func code<Coder: StoredCoder>(_ coder: inout Coder) throws {
        try coder.string("cell", &cell)
        try coder.value("state", &state)
    }
}

extension OrderRecord: StoredValue {
    static var blank: OrderRecord { OrderRecord(orderID: "", userID: "", newest: .blank) }

    mutating func code<Coder: StoredCoder>(_ coder: inout Coder) throws {
        try coder.string("orderID", &orderID)
        try coder.string("userID", &userID)
        try coder.register("latestOpen", &latestOpen, blank: .placed) { try $0.status("value", &$1) }
        try coder.register("terminal", &terminal, blank: .placed) { try $0.status("value", &$1) }
        try coder.register("orderNumber", &orderNumber, blank: 0) { try $0.int("value", &$1) }
        try coder.register("merchantName", &merchantName, blank: "") { try $0.string("value", &$1) }
        try coder.register("courierName", &courierName, blank: "") { try $0.string("value", &$1) }
        try coder.register("eta", &eta, blank: .blank) { try $0.value("value", &$1) }
        try coder.value("newest", &newest)
    }
}

extension EventKey: StoredValue {
    static var blank: EventKey {
        EventKey(sequence: nil, occurredAt: Date(timeIntervalSinceReferenceDate: 0), eventID: "")
    }

    mutating func code<Coder: StoredCoder>(_ coder: inout Coder) throws {
        try coder.optional("sequence", &sequence, blank: 0) { try $0.int(.this, &$1) }
        try coder.date("occurredAt", &occurredAt)
        try coder.string("eventID", &eventID)
    }
}

extension ETAWindow: StoredValue {
    static var blank: ETAWindow {
        ETAWindow(earliest: Date(timeIntervalSinceReferenceDate: 0), latest: Date(timeIntervalSinceReferenceDate: 0))
    }

    mutating func code<Coder: StoredCoder>(_ coder: inout Coder) throws {
        try coder.date("earliest", &earliest)
        try coder.date("latest", &latest)
    }
}

extension ActivityState: StoredValue {
    static var blank: ActivityState {
        ActivityState(
            key: "", activityID: nil, deviceID: nil, phase: .pendingStart, now: Date(timeIntervalSinceReferenceDate: 0))
    }

    mutating func code<Coder: StoredCoder>(_ coder: inout Coder) throws {
        try coder.string("key", &key)
        try coder.string("activityID", &activityID)
        try coder.string("deviceID", &deviceID)
        try coder.raw("phase", &phase, "activity phase")
        var closeReason = self.closeReason?.stored
        try coder.string("closeReason", &closeReason)
        if coder.isReading { self.closeReason = closeReason.map(CloseReason.init(stored:)) }
        try coder.optional("updateToken", &updateToken)
        try coder.optional("startToken", &startToken)
        try coder.date("createdAt", &createdAt)
        try coder.date("startedAt", &startedAt)
        try coder.date("endedAt", &endedAt)
        try coder.optional("pending", &pending)
        try coder.optional("planned", &planned)
        try coder.optional("sent", &sent)
        try coder.int("lastTimestamp", &lastTimestamp)
        try coder.strings("alertedSteps", &alertedSteps)
        try coder.int("alertCount", &alertCount)
        try coder.array("highPriorityLog", &highPriorityLog, blank: 0) { try $0.int(.this, &$1) }
        if coder.version >= 2 {
            try coder.optional("frequentPushes", &frequentPushes, blank: false) { try $0.bool(.this, &$1) }
            try coder.date("scheduledStart", &scheduledStart)
        }
        if coder.version >= 3 {
            // Out of line in the state: coded from copies, set back only when read.
            var channelID = self.channelID
            var broadcast = self.broadcast
            try coder.string("channelID", &channelID)
            try coder.optional("broadcast", &broadcast)
            if coder.isReading {
                if channelID != nil { self.channelID = channelID }
                if broadcast != nil { self.broadcast = broadcast }
            }
        }
    }
}

extension ActivityState.UpdateToken: StoredValue {
    static var blank: Self {
        Self(
            token: .blank, bundleID: "", environment: .production, key: .blank,
            receivedAt: Date(timeIntervalSinceReferenceDate: 0))
    }

    mutating func code<Coder: StoredCoder>(_ coder: inout Coder) throws {
        try coder.token("token", &token)
        try coder.string("bundleID", &bundleID)
        try coder.environment("environment", &environment)
        try coder.value("key", &key)
        try coder.date("receivedAt", &receivedAt)
    }
}

extension ActivityState.PendingPush: StoredValue {
    static var blank: Self {
        Self(apnsID: "", kind: .update, timestamp: 0, priority: 0, alertStep: nil, alertKind: nil, mark: .blank)
    }

    mutating func code<Coder: StoredCoder>(_ coder: inout Coder) throws {
        try coder.string("apnsID", &apnsID)
        try coder.raw("kind", &kind, "push kind")
        try coder.int("timestamp", &timestamp)
        try coder.int("priority", &priority)
        try coder.string("alertStep", &alertStep)
        try coder.optional("alertKind", &alertKind, blank: .status) { try $0.raw(.this, &$1, "alert kind") }
        try coder.value("mark", &mark)
    }
}

extension ActivityState.ContentMark: StoredValue {
    static var blank: Self {
        Self(contentState: "", step: "", relevance: 0, status: .placed, statusKey: .blank, eta: nil)
    }

    mutating func code<Coder: StoredCoder>(_ coder: inout Coder) throws {
        try coder.string("contentState", &contentState)
        try coder.string("step", &step)
        try coder.double("relevance", &relevance)
        try coder.status("status", &status)
        try coder.value("statusKey", &statusKey)
        try coder.optional("eta", &eta)
    }
}

extension ActivityState.Broadcast: StoredValue {
    static var blank: Self { Self(bundleID: "", environment: .production, storesMostRecent: false) }

    mutating func code<Coder: StoredCoder>(_ coder: inout Coder) throws {
        try coder.string("bundleID", &bundleID)
        try coder.environment("environment", &environment)
        try coder.bool("storesMostRecent", &storesMostRecent)
    }
}

extension PushToStartRegistration: StoredValue {
    static var blank: Self {
        Self(
            userID: "", deviceID: "", token: .blank, bundleID: "", environment: .production, attributesType: "",
            key: .blank)
    }

    mutating func code<Coder: StoredCoder>(_ coder: inout Coder) throws {
        try coder.string("userID", &userID)
        try coder.string("deviceID", &deviceID)
        try coder.token("token", &token)
        try coder.string("bundleID", &bundleID)
        try coder.environment("environment", &environment)
        try coder.string("attributesType", &attributesType)
        try coder.value("key", &key)
    }
}

extension PlannedPush: StoredValue {
    static var blank: PlannedPush {
        PlannedPush(
            orderID: "", activityKey: "", activityID: nil, kind: .update, deviceToken: nil, channelID: nil,
            environment: .production, bundleID: "", apnsID: "", priority: 0, timestamp: 0,
            notBefore: Date(timeIntervalSinceReferenceDate: 0), expiration: 0, headers: [], payload: [], alert: nil,
            step: "", status: .placed, statusKey: .blank, reason: "", mark: .blank)
    }

    /// Coded from copies of the fields, set back only when read, as ``OrderState``'s: a push keeps its fields in one
    /// shared box, and writing a document must not copy it.
    mutating func code<Coder: StoredCoder>(_ coder: inout Coder) throws {
        var orderID = self.orderID
        var activityKey = self.activityKey
        var activityID = self.activityID
        var kind = self.kind
        var deviceToken = self.deviceToken
        var channelID = self.channelID
        var environment = self.environment
        var bundleID = self.bundleID
        var apnsID = self.apnsID
        var priority = self.priority
        var timestamp = self.timestamp
        var notBefore = self.notBefore
        var expiration = self.expiration
        var headers = self.headers
        var payload = self.payload
        var alert = self.alert
        var step = self.step
        var status = self.status
        var statusKey = self.statusKey
        var reason = self.reason
        var mark = self.mark
        var traceParent = self.traceParent
        try coder.string("orderID", &orderID)
        try coder.string("activityKey", &activityKey)
        try coder.string("activityID", &activityID)
        try coder.raw("kind", &kind, "push kind")
        if coder.version >= 3 {
            try coder.optional("deviceToken", &deviceToken, blank: .blank) { try $0.token(.this, &$1) }
            try coder.string("channelID", &channelID)
        } else {
            var token = deviceToken ?? .blank
            try coder.token("deviceToken", &token)
            if coder.isReading { deviceToken = token }
        }
        try coder.environment("environment", &environment)
        try coder.string("bundleID", &bundleID)
        try coder.string("apnsID", &apnsID)
        try coder.int("priority", &priority)
        try coder.int("timestamp", &timestamp)
        try coder.date("notBefore", &notBefore)
        try coder.int("expiration", &expiration)
        try coder.array("headers", &headers, blank: Header(name: "", value: "")) { coder, header in
            try coder.nested(.this) { coder in
                try coder.string("name", &header.name)
                try coder.string("value", &header.value)
            }
        }
        try coder.bytes("payload", &payload)
        try coder.optional("alert", &alert)
        try coder.string("step", &step)
        try coder.status("status", &status)
        try coder.value("statusKey", &statusKey)
        try coder.string("reason", &reason)
        try coder.value("mark", &mark)
        try coder.string("traceParent", &traceParent)
        guard coder.isReading else { return }
        // Read over a blank push, whose box is its own: setting its fields copies nothing.
        self.orderID = orderID
        self.activityKey = activityKey
        self.activityID = activityID
        self.kind = kind
        self.deviceToken = deviceToken
        self.channelID = channelID
        self.environment = environment
        self.bundleID = bundleID
        self.apnsID = apnsID
        self.priority = priority
        self.timestamp = timestamp
        self.notBefore = notBefore
        self.expiration = expiration
        self.headers = headers
        self.payload = payload
        self.alert = alert
        self.step = step
        self.status = status
        self.statusKey = statusKey
        self.reason = reason
        self.mark = mark
        self.traceParent = traceParent
    }
}

extension AlertContent: StoredValue {
    static var blank: AlertContent { AlertContent(title: .plain("")) }

    mutating func code<Coder: StoredCoder>(_ coder: inout Coder) throws {
        try coder.alertText("title", &title)
        try coder.optional("subtitle", &subtitle, blank: .plain("")) { try $0.alertText(.this, &$1) }
        try coder.optional("body", &body, blank: .plain("")) { try $0.alertText(.this, &$1) }
        try coder.string("sound", &sound)
    }
}

extension StoredCoder {
    /// An alert text: `plain` and its string, or `localized`, its key and its arguments.
    mutating func alertText(_ key: StoredKey, _ text: inout AlertContent.Text) throws {
        var tag = 0
        var string = ""
        var args: [String] = []
        switch text {
        case .plain(let plain): string = plain
        case .localized(let key, let arguments): (tag, string, args) = (1, key, arguments)
        }
        try variant(key, &tag, cases: ["plain", "localized"]) { coder, tag in
            if tag == 0 { return try coder.string("_0", &string) }
            try coder.string("key", &string)
            try coder.strings("args", &args)
        }
        if isReading { text = tag == 0 ? .plain(string) : .localized(key: string, args: args) }
    }
}

extension DeviceToken {
    /// What a token is read over (never stored: a read replaces it).
    static let blank = DeviceToken(hex: String(repeating: "0", count: 64))!
}
