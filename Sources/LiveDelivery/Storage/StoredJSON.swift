import APNsModel
import Foundation
import LiveDeliveryCore
import LiveDeliveryJSON

/// The documents the worker keeps in PostgreSQL `json` columns (a planned push, a push-to-start
/// registration), and the order states stored as JSON before `sql/118` (``StoredState`` reads those
/// through here), written and read field by field with the JSON module's writer and tape rather than
/// through `Codable`.
///
/// A push is written per push and read per claim: `JSONEncoder` and `JSONDecoder` were each about a third of a
/// worker's CPU, and a streaming `Encoder` still a fifth (a container box, generic metadata looked up at run
/// time, a witness call per field). The text is what `JSONEncoder` writes for the same value, up to key order
/// and number spelling: the same keys, nil fields left out, dates as seconds since 2001, enums with associated
/// values as their synthesized `Codable` writes them. So `JSONDecoder` reads these documents, and these
/// readers read what `JSONEncoder` writes; tests check both ways on every state and push of the example
/// deliveries, so a field added to a core type without being added here fails them.
enum StoredJSON {
    static func encode(_ state: OrderState) throws -> [UInt8] {
        let writer = JSONWriter(capacity: 4096)
        try write(state, to: writer)
        return writer.bytes
    }

    static func encode(_ push: PlannedPush) throws -> [UInt8] {
        let writer = JSONWriter(capacity: 2048)
        try write(push, to: writer)
        return writer.bytes
    }

    static func encode(_ registration: PushToStartRegistration) throws -> [UInt8] {
        let writer = JSONWriter()
        try write(registration, to: writer)
        return writer.bytes
    }

    // MARK: Documents

    static func write(_ state: OrderState, to writer: JSONWriter) throws {
        var object = JSONWriter.Object(writer)
        object.string("orderID", state.orderID)
        try object.member("record", ifPresent: state.record) { try write($0, to: writer) }
        try object.member("activities") { try writer.writeArray(state.activities) { try write($0, to: writer) } }
        try object.member("pushToStartTokens") {
            try writer.writeArray(state.pushToStartTokens) { try write($0, to: writer) }
        }
        object.member("followers") { writer.writeArray(state.followers) { writer.writeString($0) } }
        try object.member("followersKey", ifPresent: state.followersKey) { try write($0, to: writer) }
        try object.member("channel", ifPresent: state.channel) { try write($0, to: writer) }
        object.member("seenEventIDs") { writer.writeArray(state.seenEventIDs) { writer.writeString($0) } }
        try object.date("createdAt", state.createdAt)
        try object.date("lastChangeAt", state.lastChangeAt)
        try object.member("nextSweepAt", ifPresent: state.nextSweepAt) { try writeDate($0, to: writer) }
        object.close()
    }

    static func write(_ push: PlannedPush, to writer: JSONWriter) throws {
        var object = JSONWriter.Object(writer)
        object.string("orderID", push.orderID)
        object.string("activityKey", push.activityKey)
        object.string("activityID", ifPresent: push.activityID)
        object.string("kind", push.kind.rawValue)
        object.string("deviceToken", ifPresent: push.deviceToken?.hex)
        object.string("channelID", ifPresent: push.channelID)
        object.string("environment", push.environment.rawValue)
        object.string("bundleID", push.bundleID)
        object.string("apnsID", push.apnsID)
        object.int("priority", push.priority)
        object.int("timestamp", push.timestamp)
        try object.date("notBefore", push.notBefore)
        object.int("expiration", push.expiration)
        object.member("headers") {
            writer.writeArray(push.headers) { header in
                var object = JSONWriter.Object(writer)
                object.string("name", header.name)
                object.string("value", header.value)
                object.close()
            }
        }
        object.string("payload", String(decoding: push.payload, as: UTF8.self))
        object.member("alert", ifPresent: push.alert) { write($0, to: writer) }
        object.string("step", push.step)
        object.string("status", push.status.rawValue)
        try object.member("statusKey") { try write(push.statusKey, to: writer) }
        object.string("reason", push.reason)
        try object.member("mark") { try write(push.mark, to: writer) }
        object.string("traceParent", ifPresent: push.traceParent)
        object.close()
    }

    // MARK: Parts

    private static func write(_ record: OrderRecord, to writer: JSONWriter) throws {
        var object = JSONWriter.Object(writer)
        object.string("orderID", record.orderID)
        object.string("userID", record.userID)
        let status = { (register: Register<OrderStatus>) in
            try write(register, to: writer) { writer.writeString($0.rawValue) }
        }
        try object.member("latestOpen", ifPresent: record.latestOpen, status)
        try object.member("terminal", ifPresent: record.terminal, status)
        try object.member("orderNumber", ifPresent: record.orderNumber) {
            try write($0, to: writer) { writer.writeInt($0) }
        }
        try object.member("merchantName", ifPresent: record.merchantName) {
            try write($0, to: writer) { writer.writeString($0) }
        }
        try object.member("courierName", ifPresent: record.courierName) {
            try write($0, to: writer) { writer.writeString($0) }
        }
        try object.member("eta", ifPresent: record.eta) { try write($0, to: writer) { try write($0, to: writer) } }
        try object.member("newest") { try write(record.newest, to: writer) }
        object.close()
    }

    private static func write<Value>(
        _ register: Register<Value>, to writer: JSONWriter, value: (Value) throws -> Void
    ) throws {
        var object = JSONWriter.Object(writer)
        try object.member("value") { try value(register.value) }
        try object.member("key") { try write(register.key, to: writer) }
        object.close()
    }

    private static func write(_ key: EventKey, to writer: JSONWriter) throws {
        var object = JSONWriter.Object(writer)
        object.int("sequence", ifPresent: key.sequence)
        try object.date("occurredAt", key.occurredAt)
        object.string("eventID", key.eventID)
        object.close()
    }

    private static func write(_ eta: ETAWindow, to writer: JSONWriter) throws {
        var object = JSONWriter.Object(writer)
        try object.date("earliest", eta.earliest)
        try object.date("latest", eta.latest)
        object.close()
    }

    private static func write(_ activity: ActivityState, to writer: JSONWriter) throws {
        var object = JSONWriter.Object(writer)
        object.string("key", activity.key)
        object.string("activityID", ifPresent: activity.activityID)
        object.string("deviceID", ifPresent: activity.deviceID)
        object.string("phase", activity.phase.rawValue)
        object.string("closeReason", ifPresent: activity.closeReason?.stored)
        try object.member("updateToken", ifPresent: activity.updateToken) { token in
            var inner = JSONWriter.Object(writer)
            inner.string("token", token.token.hex)
            inner.string("bundleID", token.bundleID)
            inner.string("environment", token.environment.rawValue)
            try inner.member("key") { try write(token.key, to: writer) }
            try inner.date("receivedAt", token.receivedAt)
            inner.close()
        }
        try object.member("startToken", ifPresent: activity.startToken) { try write($0, to: writer) }
        try object.date("createdAt", activity.createdAt)
        try object.member("startedAt", ifPresent: activity.startedAt) { try writeDate($0, to: writer) }
        try object.member("endedAt", ifPresent: activity.endedAt) { try writeDate($0, to: writer) }
        try object.member("pending", ifPresent: activity.pending) { pending in
            var inner = JSONWriter.Object(writer)
            inner.string("apnsID", pending.apnsID)
            inner.string("kind", pending.kind.rawValue)
            inner.int("timestamp", pending.timestamp)
            inner.int("priority", pending.priority)
            inner.string("alertStep", ifPresent: pending.alertStep)
            inner.string("alertKind", ifPresent: pending.alertKind?.rawValue)
            try inner.member("mark") { try write(pending.mark, to: writer) }
            inner.close()
        }
        try object.member("planned", ifPresent: activity.planned) { try write($0, to: writer) }
        try object.member("sent", ifPresent: activity.sent) { try write($0, to: writer) }
        object.int("lastTimestamp", activity.lastTimestamp)
        object.member("alertedSteps") { writer.writeArray(activity.alertedSteps) { writer.writeString($0) } }
        object.int("alertCount", activity.alertCount)
        object.member("highPriorityLog") {
            writer.writeArray(activity.highPriorityLog) { writer.writeInt($0) }
        }
        object.member("frequentPushes", ifPresent: activity.frequentPushes) { writer.writeBool($0) }
        try object.member("scheduledStart", ifPresent: activity.scheduledStart) { try writeDate($0, to: writer) }
        object.string("channelID", ifPresent: activity.channelID)
        object.member("broadcast", ifPresent: activity.broadcast) { broadcast in
            var inner = JSONWriter.Object(writer)
            inner.string("bundleID", broadcast.bundleID)
            inner.string("environment", broadcast.environment.rawValue)
            inner.member("storesMostRecent") { writer.writeBool(broadcast.storesMostRecent) }
            inner.close()
        }
        object.close()
    }

    private static func write(_ mark: ActivityState.ContentMark, to writer: JSONWriter) throws {
        var object = JSONWriter.Object(writer)
        object.string("contentState", mark.contentState)
        object.string("step", mark.step)
        try object.double("relevance", mark.relevance)
        object.string("status", mark.status.rawValue)
        try object.member("statusKey") { try write(mark.statusKey, to: writer) }
        try object.member("eta", ifPresent: mark.eta) { try write($0, to: writer) }
        object.close()
    }

    private static func write(_ registration: PushToStartRegistration, to writer: JSONWriter) throws {
        var object = JSONWriter.Object(writer)
        object.string("userID", registration.userID)
        object.string("deviceID", registration.deviceID)
        object.string("token", registration.token.hex)
        object.string("bundleID", registration.bundleID)
        object.string("environment", registration.environment.rawValue)
        object.string("attributesType", registration.attributesType)
        try object.member("key") { try write(registration.key, to: writer) }
        object.close()
    }

    /// As `AlertContent`'s synthesized `Codable` writes it; each text as its enum case's:
    /// `{"plain":{"_0":…}}` or `{"localized":{"key":…,"args":[…]}}`.
    private static func write(_ alert: AlertContent, to writer: JSONWriter) {
        func text(_ text: AlertContent.Text) {
            var object = JSONWriter.Object(writer)
            switch text {
            case .plain(let string):
                object.member("plain") {
                    var plain = JSONWriter.Object(writer)
                    plain.string("_0", string)
                    plain.close()
                }
            case .localized(let key, let args):
                object.member("localized") {
                    var localized = JSONWriter.Object(writer)
                    localized.string("key", key)
                    localized.member("args") { writer.writeArray(args) { writer.writeString($0) } }
                    localized.close()
                }
            }
            object.close()
        }
        var object = JSONWriter.Object(writer)
        object.member("title") { text(alert.title) }
        object.member("subtitle", ifPresent: alert.subtitle, text)
        object.member("body", ifPresent: alert.body, text)
        object.string("sound", ifPresent: alert.sound)
        object.close()
    }

    private static func writeDate(_ date: Date, to writer: JSONWriter) throws {
        try writer.writeDouble(date.timeIntervalSinceReferenceDate, path: [JSONPathKey("date")])
    }
}

extension JSONWriter.Object {
    /// A `Date` as `JSONEncoder` writes it by default: seconds since 2001.
    mutating func date(_ name: StaticString, _ value: Date) throws {
        try double(name, value.timeIntervalSinceReferenceDate)
    }
}

// MARK: - Reading

extension StoredJSON {
    /// An order's state, read field by field from the tape: the value `JSONDecoder` would give, or
    /// a `DecodingError` with the field's path where it would fail.
    static func decodeState(_ bytes: [UInt8]) throws -> OrderState {
        let tape = try JSONTape(bytes)
        return try Reading(tape: tape).state(at: 0)
    }

    /// A planned push, read field by field from the tape (see ``decodeState(_:)``).
    static func decodePush(_ bytes: [UInt8]) throws -> PlannedPush {
        let tape = try JSONTape(bytes)
        return try Reading(tape: tape).push(at: 0)
    }

    /// A push-to-start registration, read field by field from the tape (see ``decodeState(_:)``).
    static func decodeRegistration(_ bytes: [UInt8]) throws -> PushToStartRegistration {
        let tape = try JSONTape(bytes)
        return try Reading(tape: tape).registration(at: 0)
    }

    /// The document types, each read from a token of the tape.
    private struct Reading {
        let tape: JSONTape

        func state(at index: Int) throws -> OrderState {
            let object = try JSONTape.Object(tape, index)
            return OrderState(
                orderID: try object.string("orderID"),
                record: try object.readIfPresent("record") { try record(at: $0) },
                activities: try object.read("activities") { try tape.array(at: $0) { try activity(at: $0) } },
                pushToStartTokens: try object.read("pushToStartTokens") {
                    try tape.array(at: $0) { try registration(at: $0) }
                },
                followers: try object.readIfPresent("followers") {
                    try tape.array(at: $0) { index in try tape.string(at: index) }
                } ?? [],
                followersKey: try object.readIfPresent("followersKey") { try eventKey(at: $0) },
                channel: try object.readIfPresent("channel") { try activity(at: $0) },
                seenEventIDs: try object.read("seenEventIDs") {
                    try tape.array(at: $0) { index in try tape.string(at: index) }
                },
                createdAt: try object.date("createdAt"),
                lastChangeAt: try object.date("lastChangeAt"),
                nextSweepAt: try object.readIfPresent("nextSweepAt") { index in try tape.date(at: index) })
        }

        func push(at index: Int) throws -> PlannedPush {
            let object = try JSONTape.Object(tape, index)
            var push = PlannedPush(
                orderID: try object.string("orderID"),
                activityKey: try object.string("activityKey"),
                activityID: try object.stringIfPresent("activityID"),
                kind: try object.read("kind") { index in try tape.rawValue(PlannedPush.Kind.self, at: index) },
                deviceToken: try object.readIfPresent("deviceToken") { index in try deviceToken(at: index) },
                channelID: try object.stringIfPresent("channelID"),
                environment: APNsEnvironment(rawValue: try object.string("environment")),
                bundleID: try object.string("bundleID"),
                apnsID: try object.string("apnsID"),
                priority: try object.int("priority"),
                timestamp: try object.int("timestamp"),
                notBefore: try object.date("notBefore"),
                expiration: try object.int("expiration"),
                headers: try object.read("headers") {
                    try tape.array(at: $0) { index in
                        let header = try JSONTape.Object(tape, index)
                        return PlannedPush.Header(name: try header.string("name"), value: try header.string("value"))
                    }
                },
                // Stored as JSON text; the first versions stored an array of byte values.
                payload: try object.read("payload") { index in
                    tape.kind(at: index) == .string
                        ? Array(try tape.string(at: index).utf8)
                        : try tape.array(at: index) { try tape.integer(UInt8.self, at: $0) }
                },
                alert: try object.readIfPresent("alert") { try alert(at: $0) },
                step: try object.string("step"),
                status: OrderStatus(rawValue: try object.string("status")),
                statusKey: try object.read("statusKey") { try eventKey(at: $0) },
                reason: try object.string("reason"),
                mark: try object.read("mark") { try mark(at: $0) })
            push.traceParent = try object.stringIfPresent("traceParent")
            return push
        }

        private func record(at index: Int) throws -> OrderRecord {
            let object = try JSONTape.Object(tape, index)
            let status = { (index: Int) in
                try register(at: index) { index in OrderStatus(rawValue: try tape.string(at: index)) }
            }
            return OrderRecord(
                orderID: try object.string("orderID"),
                userID: try object.string("userID"),
                latestOpen: try object.readIfPresent("latestOpen", status),
                terminal: try object.readIfPresent("terminal", status),
                orderNumber: try object.readIfPresent("orderNumber") {
                    try register(at: $0) { index in try tape.integer(Int.self, at: index) }
                },
                merchantName: try object.readIfPresent("merchantName") {
                    try register(at: $0) { index in try tape.string(at: index) }
                },
                courierName: try object.readIfPresent("courierName") {
                    try register(at: $0) { index in try tape.string(at: index) }
                },
                eta: try object.readIfPresent("eta") { try register(at: $0) { try eta(at: $0) } },
                newest: try object.read("newest") { try eventKey(at: $0) })
        }

        private func register<Value>(at index: Int, _ value: (Int) throws -> Value) throws -> Register<Value> {
            let object = try JSONTape.Object(tape, index)
            return Register(
                value: try object.read("value", value), key: try object.read("key") { try eventKey(at: $0) })
        }

        private func eventKey(at index: Int) throws -> EventKey {
            let object = try JSONTape.Object(tape, index)
            return EventKey(
                sequence: try object.readIfPresent("sequence") { index in try tape.integer(Int.self, at: index) },
                occurredAt: try object.date("occurredAt"),
                eventID: try object.string("eventID"))
        }

        private func eta(at index: Int) throws -> ETAWindow {
            let object = try JSONTape.Object(tape, index)
            return ETAWindow(earliest: try object.date("earliest"), latest: try object.date("latest"))
        }

        /// A case stored as its text (an activity's phase, an alert's kind); an unknown text is an error.
        private func stored<Value: RawRepresentable>(_ text: String, _ what: String) throws -> Value
        where Value.RawValue == String {
            guard let value = Value(rawValue: text) else {
                throw DecodingError.dataCorrupted(.init(codingPath: [], debugDescription: "not an \(what)"))
            }
            return value
        }

        private func activity(at index: Int) throws -> ActivityState {
            let object = try JSONTape.Object(tape, index)
            return ActivityState(
                key: try object.string("key"),
                activityID: try object.stringIfPresent("activityID"),
                deviceID: try object.stringIfPresent("deviceID"),
                phase: try stored(try object.string("phase"), "activity phase"),
                closeReason: try object.stringIfPresent("closeReason").map(CloseReason.init(stored:)),
                updateToken: try object.readIfPresent("updateToken") { index in
                    let token = try JSONTape.Object(tape, index)
                    return ActivityState.UpdateToken(
                        token: try token.read("token") { index in try deviceToken(at: index) },
                        bundleID: try token.string("bundleID"),
                        environment: APNsEnvironment(rawValue: try token.string("environment")),
                        key: try token.read("key") { try eventKey(at: $0) },
                        receivedAt: try token.date("receivedAt"))
                },
                startToken: try object.readIfPresent("startToken") { try registration(at: $0) },
                createdAt: try object.date("createdAt"),
                startedAt: try object.readIfPresent("startedAt") { index in try tape.date(at: index) },
                endedAt: try object.readIfPresent("endedAt") { index in try tape.date(at: index) },
                pending: try object.readIfPresent("pending") { index in
                    let pending = try JSONTape.Object(tape, index)
                    return ActivityState.PendingPush(
                        apnsID: try pending.string("apnsID"),
                        kind: try pending.read("kind") { index in try tape.rawValue(PlannedPush.Kind.self, at: index) },
                        timestamp: try pending.int("timestamp"),
                        priority: try pending.int("priority"),
                        alertStep: try pending.stringIfPresent("alertStep"),
                        alertKind: try pending.stringIfPresent("alertKind").map { try stored($0, "alert kind") },
                        mark: try pending.read("mark") { try mark(at: $0) })
                },
                planned: try object.readIfPresent("planned") { try mark(at: $0) },
                sent: try object.readIfPresent("sent") { try mark(at: $0) },
                lastTimestamp: try object.int("lastTimestamp"),
                alertedSteps: try object.read("alertedSteps") {
                    try tape.array(at: $0) { index in try tape.string(at: index) }
                },
                alertCount: try object.int("alertCount"),
                highPriorityLog: try object.read("highPriorityLog") {
                    try tape.array(at: $0) { index in try tape.integer(Int.self, at: index) }
                },
                frequentPushes: try object.readIfPresent("frequentPushes") { index in try tape.bool(at: index) },
                scheduledStart: try object.readIfPresent("scheduledStart") { index in try tape.date(at: index) },
                channelID: try object.stringIfPresent("channelID"),
                broadcast: try object.readIfPresent("broadcast") { index in
                    let broadcast = try JSONTape.Object(tape, index)
                    return ActivityState.Broadcast(
                        bundleID: try broadcast.string("bundleID"),
                        environment: APNsEnvironment(rawValue: try broadcast.string("environment")),
                        storesMostRecent: try broadcast.read("storesMostRecent") { index in try tape.bool(at: index) })
                })
        }

        private func mark(at index: Int) throws -> ActivityState.ContentMark {
            let object = try JSONTape.Object(tape, index)
            return ActivityState.ContentMark(
                contentState: try object.string("contentState"),
                step: try object.string("step"),
                relevance: try object.read("relevance") { index in try tape.double(at: index) },
                status: OrderStatus(rawValue: try object.string("status")),
                statusKey: try object.read("statusKey") { try eventKey(at: $0) },
                eta: try object.readIfPresent("eta") { try eta(at: $0) })
        }

        /// As `AlertContent`'s synthesized `Codable` reads it (see ``StoredJSON/write(_:to:)``).
        private func alert(at index: Int) throws -> AlertContent {
            func text(at index: Int) throws -> AlertContent.Text {
                let object = try JSONTape.Object(tape, index)
                if let plain = try object.readIfPresent("plain", { try JSONTape.Object(tape, $0) }) {
                    return .plain(try plain.string("_0"))
                }
                let localized = try object.read("localized") { try JSONTape.Object(tape, $0) }
                return .localized(
                    key: try localized.string("key"),
                    args: try localized.read("args") { try tape.array(at: $0) { try tape.string(at: $0) } })
            }
            let object = try JSONTape.Object(tape, index)
            return AlertContent(
                title: try object.read("title") { try text(at: $0) },
                subtitle: try object.readIfPresent("subtitle") { try text(at: $0) },
                body: try object.readIfPresent("body") { try text(at: $0) },
                sound: try object.stringIfPresent("sound"))
        }

        func registration(at index: Int) throws -> PushToStartRegistration {
            let object = try JSONTape.Object(tape, index)
            return PushToStartRegistration(
                userID: try object.string("userID"),
                deviceID: try object.string("deviceID"),
                token: try object.read("token") { index in try deviceToken(at: index) },
                bundleID: try object.string("bundleID"),
                environment: APNsEnvironment(rawValue: try object.string("environment")),
                attributesType: try object.string("attributesType"),
                key: try object.read("key") { try eventKey(at: $0) })
        }

        private func deviceToken(at index: Int) throws -> DeviceToken {
            guard let token = DeviceToken(hex: try tape.string(at: index)) else {
                throw DecodingError.dataCorrupted(.init(codingPath: [], debugDescription: "not a device token"))
            }
            return token
        }
    }
}
