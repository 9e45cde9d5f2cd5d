import APNsModel
import Foundation
import LiveDeliveryCore

/// An order's state as `orders.state` holds it (`bytea`, `sql/118`): a compact binary document, read and
/// written in one pass with no field names, no escaping and no number text.
///
/// The state is read from the database for nearly every event (the state cache holds only what this
/// process wrote lately) and written for every event: as JSON, reading and writing it and the push
/// (``StoredPush``) was almost half the worker's own instructions per update (`livedelivery-bench events`).
/// The layout is the fields of ``OrderState`` and its parts in the order ``StoredValue/code(_:)`` declares
/// them (`StoredFields.swift`, the one definition the JSON documents use too):
/// - a version byte first: 4 for an order handed over to another cell (its ``OrderState/handedOver`` last), so
///   that every other state keeps the 3 the release before reads; 3 (an order's followers and broadcast
///   channel after its push-to-start tokens, an activity's channel at its end, and a push's token optional and
///   followed by its channel); 2 (without them) and 1 (without an activity's frequent-updates setting and
///   scheduled start either) still read;
/// - strings as a length (LEB128) and their UTF-8 bytes; integers as zigzag LEB128;
/// - `Double`s and `Date`s (seconds since 2001) as their 8 bytes, little-endian, so they read back exactly;
/// - optionals as a 0 or 1 byte before the value; arrays and sets as a count before the elements;
/// - the core's string enums (phase, status, environment, push kind) as their raw strings.
///
/// A document that starts with `{` is the JSON an earlier release wrote (``StoredJSON``): it still reads, and
/// `livedelivery migrate` rewrites those that are left (``StoredDocumentUpgrade``). A field added to a core
/// type is added to its `code(_:)` once, under a new version byte; the round-trip tests cover every state
/// and push of the example deliveries.
enum StoredState {
    static let version: UInt8 = 3
    /// The version of a state handed over to another cell.
    static let handedOverVersion: UInt8 = 4
    /// The versions this release reads.
    static let readable: ClosedRange<UInt8> = 1...4

    /// `version` 1 (without the frequent-updates setting) is what the release before wrote; tests write it.
    static func encode(_ state: OrderState, version: UInt8? = nil) -> [UInt8] {
        write(state, version: version ?? (state.handedOver == nil ? Self.version : handedOverVersion))
    }

    static func decode(_ bytes: [UInt8]) throws -> OrderState {
        if bytes.first == UInt8(ascii: "{") { return try StoredJSON.decode(OrderState.self, bytes) }
        return try read(bytes, "order state")
    }

    /// A whole document: its version byte, then the value's fields (``StoredValue``).
    fileprivate static func write<Value: StoredValue>(_ value: Value, version: UInt8 = version) -> [UInt8] {
        var writer = Writer()
        writer.version = version
        writer.bytes.append(version)
        var value = value
        // The binary writer's methods throw nothing, and writing changes no field.
        try! value.code(&writer)
        return writer.bytes
    }

    /// Reads a whole document: its version byte, then `body`, then nothing.
    fileprivate static func read<Value: StoredValue>(_ bytes: [UInt8], _ name: String) throws -> Value {
        try bytes.withUnsafeBufferPointer { buffer in
            var reader = Reader(buffer: buffer)
            let version = try reader.byte()
            guard readable.contains(version) else {
                throw StoredDocumentError(message: "\(name) document version \(version) is not known")
            }
            reader.version = version
            var value = Value.blank
            try value.code(&reader)
            guard reader.position == buffer.count else {
                throw StoredDocumentError(message: "\(name) document has \(buffer.count - reader.position) extra bytes")
            }
            return value
        }
    }
}

/// A stored document that cannot be read: truncated, extended, of an unknown version or damaged. Names no value.
struct StoredDocumentError: Error, Equatable, CustomStringConvertible {
    var message: String
    var description: String { message }
}

/// A planned push as `outbox.push` holds it (`bytea`, `sql/118`), in the layout of ``StoredState``:
/// written for every push, read by every claim. A document that starts with `{` is the JSON an earlier
/// release wrote (``StoredJSON``): it still reads.
enum StoredPush {
    static func encode(_ push: PlannedPush) -> [UInt8] { StoredState.write(push) }

    static func decode(_ bytes: [UInt8]) throws -> PlannedPush {
        if bytes.first == UInt8(ascii: "{") { return try StoredJSON.decode(PlannedPush.self, bytes) }
        return try StoredState.read(bytes, "push")
    }
}

// MARK: Writing

extension StoredState {
    /// Writes each field it is given (``StoredCoder``); it never throws.
    struct Writer: StoredCoder {
        var bytes: [UInt8] = []
        var version = StoredState.version
        var isReading: Bool { false }

        init() { bytes.reserveCapacity(1024) }

        mutating func unsigned(_ value: UInt64) {
            var value = value
            while value >= 0x80 {
                bytes.append(UInt8(truncatingIfNeeded: value) | 0x80)
                value >>= 7
            }
            bytes.append(UInt8(value))
        }

        mutating func int(_: StoredKey, _ value: inout Int) {
            let value = Int64(value)
            unsigned(UInt64(bitPattern: (value << 1) ^ (value >> 63)))
        }

        mutating func double(_: StoredKey, _ value: inout Double) {
            withUnsafeBytes(of: value.bitPattern.littleEndian) { bytes.append(contentsOf: $0) }
        }

        mutating func bool(_: StoredKey, _ value: inout Bool) { bytes.append(value ? 1 : 0) }

        mutating func string(_: StoredKey, _ value: inout String) {
            value.withUTF8 { utf8 in
                unsigned(UInt64(utf8.count))
                bytes.append(contentsOf: utf8)
            }
        }

        mutating func bytes(_: StoredKey, _ value: inout [UInt8]) {
            unsigned(UInt64(value.count))
            bytes.append(contentsOf: value)
        }

        mutating func nested(_: StoredKey, _ body: (inout Self) throws -> Void) rethrows { try body(&self) }

        mutating func optional<Value>(
            _: StoredKey, _ value: inout Value?, blank: @autoclosure () -> Value,
            _ body: (inout Self, inout Value) throws -> Void
        ) rethrows {
            guard value != nil else { return bytes.append(0) }
            bytes.append(1)
            // In place: a copy would retain every field of the value.
            try body(&self, &value!)
        }

        mutating func array<Element>(
            _: StoredKey, _ value: inout [Element], blank: @autoclosure () -> Element,
            _ body: (inout Self, inout Element) throws -> Void
        ) rethrows {
            unsigned(UInt64(value.count))
            // Neither a copy of each element (which retains its every field) nor `&value[index]` (which copies a
            // shared array first): the writer reads what `body` is given and never changes it.
            try value.withUnsafeBufferPointer { elements in
                guard let base = elements.baseAddress else { return }
                let mutable = UnsafeMutablePointer(mutating: base)
                for index in elements.indices { try body(&self, &mutable[index]) }
            }
        }

        mutating func variant(
            _: StoredKey, _ tag: inout Int, cases: [StaticString], _ body: (inout Self, Int) throws -> Void
        ) rethrows {
            bytes.append(UInt8(tag))
            try body(&self, tag)
        }
    }
}

// MARK: Reading

extension StoredState {
    /// Reads each field over the value it is given (``StoredCoder``).
    struct Reader: StoredCoder {
        let buffer: UnsafeBufferPointer<UInt8>
        var position = 0
        /// The document's version byte: what an older document lacks is not read.
        var version = StoredState.version
        var isReading: Bool { true }

        init(buffer: UnsafeBufferPointer<UInt8>) { self.buffer = buffer }

        private func truncated() -> StoredDocumentError {
            StoredDocumentError(message: "stored document ends early (at byte \(position) of \(buffer.count))")
        }

        mutating func byte() throws -> UInt8 {
            guard position < buffer.count else { throw truncated() }
            defer { position += 1 }
            return buffer[position]
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

        mutating func count() throws -> Int {
            let count = try unsigned()
            // Every element takes a byte at least: a larger count is a corrupt document.
            guard count <= UInt64(buffer.count - position) else { throw truncated() }
            return Int(count)
        }

        mutating func int(_: StoredKey, _ value: inout Int) throws {
            let raw = try unsigned()
            value = Int(truncatingIfNeeded: Int64(bitPattern: (raw >> 1) ^ (0 &- (raw & 1))))
        }

        mutating func double(_: StoredKey, _ value: inout Double) throws {
            guard buffer.count - position >= 8 else { throw truncated() }
            var bits: UInt64 = 0
            for index in 0..<8 { bits |= UInt64(buffer[position + index]) << (8 * UInt64(index)) }
            position += 8
            value = Double(bitPattern: bits)
        }

        mutating func bool(_: StoredKey, _ value: inout Bool) throws {
            switch try byte() {
            case 0: value = false
            case 1: value = true
            default: throw StoredDocumentError(message: "stored document has a bad flag")
            }
        }

        mutating func string(_: StoredKey, _ value: inout String) throws {
            let length = try count()
            defer { position += length }
            value = String(decoding: UnsafeBufferPointer(rebasing: buffer[position..<position + length]), as: UTF8.self)
        }

        mutating func bytes(_: StoredKey, _ value: inout [UInt8]) throws {
            let length = try count()
            defer { position += length }
            value = Array(UnsafeBufferPointer(rebasing: buffer[position..<position + length]))
        }

        mutating func nested(_: StoredKey, _ body: (inout Self) throws -> Void) throws { try body(&self) }

        mutating func optional<Value>(
            _: StoredKey, _ value: inout Value?, blank: @autoclosure () -> Value,
            _ body: (inout Self, inout Value) throws -> Void
        ) throws {
            switch try byte() {
            case 0: value = nil
            case 1:
                var present = blank()
                try body(&self, &present)
                value = present
            case let other: throw StoredDocumentError(message: "stored document has a bad presence byte \(other)")
            }
        }

        mutating func array<Element>(
            _: StoredKey, _ value: inout [Element], blank: @autoclosure () -> Element,
            _ body: (inout Self, inout Element) throws -> Void
        ) throws {
            let count = try count()
            var elements: [Element] = []
            elements.reserveCapacity(count)
            for _ in 0..<count {
                var element = blank()
                try body(&self, &element)
                elements.append(element)
            }
            value = elements
        }

        mutating func variant(
            _: StoredKey, _ tag: inout Int, cases: [StaticString], _ body: (inout Self, Int) throws -> Void
        ) throws {
            let byte = try byte()
            guard Int(byte) < cases.count else {
                throw StoredDocumentError(message: "stored document has a bad case tag \(byte)")
            }
            tag = Int(byte)
            try body(&self, tag)
        }
    }
}
