import Foundation

/// A JSON value with ordered object members.
///
/// The core parses inbound events into this type (so that every field can be checked with a precise
/// reason) and builds APNs payloads with it (so that key order, number formatting and the byte count
/// are deterministic: the byte count decides whether a payload fits in 4096 bytes).
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

    /// A short name of the JSON type, for rejection messages.
    var typeName: String {
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
        for (key, value) in members { self[key] = value }
    }

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

extension JSONValue: Decodable {
    private struct AnyKey: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

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

    /// Parses UTF-8 JSON text; nil when it is not valid JSON.
    ///
    /// A direct parser (every event body and every simulated push goes through here), with the
    /// same answers as decoding through `JSONDecoder`: members sorted by key, the first of
    /// duplicate keys kept, a trailing comma accepted, integral numbers that fit as `.int`
    /// (`1.0` and `1e2` too), non-finite numbers, lone surrogates and raw control characters refused.
    package static func parse<Bytes: Collection<UInt8>>(_ bytes: Bytes) -> JSONValue? {
        let parsed = bytes.withContiguousStorageIfAvailable { buffer in
            var parser = JSONParser(buffer)
            return parser.document()
        }
        if let parsed { return parsed }
        let copy = Array(bytes)
        return copy.withUnsafeBufferPointer { buffer in
            var parser = JSONParser(buffer)
            return parser.document()
        }
    }
}

/// A recursive-descent JSON parser over UTF-8 bytes (RFC 8259, plus `JSONDecoder`'s leniencies).
private struct JSONParser {
    let bytes: UnsafeBufferPointer<UInt8>
    var index = 0
    var depth = 0
    static let maximumDepth = 512

    init(_ bytes: UnsafeBufferPointer<UInt8>) { self.bytes = bytes }

    mutating func document() -> JSONValue? {
        guard let value = value() else { return nil }
        skipWhitespace()
        return index == bytes.count ? value : nil
    }

    mutating func skipWhitespace() {
        while index < bytes.count {
            switch bytes[index] {
            case 0x20, 0x0A, 0x0D, 0x09: index += 1
            default: return
            }
        }
    }

    mutating func value() -> JSONValue? {
        skipWhitespace()
        guard index < bytes.count else { return nil }
        switch bytes[index] {
        case UInt8(ascii: "{"): return object()
        case UInt8(ascii: "["): return array()
        case UInt8(ascii: "\""): return string().map(JSONValue.string)
        case UInt8(ascii: "t"): return literal("true", .bool(true))
        case UInt8(ascii: "f"): return literal("false", .bool(false))
        case UInt8(ascii: "n"): return literal("null", .null)
        default: return number()
        }
    }

    mutating func literal(_ text: StaticString, _ value: JSONValue) -> JSONValue? {
        let count = text.utf8CodeUnitCount
        guard index + count <= bytes.count else { return nil }
        for offset in 0..<count where bytes[index + offset] != text.utf8Start[offset] { return nil }
        index += count
        return value
    }

    mutating func object() -> JSONValue? {
        depth += 1
        defer { depth -= 1 }
        guard depth <= Self.maximumDepth else { return nil }
        index += 1
        var members: [(key: String, value: JSONValue)] = []
        var seen = Set<String>()
        skipWhitespace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "}") {
            index += 1
            return .object(JSONObject())
        }
        while true {
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: "\""), let key = string() else { return nil }
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { return nil }
            index += 1
            guard let value = value() else { return nil }
            if seen.insert(key).inserted { members.append((key, value)) }
            skipWhitespace()
            guard index < bytes.count else { return nil }
            if bytes[index] == UInt8(ascii: ",") {
                index += 1
                skipWhitespace()
                if index < bytes.count, bytes[index] == UInt8(ascii: "}") { break }
                continue
            }
            guard bytes[index] == UInt8(ascii: "}") else { return nil }
            break
        }
        index += 1
        members.sort { $0.key < $1.key }
        return .object(JSONObject(members.map { ($0.key, $0.value) }))
    }

    mutating func array() -> JSONValue? {
        depth += 1
        defer { depth -= 1 }
        guard depth <= Self.maximumDepth else { return nil }
        index += 1
        var elements: [JSONValue] = []
        skipWhitespace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "]") {
            index += 1
            return .array([])
        }
        while true {
            guard let element = value() else { return nil }
            elements.append(element)
            skipWhitespace()
            guard index < bytes.count else { return nil }
            if bytes[index] == UInt8(ascii: ",") {
                index += 1
                skipWhitespace()
                if index < bytes.count, bytes[index] == UInt8(ascii: "]") { break }
                continue
            }
            guard bytes[index] == UInt8(ascii: "]") else { return nil }
            break
        }
        index += 1
        return .array(elements)
    }

    /// A string at `index` (its opening quote); nil when malformed or not valid UTF-8.
    mutating func string() -> String? {
        index += 1
        let start = index
        // Fast path: no escapes.
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "\"") {
                let text = UTF8Text.string(UnsafeBufferPointer(rebasing: bytes[start..<index]))
                index += 1
                return text
            }
            if byte == UInt8(ascii: "\\") { break }
            if byte < 0x20 { return nil }
            index += 1
        }
        var scalars: [UInt8] = Array(bytes[start..<index])
        while index < bytes.count {
            let byte = bytes[index]
            switch byte {
            case UInt8(ascii: "\""):
                index += 1
                return scalars.withUnsafeBufferPointer(UTF8Text.string)
            case UInt8(ascii: "\\"):
                index += 1
                guard index < bytes.count else { return nil }
                let escape = bytes[index]
                index += 1
                switch escape {
                case UInt8(ascii: "\""): scalars.append(0x22)
                case UInt8(ascii: "\\"): scalars.append(0x5C)
                case UInt8(ascii: "/"): scalars.append(0x2F)
                case UInt8(ascii: "b"): scalars.append(0x08)
                case UInt8(ascii: "f"): scalars.append(0x0C)
                case UInt8(ascii: "n"): scalars.append(0x0A)
                case UInt8(ascii: "r"): scalars.append(0x0D)
                case UInt8(ascii: "t"): scalars.append(0x09)
                case UInt8(ascii: "u"):
                    guard var code = hex4() else { return nil }
                    if (0xD800...0xDBFF).contains(code) {
                        guard index + 1 < bytes.count, bytes[index] == UInt8(ascii: "\\"),
                            bytes[index + 1] == UInt8(ascii: "u")
                        else { return nil }
                        index += 2
                        guard let low = hex4(), (0xDC00...0xDFFF).contains(low) else { return nil }
                        code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
                    } else if (0xDC00...0xDFFF).contains(code) {
                        return nil
                    }
                    guard let scalar = Unicode.Scalar(code) else { return nil }
                    scalars.append(contentsOf: String(Character(scalar)).utf8)
                default: return nil
                }
            default:
                if byte < 0x20 { return nil }
                scalars.append(byte)
                index += 1
            }
        }
        return nil
    }

    mutating func hex4() -> UInt32? {
        guard index + 4 <= bytes.count else { return nil }
        var code: UInt32 = 0
        for _ in 0..<4 {
            let byte = bytes[index]
            let digit: UInt32
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = UInt32(byte - UInt8(ascii: "0"))
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = UInt32(byte - UInt8(ascii: "a") + 10)
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = UInt32(byte - UInt8(ascii: "A") + 10)
            default: return nil
            }
            code = code << 4 | digit
            index += 1
        }
        return code
    }

    /// `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`
    mutating func number() -> JSONValue? {
        let start = index
        func digits() -> Int {
            let from = index
            while index < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) { index += 1 }
            return index - from
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: "-") { index += 1 }
        guard index < bytes.count else { return nil }
        if bytes[index] == UInt8(ascii: "0") {
            index += 1
            if index < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) { return nil }
        } else if digits() == 0 {
            return nil
        }
        var integral = true
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
            index += 1
            integral = false
            guard digits() > 0 else { return nil }
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
            index += 1
            integral = false
            if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") {
                index += 1
            }
            guard digits() > 0 else { return nil }
        }
        let text = String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)
        if integral, let int = Int(text) { return .int(int) }
        guard let double = Double(text), double.isFinite else { return nil }
        // As JSONDecoder reads `1.0` or `1e2` as an Int; an integer literal too large stays a double.
        if !integral, double == double.rounded(), let int = Int(exactly: double) { return .int(int) }
        return .double(double)
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

    private func write(to out: inout [UInt8], pretty: Bool, indent: Int) {
        switch self {
        case .null:
            out.append(contentsOf: Array("null".utf8))
        case .bool(let value):
            out.append(contentsOf: Array((value ? "true" : "false").utf8))
        case .int(let value):
            out.append(contentsOf: Array(String(value).utf8))
        case .double(let value):
            out.append(contentsOf: Array(Self.format(value).utf8))
        case .string(let value):
            Self.appendQuoted(value, to: &out)
        case .array(let values):
            if values.isEmpty {
                out.append(contentsOf: Array("[]".utf8))
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
                out.append(contentsOf: Array("{}".utf8))
                return
            }
            out.append(UInt8(ascii: "{"))
            for (index, member) in object.members.enumerated() {
                if index > 0 { out.append(UInt8(ascii: ",")) }
                if pretty { Self.newline(&out, indent + 1) }
                Self.appendQuoted(member.key, to: &out)
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

    /// Integral values print without a fraction; others with Swift's shortest round-trip form,
    /// which is valid JSON (`1e-05`, `785412000.5`). Non-finite values cannot occur in payloads the
    /// core builds (every date comes from a parsed timestamp or finite arithmetic); they print as null.
    static func format(_ value: Double) -> String {
        guard value.isFinite else { return "null" }
        if value == value.rounded(), abs(value) < 9_007_199_254_740_992 { return String(Int64(value)) }
        return String(value)
    }

    private static let hexDigits = Array("0123456789abcdef".utf8)

    /// Appends `string` as a JSON string literal: quotes, backslashes and control characters
    /// escaped, everything else as its UTF-8 bytes. Shared with the worker's streaming encoder.
    package static func appendQuoted(_ string: String, to out: inout [UInt8]) {
        let plain = string.utf8.withContiguousStorageIfAvailable { utf8 in
            !utf8.contains { $0 < 0x20 || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") }
        }
        out.append(UInt8(ascii: "\""))
        if plain == true {
            out.append(contentsOf: string.utf8)
            out.append(UInt8(ascii: "\""))
            return
        }
        // Runs of plain bytes are copied whole; the content-state JSON kept in every stored state is
        // full of quotes, so this path is a hot one.
        var text = string
        text.withUTF8 { bytes in
            var start = 0
            for index in 0..<bytes.count {
                let byte = bytes[index]
                guard byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") else { continue }
                out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[start..<index]))
                out.append(UInt8(ascii: "\\"))
                switch byte {
                case UInt8(ascii: "\n"): out.append(UInt8(ascii: "n"))
                case UInt8(ascii: "\r"): out.append(UInt8(ascii: "r"))
                case UInt8(ascii: "\t"): out.append(UInt8(ascii: "t"))
                case 0..<0x20:
                    out.append(UInt8(ascii: "u"))
                    out.append(UInt8(ascii: "0"))
                    out.append(UInt8(ascii: "0"))
                    out.append(hexDigits[Int(byte >> 4)])
                    out.append(hexDigits[Int(byte & 0xF)])
                default: out.append(byte)  // `"` or `\`
                }
                start = index + 1
            }
            out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[start..<bytes.count]))
        }
        out.append(UInt8(ascii: "\""))
    }

    /// The text of one JSON string literal, its quotes included: escapes resolved, surrogate pairs
    /// joined. Nil when it is malformed, has a lone surrogate or a raw control character, or is not
    /// valid UTF-8. For decoders that find the literal themselves.
    package static func string(literal: UnsafeBufferPointer<UInt8>) -> String? {
        guard literal.first == UInt8(ascii: "\"") else { return nil }
        var parser = JSONParser(literal)
        guard let text = parser.string(), parser.index == literal.count else { return nil }
        return text
    }
}

/// Text from UTF-8 bytes, for the parsers.
package enum UTF8Text {
    /// The bytes as a string; nil when they are not valid UTF-8.
    ///
    /// ASCII (nearly every key and value the worker reads) takes `String(decoding:as:)`, which is
    /// specialised and inlined; `String(validating:as:)` is generic in the standard library and looks
    /// its metadata up on every call, which made it 3 % of a worker's CPU.
    @inlinable
    package static func string(_ bytes: UnsafeBufferPointer<UInt8>) -> String? {
        var high: UInt8 = 0
        for byte in bytes { high |= byte }
        return high < 0x80 ? String(decoding: bytes, as: UTF8.self) : String(validating: bytes, as: UTF8.self)
    }
}
