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
        object.string("orderID", state.orderID)
        try object.member("record", ifPresent: state.record) { try write($0, to: writer) }
        try object.member("activities") { try writeArray(state.activities, to: writer) { try write($0, to: writer) } }
        try object.member("pushToStartTokens") {
            try writeArray(state.pushToStartTokens, to: writer) { try write($0, to: writer) }
        }
        object.member("seenEventIDs") { writeArray(state.seenEventIDs, to: writer) { writer.writeString($0) } }
        try object.date("createdAt", state.createdAt)
        try object.date("lastChangeAt", state.lastChangeAt)
        try object.member("nextSweepAt", ifPresent: state.nextSweepAt) { try writeDate($0, to: writer) }
        object.close()
    }

    static func write(_ push: PlannedPush, to writer: JSONByteWriter) throws {
        var object = Object(writer)
        object.string("orderID", push.orderID)
        object.string("activityKey", push.activityKey)
        object.string("activityID", ifPresent: push.activityID)
        object.string("kind", push.kind.rawValue)
        object.string("deviceToken", push.deviceToken.hex)
        object.string("environment", push.environment.rawValue)
        object.string("bundleID", push.bundleID)
        object.string("apnsID", push.apnsID)
        object.int("priority", push.priority)
        object.int("timestamp", push.timestamp)
        try object.date("notBefore", push.notBefore)
        object.int("expiration", push.expiration)
        object.member("headers") {
            writeArray(push.headers, to: writer) { header in
                var object = Object(writer)
                object.string("name", header.name)
                object.string("value", header.value)
                object.close()
            }
        }
        object.string("payload", String(decoding: push.payload, as: UTF8.self))
        try object.member("alert", ifPresent: push.alert) { try writer.encodeValue($0, parent: nil, key: nil) }
        object.string("step", push.step)
        object.string("status", push.status.rawValue)
        try object.member("statusKey") { try write(push.statusKey, to: writer) }
        object.string("reason", push.reason)
        try object.member("mark") { try write(push.mark, to: writer) }
        object.string("traceParent", ifPresent: push.traceParent)
        object.close()
    }

    // MARK: Parts

    private static func write(_ record: OrderRecord, to writer: JSONByteWriter) throws {
        var object = Object(writer)
        object.string("orderID", record.orderID)
        object.string("userID", record.userID)
        let status = { (register: Register<OrderStatus>) in
            try write(register, to: writer) { writer.writeString($0.rawValue) }
        }
        try object.member("latestOpen", ifPresent: record.latestOpen, status)
        try object.member("terminal", ifPresent: record.terminal, status)
        try object.member("orderNumber", ifPresent: record.orderNumber) {
            try write($0, to: writer) { writer.writeRaw(String($0)) }
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
        _ register: Register<Value>, to writer: JSONByteWriter, value: (Value) throws -> Void
    ) throws {
        var object = Object(writer)
        try object.member("value") { try value(register.value) }
        try object.member("key") { try write(register.key, to: writer) }
        object.close()
    }

    private static func write(_ key: EventKey, to writer: JSONByteWriter) throws {
        var object = Object(writer)
        object.int("sequence", ifPresent: key.sequence)
        try object.date("occurredAt", key.occurredAt)
        object.string("eventID", key.eventID)
        object.close()
    }

    private static func write(_ eta: ETAWindow, to writer: JSONByteWriter) throws {
        var object = Object(writer)
        try object.date("earliest", eta.earliest)
        try object.date("latest", eta.latest)
        object.close()
    }

    private static func write(_ activity: ActivityState, to writer: JSONByteWriter) throws {
        var object = Object(writer)
        object.string("key", activity.key)
        object.string("activityID", ifPresent: activity.activityID)
        object.string("deviceID", ifPresent: activity.deviceID)
        object.string("phase", activity.phase.rawValue)
        object.string("closeReason", ifPresent: activity.closeReason)
        try object.member("updateToken", ifPresent: activity.updateToken) { token in
            var inner = Object(writer)
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
            var inner = Object(writer)
            inner.string("apnsID", pending.apnsID)
            inner.string("kind", pending.kind.rawValue)
            inner.int("timestamp", pending.timestamp)
            inner.int("priority", pending.priority)
            inner.string("alertStep", ifPresent: pending.alertStep)
            inner.string("alertKind", ifPresent: pending.alertKind)
            try inner.member("mark") { try write(pending.mark, to: writer) }
            inner.close()
        }
        try object.member("planned", ifPresent: activity.planned) { try write($0, to: writer) }
        try object.member("sent", ifPresent: activity.sent) { try write($0, to: writer) }
        object.int("lastTimestamp", activity.lastTimestamp)
        object.member("alertedSteps") { writeArray(activity.alertedSteps, to: writer) { writer.writeString($0) } }
        object.int("alertCount", activity.alertCount)
        object.member("highPriorityLog") {
            writeArray(activity.highPriorityLog, to: writer) { writer.writeRaw(String($0)) }
        }
        object.close()
    }

    private static func write(_ mark: ActivityState.ContentMark, to writer: JSONByteWriter) throws {
        var object = Object(writer)
        object.string("contentState", mark.contentState)
        object.string("step", mark.step)
        try object.member("relevance") { try writer.writeDouble(mark.relevance, path: { [Field("relevance")] }) }
        object.string("status", mark.status.rawValue)
        try object.member("statusKey") { try write(mark.statusKey, to: writer) }
        try object.member("eta", ifPresent: mark.eta) { try write($0, to: writer) }
        object.close()
    }

    private static func write(_ registration: PushToStartRegistration, to writer: JSONByteWriter) throws {
        var object = Object(writer)
        object.string("userID", registration.userID)
        object.string("deviceID", registration.deviceID)
        object.string("token", registration.token.hex)
        object.string("bundleID", registration.bundleID)
        object.string("environment", registration.environment.rawValue)
        object.string("attributesType", registration.attributesType)
        try object.member("key") { try write(registration.key, to: writer) }
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

    /// An object being written: braces, the commas between members, and members left out when nil
    /// (as `encodeIfPresent` leaves them out).
    private struct Object {
        let writer: JSONByteWriter
        var empty = true

        init(_ writer: JSONByteWriter) {
            self.writer = writer
            writer.bytes.append(UInt8(ascii: "{"))
        }

        /// A member whose value `value` writes.
        mutating func member(_ name: StaticString, _ value: () throws -> Void) rethrows {
            key(name)
            try value()
        }

        /// A member written by `value` when it is present, left out when nil.
        mutating func member<Value>(
            _ name: StaticString, ifPresent present: Value?, _ value: (Value) throws -> Void
        )
            rethrows
        {
            guard let present else { return }
            key(name)
            try value(present)
        }

        mutating func string(_ name: StaticString, _ value: String) {
            key(name)
            writer.writeString(value)
        }

        mutating func string(_ name: StaticString, ifPresent value: String?) {
            if let value { string(name, value) }
        }

        mutating func int(_ name: StaticString, _ value: Int) {
            key(name)
            writer.writeRaw(String(value))
        }

        mutating func int(_ name: StaticString, ifPresent value: Int?) {
            if let value { int(name, value) }
        }

        mutating func date(_ name: StaticString, _ value: Date) throws {
            key(name)
            try writeDate(value, to: writer)
        }

        /// A member's name (the core's property names: plain ASCII, nothing to escape) and its colon.
        private mutating func key(_ name: StaticString) {
            if !empty { writer.bytes.append(UInt8(ascii: ",")) }
            empty = false
            writer.bytes.append(UInt8(ascii: "\""))
            name.withUTF8Buffer { writer.bytes.append(contentsOf: $0) }
            writer.bytes.append(UInt8(ascii: "\""))
            writer.bytes.append(UInt8(ascii: ":"))
        }

        func close() { writer.bytes.append(UInt8(ascii: "}")) }
    }

    /// A member or an element in an error's coding path.
    struct Field: CodingKey {
        var stringValue: String
        var intValue: Int?
        init(_ name: String) { stringValue = name }
        init(index: Int) {
            stringValue = "Index \(index)"
            intValue = index
        }
        init?(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { self.init(index: intValue) }
    }
}

// MARK: - Reading

extension StoredJSON {
    /// An order's state, read field by field from the tape: the value `JSONDecoder` (and
    /// ``JSONTapeDecoder``) would give, or a `DecodingError` with the field's path where they fail.
    static func decodeState(_ bytes: [UInt8]) throws -> OrderState {
        let tape = try JSONTape(bytes)
        return try Reading(tape: tape).state(at: 0)
    }

    /// A planned push, read field by field from the tape (see ``decodeState(_:)``).
    static func decodePush(_ bytes: [UInt8]) throws -> PlannedPush {
        let tape = try JSONTape(bytes)
        return try Reading(tape: tape).push(at: 0)
    }

    /// The document types, each read from a token of the tape.
    private struct Reading {
        let tape: JSONTape

        func state(at index: Int) throws -> OrderState {
            let object = try Members(tape, index)
            return OrderState(
                orderID: try object.string("orderID"),
                record: try object.readIfPresent("record") { try record(at: $0) },
                activities: try object.read("activities") { try array(at: $0) { try activity(at: $0) } },
                pushToStartTokens: try object.read("pushToStartTokens") {
                    try array(at: $0) { try registration(at: $0) }
                },
                seenEventIDs: Set(
                    try object.read("seenEventIDs") { try array(at: $0) { index in try tape.string(at: index) } }),
                createdAt: try object.date("createdAt"),
                lastChangeAt: try object.date("lastChangeAt"),
                nextSweepAt: try object.readIfPresent("nextSweepAt") { index in try date(at: index) })
        }

        func push(at index: Int) throws -> PlannedPush {
            let object = try Members(tape, index)
            var push = PlannedPush(
                orderID: try object.string("orderID"),
                activityKey: try object.string("activityKey"),
                activityID: try object.stringIfPresent("activityID"),
                kind: try object.read("kind") { index in try kind(at: index) },
                deviceToken: try object.read("deviceToken") { index in try deviceToken(at: index) },
                environment: APNsEnvironment(rawValue: try object.string("environment")),
                bundleID: try object.string("bundleID"),
                apnsID: try object.string("apnsID"),
                priority: try object.int("priority"),
                timestamp: try object.int("timestamp"),
                notBefore: try object.date("notBefore"),
                expiration: try object.int("expiration"),
                headers: try object.read("headers") {
                    try array(at: $0) { index in
                        let header = try Members(tape, index)
                        return PlannedPush.Header(name: try header.string("name"), value: try header.string("value"))
                    }
                },
                // Stored as JSON text; the first versions stored an array of byte values.
                payload: try object.read("payload") { index in
                    tape.kind(at: index) == .string
                        ? Array(try tape.string(at: index).utf8) : try tape.value([UInt8].self, at: index)
                },
                alert: try object.readIfPresent("alert") { index in try tape.value(AlertContent.self, at: index) },
                step: try object.string("step"),
                status: OrderStatus(rawValue: try object.string("status")),
                statusKey: try object.read("statusKey") { try eventKey(at: $0) },
                reason: try object.string("reason"),
                mark: try object.read("mark") { try mark(at: $0) })
            push.traceParent = try object.stringIfPresent("traceParent")
            return push
        }

        private func record(at index: Int) throws -> OrderRecord {
            let object = try Members(tape, index)
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
            let object = try Members(tape, index)
            return Register(
                value: try object.read("value", value), key: try object.read("key") { try eventKey(at: $0) })
        }

        private func eventKey(at index: Int) throws -> EventKey {
            let object = try Members(tape, index)
            return EventKey(
                sequence: try object.readIfPresent("sequence") { index in try tape.integer(Int.self, at: index) },
                occurredAt: try object.date("occurredAt"),
                eventID: try object.string("eventID"))
        }

        private func eta(at index: Int) throws -> ETAWindow {
            let object = try Members(tape, index)
            return ETAWindow(earliest: try object.date("earliest"), latest: try object.date("latest"))
        }

        private func activity(at index: Int) throws -> ActivityState {
            let object = try Members(tape, index)
            return ActivityState(
                key: try object.string("key"),
                activityID: try object.stringIfPresent("activityID"),
                deviceID: try object.stringIfPresent("deviceID"),
                phase: ActivityState.Phase(rawValue: try object.string("phase")),
                closeReason: try object.stringIfPresent("closeReason"),
                updateToken: try object.readIfPresent("updateToken") { index in
                    let token = try Members(tape, index)
                    return ActivityState.UpdateToken(
                        token: try token.read("token") { index in try deviceToken(at: index) },
                        bundleID: try token.string("bundleID"),
                        environment: APNsEnvironment(rawValue: try token.string("environment")),
                        key: try token.read("key") { try eventKey(at: $0) },
                        receivedAt: try token.date("receivedAt"))
                },
                startToken: try object.readIfPresent("startToken") { try registration(at: $0) },
                createdAt: try object.date("createdAt"),
                startedAt: try object.readIfPresent("startedAt") { index in try date(at: index) },
                endedAt: try object.readIfPresent("endedAt") { index in try date(at: index) },
                pending: try object.readIfPresent("pending") { index in
                    let pending = try Members(tape, index)
                    return ActivityState.PendingPush(
                        apnsID: try pending.string("apnsID"),
                        kind: try pending.read("kind") { index in try kind(at: index) },
                        timestamp: try pending.int("timestamp"),
                        priority: try pending.int("priority"),
                        alertStep: try pending.stringIfPresent("alertStep"),
                        alertKind: try pending.stringIfPresent("alertKind"),
                        mark: try pending.read("mark") { try mark(at: $0) })
                },
                planned: try object.readIfPresent("planned") { try mark(at: $0) },
                sent: try object.readIfPresent("sent") { try mark(at: $0) },
                lastTimestamp: try object.int("lastTimestamp"),
                alertedSteps: try object.read("alertedSteps") {
                    try array(at: $0) { index in try tape.string(at: index) }
                },
                alertCount: try object.int("alertCount"),
                highPriorityLog: try object.read("highPriorityLog") {
                    try array(at: $0) { index in try tape.integer(Int.self, at: index) }
                })
        }

        private func mark(at index: Int) throws -> ActivityState.ContentMark {
            let object = try Members(tape, index)
            return ActivityState.ContentMark(
                contentState: try object.string("contentState"),
                step: try object.string("step"),
                relevance: try object.read("relevance") { index in try tape.double(at: index) },
                status: OrderStatus(rawValue: try object.string("status")),
                statusKey: try object.read("statusKey") { try eventKey(at: $0) },
                eta: try object.readIfPresent("eta") { try eta(at: $0) })
        }

        private func registration(at index: Int) throws -> PushToStartRegistration {
            let object = try Members(tape, index)
            return PushToStartRegistration(
                userID: try object.string("userID"),
                deviceID: try object.string("deviceID"),
                token: try object.read("token") { index in try deviceToken(at: index) },
                bundleID: try object.string("bundleID"),
                environment: APNsEnvironment(rawValue: try object.string("environment")),
                attributesType: try object.string("attributesType"),
                key: try object.read("key") { try eventKey(at: $0) })
        }

        private func array<Element>(at index: Int, _ element: (Int) throws -> Element) throws -> [Element] {
            guard tape.kind(at: index) == .array else { throw tape.mismatch([Element].self, at: index) }
            let end = Int(tape.tokens[index].next)
            var elements: [Element] = []
            elements.reserveCapacity(Int(tape.tokens[index].count))
            var item = index + 1
            var position = 0
            while item < end {
                elements.append(try prefixing(Field(index: position)) { try element(item) })
                item = Int(tape.tokens[item].next)
                position += 1
            }
            return elements
        }

        private func date(at index: Int) throws -> Date {
            Date(timeIntervalSinceReferenceDate: try tape.double(at: index))
        }

        private func kind(at index: Int) throws -> PlannedPush.Kind {
            let text = try tape.string(at: index)
            guard let kind = PlannedPush.Kind(rawValue: text) else {
                throw DecodingError.dataCorrupted(
                    .init(codingPath: [], debugDescription: "Cannot initialize Kind from invalid String value \(text)"))
            }
            return kind
        }

        private func deviceToken(at index: Int) throws -> DeviceToken {
            guard let token = DeviceToken(hex: try tape.string(at: index)) else {
                throw DecodingError.dataCorrupted(.init(codingPath: [], debugDescription: "not a device token"))
            }
            return token
        }
    }

    /// The members of one object of the tape.
    ///
    /// Errors get their coding path on the way out (each member and element puts its key in front),
    /// so a read that succeeds builds no path at all.
    private struct Members {
        let tape: JSONTape
        let index: Int

        init(_ tape: JSONTape, _ index: Int) throws {
            guard tape.kind(at: index) == .object else { throw tape.mismatch([String: Any].self, at: index) }
            self.tape = tape
            self.index = index
        }

        /// A required member: missing is `keyNotFound`, null is `valueNotFound` (from `value`).
        func read<Value>(_ key: String, _ value: (Int) throws -> Value) throws -> Value {
            guard let member = tape.find(key, in: index) else {
                throw DecodingError.keyNotFound(
                    Field(key), .init(codingPath: [], debugDescription: "No value associated with key \"\(key)\"."))
            }
            return try prefixing(Field(key)) { try value(member) }
        }

        /// An optional member: missing or null is nil, as `decodeIfPresent` reads it.
        func readIfPresent<Value>(_ key: String, _ value: (Int) throws -> Value) throws -> Value? {
            guard let member = tape.find(key, in: index), tape.kind(at: member) != .null else { return nil }
            return try prefixing(Field(key)) { try value(member) }
        }

        func string(_ key: String) throws -> String { try read(key) { index in try tape.string(at: index) } }
        func stringIfPresent(_ key: String) throws -> String? {
            try readIfPresent(key) { index in try tape.string(at: index) }
        }
        func int(_ key: String) throws -> Int { try read(key) { index in try tape.integer(Int.self, at: index) } }
        func date(_ key: String) throws -> Date {
            try read(key) { index in Date(timeIntervalSinceReferenceDate: try tape.double(at: index)) }
        }
    }
}

/// Puts `key` in front of the coding path of a decoding error leaving `body`.
private func prefixing<Value>(_ key: StoredJSON.Field, _ body: () throws -> Value) throws -> Value {
    do {
        return try body()
    } catch let error as DecodingError {
        func context(_ context: DecodingError.Context) -> DecodingError.Context {
            .init(
                codingPath: [key] + context.codingPath, debugDescription: context.debugDescription,
                underlyingError: context.underlyingError)
        }
        switch error {
        case .typeMismatch(let type, let c): throw DecodingError.typeMismatch(type, context(c))
        case .valueNotFound(let type, let c): throw DecodingError.valueNotFound(type, context(c))
        case .keyNotFound(let missing, let c): throw DecodingError.keyNotFound(missing, context(c))
        case .dataCorrupted(let c): throw DecodingError.dataCorrupted(context(c))
        @unknown default: throw error
        }
    }
}
