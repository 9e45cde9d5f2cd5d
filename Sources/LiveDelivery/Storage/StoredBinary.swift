import APNsModel
import Foundation
import LiveDeliveryCore

/// An order's state as `orders.state` holds it (`bytea`, `sql/118`): a compact binary document, read and
/// written in one pass with no field names, no escaping and no number text.
///
/// The state is read from the database for nearly every event (the state cache holds only what this
/// process wrote lately) and written for every event: as JSON, reading and writing it and the push
/// (``StoredPush``) was almost half the worker's own instructions per update (`livedelivery-bench events`).
/// The layout is the fields of
/// ``OrderState`` and its parts in declaration order:
/// - a version byte first: 3 (an order's followers and broadcast channel after its push-to-start tokens, an
///   activity's channel at its end, and a push's token optional and followed by its channel); 2 (without
///   them) and 1 (without an activity's frequent-updates setting and scheduled start either) still read;
/// - strings as a length (LEB128) and their UTF-8 bytes; integers as zigzag LEB128;
/// - `Double`s and `Date`s (seconds since 2001) as their 8 bytes, little-endian, so they read back exactly;
/// - optionals as a 0 or 1 byte before the value; arrays and sets as a count before the elements;
/// - the core's string enums (phase, status, environment, push kind) as their raw strings.
///
/// A document that starts with `{` is the JSON an earlier release wrote (``StoredJSON``): it still reads.
/// A field added to a core type must be added here, in both directions, with a new version byte;
/// the round-trip tests cover every state and push of the example deliveries.
enum StoredState {
    static let version: UInt8 = 3
    /// The versions this release reads.
    static let readable: ClosedRange<UInt8> = 1...3

    /// `version` 1 (without the frequent-updates setting) is what the release before wrote; tests write it.
    static func encode(_ state: OrderState, version: UInt8 = version) -> [UInt8] {
        var writer = Writer()
        writer.version = version
        writer.bytes.append(version)
        writer.state(state)
        return writer.bytes
    }

    static func decode(_ bytes: [UInt8]) throws -> OrderState {
        if bytes.first == UInt8(ascii: "{") { return try StoredJSON.decodeState(bytes) }
        return try read(bytes, "order state") { try $0.state() }
    }

    /// Reads a whole document: its version byte, then `body`, then nothing.
    fileprivate static func read<Value>(
        _ bytes: [UInt8], _ name: String, _ body: (inout Reader) throws -> Value
    ) throws -> Value {
        try bytes.withUnsafeBufferPointer { buffer in
            var reader = Reader(buffer: buffer)
            let version = try reader.byte()
            guard readable.contains(version) else {
                throw StoredDocumentError(message: "\(name) document version \(version) is not known")
            }
            reader.version = version
            let value = try body(&reader)
            guard reader.position == buffer.count else {
                throw StoredDocumentError(message: "\(name) document has \(buffer.count - reader.position) extra bytes")
            }
            return value
        }
    }
}

/// A stored document that cannot be read: truncated, extended, of an unknown version or damaged. Names no value.
struct StoredDocumentError: Error, CustomStringConvertible {
    var message: String
    var description: String { message }
}

/// A planned push as `outbox.push` holds it (`bytea`, `sql/118`), in the layout of ``StoredState``:
/// written for every push, read by every claim. A document that starts with `{` is the JSON an earlier
/// release wrote (``StoredJSON``): it still reads.
enum StoredPush {
    static func encode(_ push: PlannedPush) -> [UInt8] {
        var writer = StoredState.Writer()
        writer.bytes.append(StoredState.version)
        writer.push(push)
        return writer.bytes
    }

    static func decode(_ bytes: [UInt8]) throws -> PlannedPush {
        if bytes.first == UInt8(ascii: "{") { return try StoredJSON.decodePush(bytes) }
        return try StoredState.read(bytes, "push") { try $0.push() }
    }
}

// MARK: Writing

extension StoredState {
    struct Writer {
        var bytes: [UInt8] = []
        var version = StoredState.version

        init() { bytes.reserveCapacity(1024) }

        mutating func unsigned(_ value: UInt64) {
            var value = value
            while value >= 0x80 {
                bytes.append(UInt8(truncatingIfNeeded: value) | 0x80)
                value >>= 7
            }
            bytes.append(UInt8(value))
        }

        mutating func int(_ value: Int) {
            let value = Int64(value)
            unsigned(UInt64(bitPattern: (value << 1) ^ (value >> 63)))
        }

        mutating func double(_ value: Double) {
            withUnsafeBytes(of: value.bitPattern.littleEndian) { bytes.append(contentsOf: $0) }
        }

        mutating func date(_ value: Date) { double(value.timeIntervalSinceReferenceDate) }

        mutating func string(_ value: String) {
            var value = value
            value.withUTF8 { utf8 in
                unsigned(UInt64(utf8.count))
                bytes.append(contentsOf: utf8)
            }
        }

        mutating func optional<Value>(_ value: Value?, _ write: (inout Writer, Value) -> Void) {
            guard let value else { return bytes.append(0) }
            bytes.append(1)
            write(&self, value)
        }

        mutating func array<Elements: Collection>(
            _ elements: Elements, _ write: (inout Writer, Elements.Element) -> Void
        ) {
            unsigned(UInt64(elements.count))
            for element in elements { write(&self, element) }
        }

        mutating func state(_ state: OrderState) {
            string(state.orderID)
            optional(state.record) { $0.record($1) }
            array(state.activities) { $0.activity($1) }
            array(state.pushToStartTokens) { $0.registration($1) }
            if version >= 3 {
                array(state.followers) { $0.string($1) }
                optional(state.followersKey) { $0.key($1) }
                optional(state.channel) { $0.activity($1) }
            }
            array(state.seenEventIDs) { $0.string($1) }
            date(state.createdAt)
            date(state.lastChangeAt)
            optional(state.nextSweepAt) { $0.date($1) }
        }

        mutating func record(_ record: OrderRecord) {
            string(record.orderID)
            string(record.userID)
            optional(record.latestOpen) { $0.register($1) { $0.string($1.rawValue) } }
            optional(record.terminal) { $0.register($1) { $0.string($1.rawValue) } }
            optional(record.orderNumber) { $0.register($1) { $0.int($1) } }
            optional(record.merchantName) { $0.register($1) { $0.string($1) } }
            optional(record.courierName) { $0.register($1) { $0.string($1) } }
            optional(record.eta) { $0.register($1) { $0.eta($1) } }
            key(record.newest)
        }

        mutating func register<Value>(_ register: Register<Value>, _ value: (inout Writer, Value) -> Void) {
            value(&self, register.value)
            key(register.key)
        }

        mutating func key(_ key: EventKey) {
            optional(key.sequence) { $0.int($1) }
            date(key.occurredAt)
            string(key.eventID)
        }

        mutating func eta(_ eta: ETAWindow) {
            date(eta.earliest)
            date(eta.latest)
        }

        mutating func activity(_ activity: ActivityState) {
            string(activity.key)
            optional(activity.activityID) { $0.string($1) }
            optional(activity.deviceID) { $0.string($1) }
            string(activity.phase.rawValue)
            optional(activity.closeReason?.stored) { $0.string($1) }
            optional(activity.updateToken) { writer, token in
                writer.string(token.token.hex)
                writer.string(token.bundleID)
                writer.string(token.environment.rawValue)
                writer.key(token.key)
                writer.date(token.receivedAt)
            }
            optional(activity.startToken) { $0.registration($1) }
            date(activity.createdAt)
            optional(activity.startedAt) { $0.date($1) }
            optional(activity.endedAt) { $0.date($1) }
            optional(activity.pending) { writer, pending in
                writer.string(pending.apnsID)
                writer.string(pending.kind.rawValue)
                writer.int(pending.timestamp)
                writer.int(pending.priority)
                writer.optional(pending.alertStep) { $0.string($1) }
                writer.optional(pending.alertKind) { $0.string($1.rawValue) }
                writer.mark(pending.mark)
            }
            optional(activity.planned) { $0.mark($1) }
            optional(activity.sent) { $0.mark($1) }
            int(activity.lastTimestamp)
            array(activity.alertedSteps) { $0.string($1) }
            int(activity.alertCount)
            array(activity.highPriorityLog) { $0.int($1) }
            if version >= 2 {
                optional(activity.frequentPushes) { $0.bytes.append($1 ? 1 : 0) }
                optional(activity.scheduledStart) { $0.date($1) }
            }
            if version >= 3 {
                optional(activity.channelID) { $0.string($1) }
                optional(activity.broadcast) { writer, broadcast in
                    writer.string(broadcast.bundleID)
                    writer.string(broadcast.environment.rawValue)
                    writer.bytes.append(broadcast.storesMostRecent ? 1 : 0)
                }
            }
        }

        mutating func mark(_ mark: ActivityState.ContentMark) {
            string(mark.contentState)
            string(mark.step)
            double(mark.relevance)
            string(mark.status.rawValue)
            key(mark.statusKey)
            optional(mark.eta) { $0.eta($1) }
        }

        mutating func push(_ push: PlannedPush) {
            string(push.orderID)
            string(push.activityKey)
            optional(push.activityID) { $0.string($1) }
            string(push.kind.rawValue)
            optional(push.deviceToken) { $0.string($1.hex) }
            optional(push.channelID) { $0.string($1) }
            string(push.environment.rawValue)
            string(push.bundleID)
            string(push.apnsID)
            int(push.priority)
            int(push.timestamp)
            date(push.notBefore)
            int(push.expiration)
            array(push.headers) { writer, header in
                writer.string(header.name)
                writer.string(header.value)
            }
            unsigned(UInt64(push.payload.count))
            bytes.append(contentsOf: push.payload)
            optional(push.alert) { writer, alert in
                writer.text(alert.title)
                writer.optional(alert.subtitle) { $0.text($1) }
                writer.optional(alert.body) { $0.text($1) }
                writer.optional(alert.sound) { $0.string($1) }
            }
            string(push.step)
            string(push.status.rawValue)
            key(push.statusKey)
            string(push.reason)
            mark(push.mark)
            optional(push.traceParent) { $0.string($1) }
        }

        /// An alert text: 0 and the string, or 1, the key and the arguments.
        mutating func text(_ text: AlertContent.Text) {
            switch text {
            case .plain(let string):
                bytes.append(0)
                self.string(string)
            case .localized(let key, let args):
                bytes.append(1)
                string(key)
                array(args) { $0.string($1) }
            }
        }

        mutating func registration(_ registration: PushToStartRegistration) {
            string(registration.userID)
            string(registration.deviceID)
            string(registration.token.hex)
            string(registration.bundleID)
            string(registration.environment.rawValue)
            string(registration.attributesType)
            key(registration.key)
        }
    }
}

// MARK: Reading

extension StoredState {
    struct Reader {
        let buffer: UnsafeBufferPointer<UInt8>
        var position = 0
        /// The document's version byte: what a version-1 document lacks is not read.
        var version = StoredState.version

        init(buffer: UnsafeBufferPointer<UInt8>) { self.buffer = buffer }

        private func truncated() -> StoredDocumentError {
            StoredDocumentError(message: "stored document ends early (at byte \(position) of \(buffer.count))")
        }

        mutating func byte() throws -> UInt8 {
            guard position < buffer.count else { throw truncated() }
            defer { position += 1 }
            return buffer[position]
        }

        mutating func flag() throws -> Bool {
            switch try byte() {
            case 0: return false
            case 1: return true
            default: throw StoredDocumentError(message: "stored document has a bad flag")
            }
        }

        mutating func unsigned() throws -> UInt64 {
            var value: UInt64 = 0
            var shift: UInt64 = 0
            while true {
                let byte = try byte()
                guard shift < 64 else { throw StoredDocumentError(message: "stored document has a bad number") }
                value |= UInt64(byte & 0x7F) << shift
                if byte < 0x80 { return value }
                shift += 7
            }
        }

        mutating func int() throws -> Int {
            let value = try unsigned()
            return Int(truncatingIfNeeded: Int64(bitPattern: (value >> 1) ^ (0 &- (value & 1))))
        }

        mutating func count() throws -> Int {
            let count = try unsigned()
            // Every element takes a byte at least: a larger count is a corrupt document.
            guard count <= UInt64(buffer.count - position) else { throw truncated() }
            return Int(count)
        }

        mutating func double() throws -> Double {
            guard buffer.count - position >= 8 else { throw truncated() }
            var bits: UInt64 = 0
            for index in 0..<8 { bits |= UInt64(buffer[position + index]) << (8 * UInt64(index)) }
            position += 8
            return Double(bitPattern: bits)
        }

        mutating func date() throws -> Date { Date(timeIntervalSinceReferenceDate: try double()) }

        mutating func string() throws -> String {
            let length = try count()
            defer { position += length }
            return String(decoding: UnsafeBufferPointer(rebasing: buffer[position..<position + length]), as: UTF8.self)
        }

        mutating func optional<Value>(_ read: (inout Reader) throws -> Value) throws -> Value? {
            switch try byte() {
            case 0: return nil
            case 1: return try read(&self)
            case let other: throw StoredDocumentError(message: "stored document has a bad presence byte \(other)")
            }
        }

        mutating func array<Element>(_ read: (inout Reader) throws -> Element) throws -> [Element] {
            let count = try count()
            var elements: [Element] = []
            elements.reserveCapacity(count)
            for _ in 0..<count { elements.append(try read(&self)) }
            return elements
        }

        mutating func token() throws -> DeviceToken {
            guard let token = DeviceToken(hex: try string()) else {
                throw StoredDocumentError(message: "stored document holds a malformed device token")
            }
            return token
        }

        mutating func state() throws -> OrderState {
            OrderState(
                orderID: try string(),
                record: try optional { try $0.record() },
                activities: try array { try $0.activity() },
                pushToStartTokens: try array { try $0.registration() },
                followers: version >= 3 ? try array { try $0.string() } : [],
                followersKey: version >= 3 ? try optional { try $0.key() } : nil,
                channel: version >= 3 ? try optional { try $0.activity() } : nil,
                seenEventIDs: try array { try $0.string() },
                createdAt: try date(),
                lastChangeAt: try date(),
                nextSweepAt: try optional { try $0.date() })
        }

        mutating func record() throws -> OrderRecord {
            OrderRecord(
                orderID: try string(),
                userID: try string(),
                latestOpen: try optional { try $0.register { OrderStatus(rawValue: try $0.string()) } },
                terminal: try optional { try $0.register { OrderStatus(rawValue: try $0.string()) } },
                orderNumber: try optional { try $0.register { try $0.int() } },
                merchantName: try optional { try $0.register { try $0.string() } },
                courierName: try optional { try $0.register { try $0.string() } },
                eta: try optional { try $0.register { try $0.eta() } },
                newest: try key())
        }

        mutating func register<Value>(_ value: (inout Reader) throws -> Value) throws -> Register<Value> {
            Register(value: try value(&self), key: try key())
        }

        mutating func key() throws -> EventKey {
            EventKey(sequence: try optional { try $0.int() }, occurredAt: try date(), eventID: try string())
        }

        mutating func eta() throws -> ETAWindow { ETAWindow(earliest: try date(), latest: try date()) }

        /// A case stored as its text (an activity's phase, an alert's kind); an unknown text is an error.
        mutating func stored<Value: RawRepresentable>(_: Value.Type, _ what: String) throws -> Value
        where Value.RawValue == String {
            guard let value = Value(rawValue: try string()) else {
                throw StoredDocumentError(message: "stored document has an unknown \(what)")
            }
            return value
        }

        mutating func activity() throws -> ActivityState {
            ActivityState(
                key: try string(),
                activityID: try optional { try $0.string() },
                deviceID: try optional { try $0.string() },
                phase: try stored(ActivityState.Phase.self, "activity phase"),
                closeReason: try optional { try $0.string() }.map(CloseReason.init(stored:)),
                updateToken: try optional { reader in
                    ActivityState.UpdateToken(
                        token: try reader.token(), bundleID: try reader.string(),
                        environment: APNsEnvironment(rawValue: try reader.string()), key: try reader.key(),
                        receivedAt: try reader.date())
                },
                startToken: try optional { try $0.registration() },
                createdAt: try date(),
                startedAt: try optional { try $0.date() },
                endedAt: try optional { try $0.date() },
                pending: try optional { reader in
                    ActivityState.PendingPush(
                        apnsID: try reader.string(), kind: try reader.kind(), timestamp: try reader.int(),
                        priority: try reader.int(), alertStep: try reader.optional { try $0.string() },
                        alertKind: try reader.optional { try $0.stored(ActivityState.AlertKind.self, "alert kind") },
                        mark: try reader.mark())
                },
                planned: try optional { try $0.mark() },
                sent: try optional { try $0.mark() },
                lastTimestamp: try int(),
                alertedSteps: try array { try $0.string() },
                alertCount: try int(),
                highPriorityLog: try array { try $0.int() },
                frequentPushes: version >= 2 ? try optional { try $0.flag() } : nil,
                scheduledStart: version >= 2 ? try optional { try $0.date() } : nil,
                channelID: version >= 3 ? try optional { try $0.string() } : nil,
                broadcast: version >= 3
                    ? try optional { reader in
                        ActivityState.Broadcast(
                            bundleID: try reader.string(), environment: APNsEnvironment(rawValue: try reader.string()),
                            storesMostRecent: try reader.flag())
                    } : nil)
        }

        mutating func kind() throws -> PlannedPush.Kind {
            let text = try string()
            guard let kind = PlannedPush.Kind(rawValue: text) else {
                throw StoredDocumentError(message: "stored document holds an unknown push kind")
            }
            return kind
        }

        mutating func mark() throws -> ActivityState.ContentMark {
            ActivityState.ContentMark(
                contentState: try string(), step: try string(), relevance: try double(),
                status: OrderStatus(rawValue: try string()), statusKey: try key(), eta: try optional { try $0.eta() })
        }

        mutating func push() throws -> PlannedPush {
            var push = PlannedPush(
                orderID: try string(), activityKey: try string(), activityID: try optional { try $0.string() },
                kind: try kind(), deviceToken: version >= 3 ? try optional { try $0.token() } : try token(),
                channelID: version >= 3 ? try optional { try $0.string() } : nil,
                environment: APNsEnvironment(rawValue: try string()),
                bundleID: try string(), apnsID: try string(), priority: try int(), timestamp: try int(),
                notBefore: try date(), expiration: try int(),
                headers: try array { PlannedPush.Header(name: try $0.string(), value: try $0.string()) },
                payload: try bytes(),
                alert: try optional { reader in
                    AlertContent(
                        title: try reader.text(), subtitle: try reader.optional { try $0.text() },
                        body: try reader.optional { try $0.text() }, sound: try reader.optional { try $0.string() })
                },
                step: try string(), status: OrderStatus(rawValue: try string()), statusKey: try key(),
                reason: try string(), mark: try mark())
            push.traceParent = try optional { try $0.string() }
            return push
        }

        mutating func bytes() throws -> [UInt8] {
            let length = try count()
            defer { position += length }
            return Array(UnsafeBufferPointer(rebasing: buffer[position..<position + length]))
        }

        mutating func text() throws -> AlertContent.Text {
            switch try byte() {
            case 0: return .plain(try string())
            case 1: return .localized(key: try string(), args: try array { try $0.string() })
            case let other: throw StoredDocumentError(message: "push document has a bad alert text tag \(other)")
            }
        }

        mutating func registration() throws -> PushToStartRegistration {
            PushToStartRegistration(
                userID: try string(), deviceID: try string(), token: try token(), bundleID: try string(),
                environment: APNsEnvironment(rawValue: try string()), attributesType: try string(), key: try key())
        }
    }
}
