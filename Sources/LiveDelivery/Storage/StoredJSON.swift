import Foundation
import LiveDeliveryCore
import LiveDeliveryJSON

/// The stored documents in JSON, through the same field definitions as the binary ones (``StoredValue``):
/// a push-to-start registration in its `json` column (`push_to_start_tokens.registration`, which admins read
/// in SQL), and the order states and pushes an earlier release stored as JSON before `sql/118`.
///
/// The text is what `JSONEncoder` writes for the same value, up to key order and number spelling: nil fields
/// left out, dates as seconds since 2001, an alert text as its enum case's synthesized `Codable` would write
/// it (`{"plain":{"_0":…}}`), so documents of every earlier release read.
enum StoredJSON {
    static func encode<Value: StoredValue>(_ value: Value) throws -> [UInt8] {
        var writer = Writer()
        var value = value
        try writer.nested(.this) { try value.code(&$0) }
        return writer.output.bytes
    }

    static func decode<Value: StoredValue>(_: Value.Type, _ bytes: [UInt8]) throws -> Value {
        var reader = Reader(tape: try JSONTape(bytes))
        var value = Value.blank
        try reader.nested(.this) { try value.code(&$0) }
        return value
    }

    /// Reads the members it is asked for from the object it stands on (``StoredCoder``).
    struct Reader: StoredCoder {
        let tape: JSONTape
        /// The token the coder stands on: an object while fields are read by name, else the value itself.
        var current = 0
        var isReading: Bool { true }
        /// A JSON document names its fields: every version's are read when present.
        var version: UInt8 { StoredState.version }

        init(tape: JSONTape) { self.tape = tape }

        /// The token of `key` (nil when it is absent or null), or the current one for ``StoredKey/this``.
        private func member(_ key: StoredKey) throws -> Int? {
            guard key.name != nil else { return current }
            guard tape.kind(at: current) == .object else {
                throw StoredDocumentError(message: "stored JSON document has no object where \(key.text) is read")
            }
            guard let index = tape.find(key.text, in: current), tape.kind(at: index) != .null else { return nil }
            return index
        }

        private func required(_ key: StoredKey) throws -> Int {
            guard let index = try member(key) else {
                throw StoredDocumentError(message: "stored JSON document lacks \(key.text)")
            }
            return index
        }

        mutating func string(_ key: StoredKey, _ value: inout String) throws {
            value = try tape.string(at: try required(key))
        }

        mutating func int(_ key: StoredKey, _ value: inout Int) throws {
            value = try tape.integer(Int.self, at: try required(key))
        }

        mutating func double(_ key: StoredKey, _ value: inout Double) throws {
            value = try tape.double(at: try required(key))
        }

        mutating func bool(_ key: StoredKey, _ value: inout Bool) throws {
            value = try tape.bool(at: try required(key))
        }

        /// The payload's text; the first releases stored an array of byte values.
        mutating func bytes(_ key: StoredKey, _ value: inout [UInt8]) throws {
            let index = try required(key)
            value =
                tape.kind(at: index) == .string
                ? Array(try tape.string(at: index).utf8)
                : try tape.array(at: index) { try tape.integer(UInt8.self, at: $0) }
        }

        mutating func nested(_ key: StoredKey, _ body: (inout Self) throws -> Void) throws {
            let index = try required(key)
            try standing(on: index) { try body(&$0) }
        }

        mutating func optional<Value>(
            _ key: StoredKey, _ value: inout Value?, blank: @autoclosure () -> Value,
            _ body: (inout Self, inout Value) throws -> Void
        ) throws {
            guard let index = try member(key) else {
                value = nil
                return
            }
            var present = blank()
            try standing(on: index) { try body(&$0, &present) }
            value = present
        }

        /// An array; absent, it is empty (an order's followers before they existed).
        mutating func array<Element>(
            _ key: StoredKey, _ value: inout [Element], blank: @autoclosure () -> Element,
            _ body: (inout Self, inout Element) throws -> Void
        ) throws {
            guard let index = try member(key) else {
                value = []
                return
            }
            var reader = self
            value = try tape.array(at: index) { element in
                var item = blank()
                reader.current = element
                try body(&reader, &item)
                return item
            }
        }

        mutating func variant(
            _ key: StoredKey, _ tag: inout Int, cases: [StaticString], _ body: (inout Self, Int) throws -> Void
        ) throws {
            let index = try required(key)
            guard tape.kind(at: index) == .object,
                let found = cases.indices.first(where: { tape.find("\(cases[$0])", in: index) != nil }),
                let inner = tape.find("\(cases[found])", in: index)
            else { throw StoredDocumentError(message: "stored JSON document has an unknown case for \(key.text)") }
            tag = found
            try standing(on: inner) { try body(&$0, found) }
        }

        private mutating func standing(on index: Int, _ body: (inout Self) throws -> Void) throws {
            let outer = current
            current = index
            defer { current = outer }
            try body(&self)
        }
    }

    /// Writes each field it is given as JSON (``StoredCoder``). An object's brace is written with its first
    /// member, so a value's fields and a plain value (``StoredKey/this``) are coded alike.
    struct Writer: StoredCoder {
        let output = JSONWriter(capacity: 1024)
        var isReading: Bool { false }
        var version: UInt8 { StoredState.version }
        /// For each value being written: whether it is an object with a member yet (nil: no brace written).
        private var objects: [Bool?] = []

        /// Writes `key`'s name when the value is a member, opening the object it is in if need be.
        private mutating func start(_ key: StoredKey) {
            guard let name = key.name, let last = objects.indices.last else { return }
            switch objects[last] {
            case nil: output.writeRaw("{")
            case true?: output.writeRaw(",")
            case false?: break
            }
            objects[last] = true
            output.writeString("\(name)")
            output.writeRaw(":")
        }

        /// One value: an object if `body` writes members, else what it writes.
        private mutating func value(_ body: (inout Self) throws -> Void) throws {
            objects.append(nil)
            try body(&self)
            if objects.removeLast() != nil { output.writeRaw("}") }
        }

        mutating func string(_ key: StoredKey, _ value: inout String) {
            start(key)
            output.writeString(value)
        }

        mutating func int(_ key: StoredKey, _ value: inout Int) {
            start(key)
            output.writeInt(value)
        }

        mutating func double(_ key: StoredKey, _ value: inout Double) throws {
            start(key)
            try output.writeDouble(value)
        }

        mutating func bool(_ key: StoredKey, _ value: inout Bool) {
            start(key)
            output.writeBool(value)
        }

        mutating func bytes(_ key: StoredKey, _ value: inout [UInt8]) {
            start(key)
            output.writeString(String(decoding: value, as: UTF8.self))
        }

        mutating func nested(_ key: StoredKey, _ body: (inout Self) throws -> Void) throws {
            start(key)
            try value(body)
        }

        mutating func optional<Value>(
            _ key: StoredKey, _ value: inout Value?, blank: @autoclosure () -> Value,
            _ body: (inout Self, inout Value) throws -> Void
        ) throws {
            guard var present = value else { return }
            start(key)
            try self.value { try body(&$0, &present) }
        }

        mutating func array<Element>(
            _ key: StoredKey, _ value: inout [Element], blank: @autoclosure () -> Element,
            _ body: (inout Self, inout Element) throws -> Void
        ) throws {
            start(key)
            output.writeRaw("[")
            for (position, element) in value.enumerated() {
                if position > 0 { output.writeRaw(",") }
                var element = element
                try self.value { try body(&$0, &element) }
            }
            output.writeRaw("]")
        }

        mutating func variant(
            _ key: StoredKey, _ tag: inout Int, cases: [StaticString], _ body: (inout Self, Int) throws -> Void
        ) throws {
            let tag = tag
            try nested(key) { writer in
                try writer.nested(StoredKey(stringLiteral: cases[tag])) { try body(&$0, tag) }
            }
        }
    }
}
