import Foundation

/// A JSON value with ordered object members.
///
/// The core parses inbound events into this type (so that every field can be checked with a precise
/// reason) and builds APNs payloads with it (so that key order, number formatting and the byte count
/// are deterministic: the byte count decides whether a payload fits in 4096 bytes).
public enum JSONValue: Sendable, Hashable {
    case null
    case bool(Bool)
    case int(Int)
    case double(Double)
    case string(String)
    case array([JSONValue])
    case object(JSONObject)

    /// The member `key` when this is an object, else nil.
    public subscript(key: String) -> JSONValue? {
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
public struct JSONObject: Sendable, Hashable {
    public struct Member: Sendable, Hashable {
        public var key: String
        public var value: JSONValue
    }

    public private(set) var members: [Member] = []

    public init() {}

    public init(_ members: [(String, JSONValue)]) {
        for (key, value) in members { self[key] = value }
    }

    public var keys: [String] { members.map(\.key) }

    /// Reads a member; setting nil removes it, setting a value replaces it in place or appends it.
    public subscript(key: String) -> JSONValue? {
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

    public init(from decoder: any Decoder) throws {
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
    public static func parse(_ bytes: [UInt8]) -> JSONValue? {
        try? JSONDecoder().decode(JSONValue.self, from: Data(bytes))
    }
}

// MARK: - Serialising

extension JSONValue {
    /// UTF-8 JSON text: compact (the bytes sent to APNs) or pretty (two-space indent, for people).
    public func serialized(pretty: Bool = false) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(512)
        write(to: &out, pretty: pretty, indent: 0)
        return out
    }

    /// The compact JSON text as a String.
    public var compactText: String { String(decoding: serialized(), as: UTF8.self) }

    /// Re-indents compact JSON text (as ``serialized(pretty:)`` makes it) without reordering keys.
    public static func prettyPrinted(_ compact: [UInt8]) -> String {
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
            Self.writeString(value, to: &out)
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
                Self.writeString(member.key, to: &out)
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

    private static func writeString(_ string: String, to out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        for byte in string.utf8 {
            switch byte {
            case UInt8(ascii: "\""): out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\"")])
            case UInt8(ascii: "\\"): out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\\")])
            case UInt8(ascii: "\n"): out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "n")])
            case UInt8(ascii: "\r"): out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "r")])
            case UInt8(ascii: "\t"): out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "t")])
            case 0..<0x20:
                let hex = Array("0123456789abcdef".utf8)
                out.append(contentsOf: Array("\\u00".utf8))
                out.append(hex[Int(byte >> 4)])
                out.append(hex[Int(byte & 0xF)])
            default: out.append(byte)
            }
        }
        out.append(UInt8(ascii: "\""))
    }
}
