import Foundation
import LiveDeliveryCore

/// The two documents the worker writes on every event, an order's state and a planned push, written
/// field by field rather than through `Codable`.
///
/// ``JSONStreamEncoder`` writes any `Encodable`, but each nested value still goes through the
/// `Encoder` protocol: a container box, generic metadata looked up at run time, a witness call per
/// field. For these two documents that was a fifth of a worker's CPU. The output here is byte for
/// byte what ``JSONStreamEncoder`` writes for them (same keys, same order, nil fields left out, dates
/// as seconds since 2001); a test compares the two on every state and push of the example deliveries,
/// so a field added to a core type without being added here fails it. The rare alert content still
/// goes through `Codable`.
enum StoredJSON {
    static func encode(_ state: OrderState) throws -> [UInt8] {
        let writer = JSONByteWriter()
        try write(state, to: writer)
        return writer.bytes
    }

    static func encode(_ push: PlannedPush) throws -> [UInt8] {
        let writer = JSONByteWriter()
        try write(push, to: writer)
        if writer.unsupported { return try JSONStreamEncoder.encode(push) }
        return writer.bytes
    }

    // MARK: Documents

    static func write(_ state: OrderState, to writer: JSONByteWriter) throws {
        var object = Object(writer)
        object.key("orderID")
        writer.writeString(state.orderID)
        if let record = state.record {
            object.key("record")
            try write(record, to: writer)
        }
        object.key("activities")
        try writeArray(state.activities, to: writer) { try write($0, to: writer) }
        object.key("pushToStartTokens")
        try writeArray(state.pushToStartTokens, to: writer) { try write($0, to: writer) }
        object.key("seenEventIDs")
        writeArray(state.seenEventIDs, to: writer) { writer.writeString($0) }
        object.key("createdAt")
        try writeDate(state.createdAt, to: writer)
        object.key("lastChangeAt")
        try writeDate(state.lastChangeAt, to: writer)
        if let nextSweepAt = state.nextSweepAt {
            object.key("nextSweepAt")
            try writeDate(nextSweepAt, to: writer)
        }
        object.close()
    }

    static func write(_ push: PlannedPush, to writer: JSONByteWriter) throws {
        var object = Object(writer)
        object.key("orderID")
        writer.writeString(push.orderID)
        object.key("activityKey")
        writer.writeString(push.activityKey)
        if let activityID = push.activityID {
            object.key("activityID")
            writer.writeString(activityID)
        }
        object.key("kind")
        writer.writeString(push.kind.rawValue)
        object.key("deviceToken")
        writer.writeString(push.deviceToken.hex)
        object.key("environment")
        writer.writeString(push.environment.rawValue)
        object.key("bundleID")
        writer.writeString(push.bundleID)
        object.key("apnsID")
        writer.writeString(push.apnsID)
        object.key("priority")
        writer.writeRaw(String(push.priority))
        object.key("timestamp")
        writer.writeRaw(String(push.timestamp))
        object.key("notBefore")
        try writeDate(push.notBefore, to: writer)
        object.key("expiration")
        writer.writeRaw(String(push.expiration))
        object.key("headers")
        writeArray(push.headers, to: writer) { header in
            var object = Object(writer)
            object.key("name")
            writer.writeString(header.name)
            object.key("value")
            writer.writeString(header.value)
            object.close()
        }
        object.key("payload")
        writer.writeString(String(decoding: push.payload, as: UTF8.self))
        if let alert = push.alert {
            object.key("alert")
            try writer.encodeValue(alert, parent: nil, key: nil)
        }
        object.key("step")
        writer.writeString(push.step)
        object.key("status")
        writer.writeString(push.status.rawValue)
        object.key("statusKey")
        try write(push.statusKey, to: writer)
        object.key("reason")
        writer.writeString(push.reason)
        object.key("mark")
        try write(push.mark, to: writer)
        object.close()
    }

    // MARK: Parts

    private static func write(_ record: OrderRecord, to writer: JSONByteWriter) throws {
        var object = Object(writer)
        object.key("orderID")
        writer.writeString(record.orderID)
        object.key("userID")
        writer.writeString(record.userID)
        if let latestOpen = record.latestOpen {
            object.key("latestOpen")
            try write(latestOpen, to: writer) { writer.writeString($0.rawValue) }
        }
        if let terminal = record.terminal {
            object.key("terminal")
            try write(terminal, to: writer) { writer.writeString($0.rawValue) }
        }
        if let orderNumber = record.orderNumber {
            object.key("orderNumber")
            try write(orderNumber, to: writer) { writer.writeRaw(String($0)) }
        }
        if let merchantName = record.merchantName {
            object.key("merchantName")
            try write(merchantName, to: writer) { writer.writeString($0) }
        }
        if let courierName = record.courierName {
            object.key("courierName")
            try write(courierName, to: writer) { writer.writeString($0) }
        }
        if let eta = record.eta {
            object.key("eta")
            try write(eta, to: writer) { try write($0, to: writer) }
        }
        object.key("newest")
        try write(record.newest, to: writer)
        object.close()
    }

    private static func write<Value>(
        _ register: Register<Value>, to writer: JSONByteWriter, value: (Value) throws -> Void
    ) throws {
        var object = Object(writer)
        object.key("value")
        try value(register.value)
        object.key("key")
        try write(register.key, to: writer)
        object.close()
    }

    private static func write(_ key: EventKey, to writer: JSONByteWriter) throws {
        var object = Object(writer)
        if let sequence = key.sequence {
            object.key("sequence")
            writer.writeRaw(String(sequence))
        }
        object.key("occurredAt")
        try writeDate(key.occurredAt, to: writer)
        object.key("eventID")
        writer.writeString(key.eventID)
        object.close()
    }

    private static func write(_ eta: ETAWindow, to writer: JSONByteWriter) throws {
        var object = Object(writer)
        object.key("earliest")
        try writeDate(eta.earliest, to: writer)
        object.key("latest")
        try writeDate(eta.latest, to: writer)
        object.close()
    }

    private static func write(_ activity: ActivityState, to writer: JSONByteWriter) throws {
        var object = Object(writer)
        object.key("key")
        writer.writeString(activity.key)
        if let activityID = activity.activityID {
            object.key("activityID")
            writer.writeString(activityID)
        }
        if let deviceID = activity.deviceID {
            object.key("deviceID")
            writer.writeString(deviceID)
        }
        object.key("phase")
        writer.writeString(activity.phase.rawValue)
        if let closeReason = activity.closeReason {
            object.key("closeReason")
            writer.writeString(closeReason)
        }
        if let token = activity.updateToken {
            object.key("updateToken")
            var inner = Object(writer)
            inner.key("token")
            writer.writeString(token.token.hex)
            inner.key("bundleID")
            writer.writeString(token.bundleID)
            inner.key("environment")
            writer.writeString(token.environment.rawValue)
            inner.key("key")
            try write(token.key, to: writer)
            inner.key("receivedAt")
            try writeDate(token.receivedAt, to: writer)
            inner.close()
        }
        if let startToken = activity.startToken {
            object.key("startToken")
            try write(startToken, to: writer)
        }
        object.key("createdAt")
        try writeDate(activity.createdAt, to: writer)
        if let startedAt = activity.startedAt {
            object.key("startedAt")
            try writeDate(startedAt, to: writer)
        }
        if let endedAt = activity.endedAt {
            object.key("endedAt")
            try writeDate(endedAt, to: writer)
        }
        if let pending = activity.pending {
            object.key("pending")
            var inner = Object(writer)
            inner.key("apnsID")
            writer.writeString(pending.apnsID)
            inner.key("kind")
            writer.writeString(pending.kind.rawValue)
            inner.key("timestamp")
            writer.writeRaw(String(pending.timestamp))
            inner.key("priority")
            writer.writeRaw(String(pending.priority))
            if let alertStep = pending.alertStep {
                inner.key("alertStep")
                writer.writeString(alertStep)
            }
            if let alertKind = pending.alertKind {
                inner.key("alertKind")
                writer.writeString(alertKind)
            }
            inner.key("mark")
            try write(pending.mark, to: writer)
            inner.close()
        }
        if let planned = activity.planned {
            object.key("planned")
            try write(planned, to: writer)
        }
        if let sent = activity.sent {
            object.key("sent")
            try write(sent, to: writer)
        }
        object.key("lastTimestamp")
        writer.writeRaw(String(activity.lastTimestamp))
        object.key("alertedSteps")
        writeArray(activity.alertedSteps, to: writer) { writer.writeString($0) }
        object.key("alertCount")
        writer.writeRaw(String(activity.alertCount))
        object.key("highPriorityLog")
        writeArray(activity.highPriorityLog, to: writer) { writer.writeRaw(String($0)) }
        object.close()
    }

    private static func write(_ mark: ActivityState.ContentMark, to writer: JSONByteWriter) throws {
        var object = Object(writer)
        object.key("contentState")
        writer.writeString(mark.contentState)
        object.key("step")
        writer.writeString(mark.step)
        object.key("relevance")
        try writer.writeDouble(mark.relevance, path: { [Field("relevance")] })
        object.key("status")
        writer.writeString(mark.status.rawValue)
        object.key("statusKey")
        try write(mark.statusKey, to: writer)
        if let eta = mark.eta {
            object.key("eta")
            try write(eta, to: writer)
        }
        object.close()
    }

    private static func write(_ registration: PushToStartRegistration, to writer: JSONByteWriter) throws {
        var object = Object(writer)
        object.key("userID")
        writer.writeString(registration.userID)
        object.key("deviceID")
        writer.writeString(registration.deviceID)
        object.key("token")
        writer.writeString(registration.token.hex)
        object.key("bundleID")
        writer.writeString(registration.bundleID)
        object.key("environment")
        writer.writeString(registration.environment.rawValue)
        object.key("attributesType")
        writer.writeString(registration.attributesType)
        object.key("key")
        try write(registration.key, to: writer)
        object.close()
    }

    // MARK: Writing

    private static func writeDate(_ date: Date, to writer: JSONByteWriter) throws {
        try writer.writeDouble(date.timeIntervalSinceReferenceDate, path: { [Field("date")] })
    }

    private static func writeArray<Elements: Sequence>(
        _ elements: Elements, to writer: JSONByteWriter, _ element: (Elements.Element) throws -> Void
    ) rethrows {
        writer.bytes.append(UInt8(ascii: "["))
        var first = true
        for value in elements {
            if !first { writer.bytes.append(UInt8(ascii: ",")) }
            first = false
            try element(value)
        }
        writer.bytes.append(UInt8(ascii: "]"))
    }

    /// An object being written: braces and the commas between members.
    private struct Object {
        let writer: JSONByteWriter
        var empty = true

        init(_ writer: JSONByteWriter) {
            self.writer = writer
            writer.bytes.append(UInt8(ascii: "{"))
        }

        /// A member's name (the core's property names: plain ASCII, nothing to escape) and its colon.
        mutating func key(_ name: StaticString) {
            if !empty { writer.bytes.append(UInt8(ascii: ",")) }
            empty = false
            writer.bytes.append(UInt8(ascii: "\""))
            name.withUTF8Buffer { writer.bytes.append(contentsOf: $0) }
            writer.bytes.append(UInt8(ascii: "\""))
            writer.bytes.append(UInt8(ascii: ":"))
        }

        func close() { writer.bytes.append(UInt8(ascii: "}")) }
    }

    /// The field of a number JSON cannot hold, for the error.
    private struct Field: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(_ name: String) { stringValue = name }
        init?(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }
}
