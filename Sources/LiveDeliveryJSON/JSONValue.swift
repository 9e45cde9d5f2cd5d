/// A JSON value with ordered object members: the package's one JSON value type.
///
/// The core parses inbound events and configuration files into it (so that every field can be
/// checked with a precise reason) and builds APNs payloads with it (so that key order, number
/// formatting and the byte count are deterministic: the byte count decides whether a payload fits in
/// 4096 bytes). apns-sim parses the payloads it receives into it and reports them in its control API.
///
/// Parsed objects have their members sorted by key, so that equal documents are equal values
/// whatever the order of their text; integral numbers that fit are `.int` (`1.0` and `1e2` too).
package enum JSONValue: Sendable, Hashable {
    case null
    case bool(Bool)
    case int(Int)
    case double(Double)
    case string(String)
    case array([JSONValue])
    case object(JSONObject)

    /// The member `key` when this is an object, else nil.
    package subscript(key: String) -> JSONValue? {
        if case .object(let object) = self { return object[key] }
        return nil
    }

    /// The string, when this is one.
    package var stringValue: String? {
        if case .string(let value) = self { return value }
        return nil
    }

    /// The number (an integer as a `Double` too), when this is one.
    package var numberValue: Double? {
        switch self {
        case .int(let value): Double(value)
        case .double(let value): value
        default: nil
        }
    }

    /// A short name of the JSON type, for rejection messages.
    package var typeName: String {
        switch self {
        case .null: "null"
        case .bool: "boolean"
        case .int: "integer"
        case .double: "number"
        case .string: "string"
        case .array: "array"
        case .object: "object"
        }
    }
}

/// A JSON object that keeps its members in insertion order.
package struct JSONObject: Sendable, Hashable {
    package struct Member: Sendable, Hashable {
        package var key: String
        package var value: JSONValue
    }

    package private(set) var members: [Member] = []

    package init() {}

    package init(_ members: [(String, JSONValue)]) {
        self.members.reserveCapacity(members.count)
        for (key, value) in members { self[key] = value }
    }

    /// Room for `count` members, so that building an object of known size allocates once.
    package mutating func reserveCapacity(_ count: Int) { members.reserveCapacity(count) }

    /// Members known to have distinct keys (the parser's).
    init(sortedUniqueMembers members: [Member]) { self.members = members }

    package var keys: [String] { members.map(\.key) }

    /// Reads a member; setting nil removes it, setting a value replaces it in place or appends it.
    package subscript(key: String) -> JSONValue? {
        get { members.first { $0.key == key }?.value }
        set {
            if let index = members.firstIndex(where: { $0.key == key }) {
                if let newValue { members[index].value = newValue } else { members.remove(at: index) }
            } else if let newValue {
                members.append(Member(key: key, value: newValue))
            }
        }
    }
}

// MARK: - Parsing

extension JSONValue {
    /// Parses UTF-8 JSON text; nil when it is not valid JSON.
    ///
    /// `allowingTrailingCommas` (the default) answers as `JSONDecoder` does, which reads `[1,]`;
    /// apns-sim asks for strict RFC 8259. Members are sorted by key and the first of duplicate keys
    /// kept; non-finite numbers, lone surrogates, raw control characters and nesting deeper than
    /// 512 are refused (see ``JSONTape``).
    package static func parse(_ bytes: [UInt8], allowingTrailingCommas: Bool = true) -> JSONValue? {
        try? JSONValue(parsing: bytes, allowingTrailingCommas: allowingTrailingCommas)
    }

    /// Parses UTF-8 JSON text from any byte collection (a NIO buffer's view, a slice).
    package static func parse<Bytes: Collection<UInt8>>(
        _ bytes: Bytes, allowingTrailingCommas: Bool = true
    ) -> JSONValue? {
        parse(Array(bytes), allowingTrailingCommas: allowingTrailingCommas)
    }

    /// Parses UTF-8 JSON text; a `DecodingError.dataCorrupted` saying where it is not valid JSON.
    package init(parsing bytes: [UInt8], allowingTrailingCommas: Bool = true) throws {
        let tape = try JSONTape(bytes, allowingTrailingCommas: allowingTrailingCommas)
        self = try JSONValue(tape: tape, at: 0)
    }

    /// The value at `index` of a parsed tape.
    package init(tape: JSONTape, at index: Int) throws {
        switch tape.kind(at: index) {
        case .null: self = .null
        case .true: self = .bool(true)
        case .false: self = .bool(false)
        case .string: self = .string(try tape.string(at: index))
        case .number:
            // As JSONDecoder reads numbers: an integer when it is one (`1.0` and `1e2` too) and fits;
            // an integer literal too large for an Int stays a double.
            if !tape.tokens[index].flag, let int = try? tape.integer(Int.self, at: index) {
                self = .int(int)
            } else {
                let double = try tape.double(at: index)
                if tape.tokens[index].flag, double == double.rounded(), let int = Int(exactly: double) {
                    self = .int(int)
                } else {
                    self = .double(double)
                }
            }
        case .array:
            self = .array(try tape.array(at: index) { try JSONValue(tape: tape, at: $0) })
        case .object:
            let end = tape.next(after: index)
            var members: [JSONObject.Member] = []
            members.reserveCapacity(Int(tape.tokens[index].count))
            var seen = Set<String>()
            var member = index + 1
            while member < end {
                let key = try tape.string(at: member)
                if seen.insert(key).inserted {
                    members.append(.init(key: key, value: try JSONValue(tape: tape, at: member + 1)))
                }
                member = tape.next(after: member + 1)
            }
            members.sort { $0.key < $1.key }
            self = .object(JSONObject(sortedUniqueMembers: members))
        }
    }
}

extension JSONValue: Codable {
    private struct AnyKey: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    /// Through a Foundation decoder (for documents that embed a value, such as apns-sim's records):
    /// the same value ``parse(_:allowingTrailingCommas:)`` gives.
    package init(from decoder: any Decoder) throws {
        if let keyed = try? decoder.container(keyedBy: AnyKey.self) {
            var object = JSONObject()
            // Sorted so that parsing is deterministic whatever the decoder's dictionary order.
            for key in keyed.allKeys.sorted(by: { $0.stringValue < $1.stringValue }) {
                object[key.stringValue] = try keyed.decode(JSONValue.self, forKey: key)
            }
            self = .object(object)
            return
        }
        if var unkeyed = try? decoder.unkeyedContainer() {
            var array: [JSONValue] = []
            while !unkeyed.isAtEnd { array.append(try unkeyed.decode(JSONValue.self)) }
            self = .array(array)
            return
        }
        let single = try decoder.singleValueContainer()
        if single.decodeNil() {
            self = .null
        } else if let bool = try? single.decode(Bool.self) {
            self = .bool(bool)
        } else if let int = try? single.decode(Int.self) {
            self = .int(int)
        } else if let double = try? single.decode(Double.self) {
            self = .double(double)
        } else {
            self = .string(try single.decode(String.self))
        }
    }

    package func encode(to encoder: any Encoder) throws {
        switch self {
        case .object(let object):
            var container = encoder.container(keyedBy: AnyKey.self)
            for member in object.members { try container.encode(member.value, forKey: AnyKey(stringValue: member.key)) }
        case .array(let values):
            var container = encoder.unkeyedContainer()
            for value in values { try container.encode(value) }
        default:
            var container = encoder.singleValueContainer()
            switch self {
            case .null: try container.encodeNil()
            case .bool(let value): try container.encode(value)
            case .int(let value): try container.encode(value)
            case .double(let value): try container.encode(value)
            case .string(let value): try container.encode(value)
            case .array, .object: break
            }
        }
    }
}

// MARK: - Serialising

extension JSONValue {
    /// UTF-8 JSON text: compact (the bytes sent to APNs) or pretty (two-space indent, for people).
    package func serialized(pretty: Bool = false) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(512)
        write(to: &out, pretty: pretty, indent: 0)
        return out
    }

    /// The compact JSON text as a String.
    package var compactText: String { String(decoding: serialized(), as: UTF8.self) }

    /// Re-indents compact JSON text (as ``serialized(pretty:)`` makes it) without reordering keys.
    package static func prettyPrinted(_ compact: [UInt8]) -> String {
        var out = ""
        var indent = 0
        var inString = false
        var escaped = false
        var index = 0
        func newline(_ level: Int) { out += "\n" + String(repeating: "  ", count: level) }
        let bytes = compact
        while index < bytes.count {
            let byte = bytes[index]
            if inString {
                var end = index
                while end < bytes.count {
                    let b = bytes[end]
                    if escaped {
                        escaped = false
                    } else if b == UInt8(ascii: "\\") {
                        escaped = true
                    } else if b == UInt8(ascii: "\"") {
                        break
                    }
                    end += 1
                }
                out += String(decoding: bytes[index..<min(end + 1, bytes.count)], as: UTF8.self)
                inString = false
                index = end + 1
                continue
            }
            switch byte {
            case UInt8(ascii: "\""):
                out += "\""
                inString = true
            case UInt8(ascii: "{"), UInt8(ascii: "["):
                let close: UInt8 = byte == UInt8(ascii: "{") ? UInt8(ascii: "}") : UInt8(ascii: "]")
                if index + 1 < bytes.count, bytes[index + 1] == close {
                    out += byte == UInt8(ascii: "{") ? "{}" : "[]"
                    index += 2
                    continue
                }
                out += String(UnicodeScalar(byte))
                indent += 1
                newline(indent)
            case UInt8(ascii: "}"), UInt8(ascii: "]"):
                indent -= 1
                newline(indent)
                out += String(UnicodeScalar(byte))
            case UInt8(ascii: ","):
                out += ","
                newline(indent)
            case UInt8(ascii: ":"):
                out += ": "
            default:
                out += String(UnicodeScalar(byte))
            }
            index += 1
        }
        return out
    }

    /// The decimal digits of `value`, with no `String` in between.
    private static func appendDecimal(_ value: Int, to out: inout [UInt8]) {
        if value < 0 { out.append(UInt8(ascii: "-")) }
        var magnitude = value.magnitude
        var digits: (UInt64, UInt64, UInt64) = (0, 0, 0)  // 24 bytes: room for 20 digits
        var count = 0
        withUnsafeMutableBytes(of: &digits) { buffer in
            repeat {
                buffer[23 - count] = UInt8(ascii: "0") + UInt8(magnitude % 10)
                magnitude /= 10
                count += 1
            } while magnitude > 0
            out.append(contentsOf: buffer[(24 - count)...])
        }
    }

    private func write(to out: inout [UInt8], pretty: Bool, indent: Int) {
        switch self {
        case .null:
            out.append(contentsOf: "null".utf8)
        case .bool(let value):
            out.append(contentsOf: (value ? "true" : "false").utf8)
        case .int(let value):
            Self.appendDecimal(value, to: &out)
        case .double(let value):
            out.append(contentsOf: JSONWriter.format(value).utf8)
        case .string(let value):
            JSONWriter.appendQuoted(value, to: &out)
        case .array(let values):
            if values.isEmpty {
                out.append(contentsOf: "[]".utf8)
                return
            }
            out.append(UInt8(ascii: "["))
            for (index, value) in values.enumerated() {
                if index > 0 { out.append(UInt8(ascii: ",")) }
                if pretty { Self.newline(&out, indent + 1) }
                value.write(to: &out, pretty: pretty, indent: indent + 1)
            }
            if pretty { Self.newline(&out, indent) }
            out.append(UInt8(ascii: "]"))
        case .object(let object):
            if object.members.isEmpty {
                out.append(contentsOf: "{}".utf8)
                return
            }
            out.append(UInt8(ascii: "{"))
            for (index, member) in object.members.enumerated() {
                if index > 0 { out.append(UInt8(ascii: ",")) }
                if pretty { Self.newline(&out, indent + 1) }
                JSONWriter.appendQuoted(member.key, to: &out)
                out.append(UInt8(ascii: ":"))
                if pretty { out.append(UInt8(ascii: " ")) }
                member.value.write(to: &out, pretty: pretty, indent: indent + 1)
            }
            if pretty { Self.newline(&out, indent) }
            out.append(UInt8(ascii: "}"))
        }
    }

    private static func newline(_ out: inout [UInt8], _ indent: Int) {
        out.append(UInt8(ascii: "\n"))
        out.append(contentsOf: repeatElement(UInt8(ascii: " "), count: indent * 2))
    }
}
