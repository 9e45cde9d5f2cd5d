public import Foundation

/// A Swift value that can be sent as a bind parameter, in PostgreSQL's text format.
public protocol PostgresEncodable: Sendable {
    /// The parameter's type OID; `.unspecified` lets the server infer it from the statement.
    static var postgresType: PostgresDataType { get }
    /// The value in PostgreSQL's text input format.
    var postgresText: String { get }
}

/// A value that can also be an element of an array parameter (for `= ANY($1)`, or columns of
/// `unnest($1::text[], $2::json[], …)`).
public protocol PostgresArrayElement: PostgresEncodable {
    static var postgresArrayType: PostgresDataType { get }
    /// Calls `body` with the UTF-8 bytes of ``postgresText`` (a type that holds bytes already
    /// hands them over without making a `String`).
    func withPostgresTextBytes<Result>(_ body: (UnsafeBufferPointer<UInt8>) throws -> Result) rethrows -> Result
}

extension PostgresArrayElement {
    public func withPostgresTextBytes<Result>(_ body: (UnsafeBufferPointer<UInt8>) throws -> Result) rethrows
        -> Result
    {
        var text = postgresText
        return try text.withUTF8(body)
    }
}

extension String: PostgresArrayElement {
    /// Untyped, so a string binds to text, varchar, uuid, enum or jsonb columns alike.
    public static var postgresType: PostgresDataType { .unspecified }
    public static var postgresArrayType: PostgresDataType { .unspecified }
    public var postgresText: String { self }
}

extension Substring: PostgresArrayElement {
    public static var postgresType: PostgresDataType { .unspecified }
    public static var postgresArrayType: PostgresDataType { .unspecified }
    public var postgresText: String { String(self) }
}

extension Int: PostgresArrayElement {
    public static var postgresType: PostgresDataType { .int8 }
    public static var postgresArrayType: PostgresDataType { .int8Array }
    public var postgresText: String { String(self) }
}

extension Int64: PostgresArrayElement {
    public static var postgresType: PostgresDataType { .int8 }
    public static var postgresArrayType: PostgresDataType { .int8Array }
    public var postgresText: String { String(self) }
}

extension Int32: PostgresArrayElement {
    public static var postgresType: PostgresDataType { .int4 }
    public static var postgresArrayType: PostgresDataType { .int4Array }
    public var postgresText: String { String(self) }
}

extension Int16: PostgresArrayElement {
    public static var postgresType: PostgresDataType { .int2 }
    public static var postgresArrayType: PostgresDataType { .int2Array }
    public var postgresText: String { String(self) }
}

extension Double: PostgresArrayElement {
    public static var postgresType: PostgresDataType { .float8 }
    public static var postgresArrayType: PostgresDataType { .float8Array }
    public var postgresText: String {
        if isNaN { return "NaN" }
        if isInfinite { return self < 0 ? "-Infinity" : "Infinity" }
        return description  // shortest representation that reads back exactly
    }
}

extension Bool: PostgresArrayElement {
    public static var postgresType: PostgresDataType { .bool }
    public static var postgresArrayType: PostgresDataType { .boolArray }
    public var postgresText: String { self ? "t" : "f" }
}

extension UUID: PostgresArrayElement {
    public static var postgresType: PostgresDataType { .uuid }
    public static var postgresArrayType: PostgresDataType { .uuidArray }
    public var postgresText: String { uuidString.lowercased() }
}

extension Date: PostgresArrayElement {
    /// `timestamptz`, rounded to the microsecond, written in UTC (`2024-05-01 12:30:00.123456+00`).
    public static var postgresType: PostgresDataType { .timestamptz }
    public static var postgresArrayType: PostgresDataType { .timestamptzArray }
    public var postgresText: String { PostgresTimestamp.format(self) }
}

/// Arrays of strings, integers, … bind as one array parameter: `WHERE id = ANY(\(ids))`.
/// (`[UInt8]` is not an array parameter: it binds as `bytea`.)
extension Array: PostgresEncodable where Element: PostgresArrayElement {
    public static var postgresType: PostgresDataType { Element.postgresArrayType }
    public var postgresText: String { PostgresArrayText.make(self) { $0 } }
}

/// An array parameter whose elements may be NULL, for the columns of `unnest(…)`:
/// `unnest(\(ids)::text[], \(PostgresNullableArray(users))::text[])`.
public struct PostgresNullableArray<Element: PostgresArrayElement>: PostgresEncodable {
    public var elements: [Element?]
    public init(_ elements: [Element?]) { self.elements = elements }
    public static var postgresType: PostgresDataType { Element.postgresArrayType }
    public var postgresText: String { PostgresArrayText.make(elements) { $0 } }
}

enum PostgresArrayText {
    /// The array literal: every element quoted, NULL for nil.
    static func make<Item, Element: PostgresArrayElement>(_ items: [Item], _ element: (Item) -> Element?) -> String {
        // Built from UTF-8 bytes: `"` and `\` are ASCII, so escaping them byte by byte is exact, and
        // much cheaper than walking Characters (a batch binds thousands of elements).
        var text: [UInt8] = [UInt8(ascii: "{")]
        text.reserveCapacity(items.count * 16 + 2)
        for (index, item) in items.enumerated() {
            if index > 0 { text.append(UInt8(ascii: ",")) }
            guard let value = element(item) else {
                text.append(contentsOf: "NULL".utf8)
                continue
            }
            text.append(UInt8(ascii: "\""))
            value.withPostgresTextBytes { bytes in
                // Runs without `"` or `\` are copied whole; those two get a backslash.
                var start = 0
                var index = 0
                while index < bytes.count {
                    let byte = bytes[index]
                    if byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") {
                        text.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[start..<index]))
                        text.append(UInt8(ascii: "\\"))
                        start = index
                    }
                    index += 1
                }
                text.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[start..<bytes.count]))
            }
            text.append(UInt8(ascii: "\""))
        }
        text.append(UInt8(ascii: "}"))
        return String(decoding: text, as: UTF8.self)
    }
}

/// Bytes bound as `bytea` (`\x` hex text form).
public struct PostgresBytes: PostgresEncodable, Hashable {
    public var bytes: [UInt8]
    public init(_ bytes: [UInt8]) { self.bytes = bytes }
    public static var postgresType: PostgresDataType { .bytea }
    public var postgresText: String { PostgresHex.encode(bytes) }
}

extension PostgresQuery.StringInterpolation {
    /// Bytes, sent as a `bytea` parameter.
    public mutating func appendInterpolation(_ bytes: [UInt8]) {
        appendInterpolation(PostgresBytes(bytes))
    }

    /// Optional bytes, sent as a `bytea` parameter or NULL.
    public mutating func appendInterpolation(_ bytes: [UInt8]?) {
        appendInterpolation(bytes.map(PostgresBytes.init))
    }

    /// Bytes, sent as a `bytea` parameter.
    public mutating func appendInterpolation(_ bytes: Data) {
        appendInterpolation(PostgresBytes(Array(bytes)))
    }
}

enum PostgresHex {
    private static let digits = Array("0123456789abcdef".utf8)

    static func encode(_ bytes: [UInt8]) -> String {
        String(unsafeUninitializedCapacity: 2 + bytes.count * 2) { buffer in
            buffer[0] = UInt8(ascii: "\\")
            buffer[1] = UInt8(ascii: "x")
            var index = 2
            for byte in bytes {
                buffer[index] = digits[Int(byte >> 4)]
                buffer[index + 1] = digits[Int(byte & 0x0f)]
                index += 2
            }
            return index
        }
    }

    /// Decodes the `\x…` form; nil when malformed.
    static func decode(_ text: String) -> [UInt8]? {
        let utf8 = Array(text.utf8)
        guard utf8.count >= 2, utf8[0] == UInt8(ascii: "\\"), utf8[1] == UInt8(ascii: "x"), utf8.count % 2 == 0
        else { return nil }
        var bytes: [UInt8] = []
        bytes.reserveCapacity((utf8.count - 2) / 2)
        var index = 2
        while index < utf8.count {
            guard let high = nibble(utf8[index]), let low = nibble(utf8[index + 1]) else { return nil }
            bytes.append(high << 4 | low)
            index += 2
        }
        return bytes
    }

    private static func nibble(_ character: UInt8) -> UInt8? {
        switch character {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): character - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): character - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): character - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}
