package import Foundation

/// A Swift value that can be sent as a bind parameter.
package protocol PostgresEncodable: Sendable {
    /// The parameter's type OID; `.unspecified` lets the server infer it from the statement.
    static var postgresType: PostgresDataType { get }
    /// The value in PostgreSQL's text input format.
    var postgresText: String { get }
    /// The value as sent: ``postgresText`` unless the type has a cheaper binary form.
    var postgresParameter: PostgresParameterValue { get }
}

extension PostgresEncodable {
    package var postgresParameter: PostgresParameterValue { .text(postgresText) }
}

/// A value that can also be an element of an array parameter (for `= ANY($1)`, or columns of
/// `unnest($1::text[], $2::json[], …)`).
package protocol PostgresArrayElement: PostgresEncodable {
    static var postgresArrayType: PostgresDataType { get }
    /// Calls `body` with the UTF-8 bytes of ``postgresText`` (a type that holds bytes already
    /// hands them over without making a `String`).
    func withPostgresTextBytes<Result>(_ body: (UnsafeBufferPointer<UInt8>) throws -> Result) rethrows -> Result
    /// The element type OID written into a binary array of this element; nil (the default) sends
    /// arrays of it as text.
    ///
    /// Binary arrays spare both sides the quoting and escaping of the text form (a batch binds
    /// hundreds of 2 kB JSON documents), but the server checks the element type against the
    /// parameter's, so only elements whose type is fixed (not inferred from the statement) use them.
    static var postgresBinaryElementType: PostgresDataType? { get }
    /// Appends the element's binary form; called only when ``postgresBinaryElementType`` is set.
    func appendPostgresBinary(to bytes: inout [UInt8])
}

extension PostgresArrayElement {
    package func withPostgresTextBytes<Result>(
        _ body: (UnsafeBufferPointer<UInt8>) throws -> Result
    ) rethrows
        -> Result
    {
        var text = postgresText
        return try text.withUTF8(body)
    }

    package static var postgresBinaryElementType: PostgresDataType? { nil }

    /// The text form's bytes: the binary form of the text-like types.
    package func appendPostgresBinary(to bytes: inout [UInt8]) {
        withPostgresTextBytes { bytes.append(contentsOf: $0) }
    }
}

extension String: PostgresArrayElement {
    /// Untyped, so a string binds to text, varchar, uuid, enum or jsonb columns alike.
    package static var postgresType: PostgresDataType { .unspecified }
    package static var postgresArrayType: PostgresDataType { .unspecified }
    package var postgresText: String { self }
}

extension Substring: PostgresArrayElement {
    package static var postgresType: PostgresDataType { .unspecified }
    package static var postgresArrayType: PostgresDataType { .unspecified }
    package var postgresText: String { String(self) }
}

extension Int: PostgresArrayElement {
    package static var postgresType: PostgresDataType { .int8 }
    package static var postgresArrayType: PostgresDataType { .int8Array }
    package var postgresText: String { String(self) }
    package static var postgresBinaryElementType: PostgresDataType? { .int8 }
    package func appendPostgresBinary(to bytes: inout [UInt8]) { PostgresBinary.append(Int64(self), to: &bytes) }
}

extension Int64: PostgresArrayElement {
    package static var postgresType: PostgresDataType { .int8 }
    package static var postgresArrayType: PostgresDataType { .int8Array }
    package var postgresText: String { String(self) }
    package static var postgresBinaryElementType: PostgresDataType? { .int8 }
    package func appendPostgresBinary(to bytes: inout [UInt8]) { PostgresBinary.append(self, to: &bytes) }
}

extension Int32: PostgresArrayElement {
    package static var postgresType: PostgresDataType { .int4 }
    package static var postgresArrayType: PostgresDataType { .int4Array }
    package var postgresText: String { String(self) }
    package static var postgresBinaryElementType: PostgresDataType? { .int4 }
    package func appendPostgresBinary(to bytes: inout [UInt8]) { PostgresBinary.append(self, to: &bytes) }
}

extension Int16: PostgresArrayElement {
    package static var postgresType: PostgresDataType { .int2 }
    package static var postgresArrayType: PostgresDataType { .int2Array }
    package var postgresText: String { String(self) }
    package static var postgresBinaryElementType: PostgresDataType? { .int2 }
    package func appendPostgresBinary(to bytes: inout [UInt8]) { PostgresBinary.append(self, to: &bytes) }
}

extension Double: PostgresArrayElement {
    package static var postgresType: PostgresDataType { .float8 }
    package static var postgresArrayType: PostgresDataType { .float8Array }
    package var postgresText: String {
        if isNaN { return "NaN" }
        if isInfinite { return self < 0 ? "-Infinity" : "Infinity" }
        return description  // shortest representation that reads back exactly
    }
    package static var postgresBinaryElementType: PostgresDataType? { .float8 }
    package func appendPostgresBinary(to bytes: inout [UInt8]) { PostgresBinary.append(bitPattern, to: &bytes) }
}

extension Bool: PostgresArrayElement {
    package static var postgresType: PostgresDataType { .bool }
    package static var postgresArrayType: PostgresDataType { .boolArray }
    package var postgresText: String { self ? "t" : "f" }
    package static var postgresBinaryElementType: PostgresDataType? { .bool }
    package func appendPostgresBinary(to bytes: inout [UInt8]) { bytes.append(self ? 1 : 0) }
}

extension UUID: PostgresArrayElement {
    package static var postgresType: PostgresDataType { .uuid }
    package static var postgresArrayType: PostgresDataType { .uuidArray }
    package var postgresText: String { uuidString.lowercased() }
    package static var postgresBinaryElementType: PostgresDataType? { .uuid }
    package func appendPostgresBinary(to bytes: inout [UInt8]) {
        withUnsafeBytes(of: uuid) { bytes.append(contentsOf: $0) }
    }
}

extension Date: PostgresArrayElement {
    /// `timestamptz`, rounded to the microsecond, written in UTC (`2024-05-01 12:30:00.123456+00`).
    package static var postgresType: PostgresDataType { .timestamptz }
    package static var postgresArrayType: PostgresDataType { .timestamptzArray }
    package var postgresText: String { PostgresTimestamp.format(self) }
    package static var postgresBinaryElementType: PostgresDataType? { .timestamptz }
    /// Microseconds since 2000-01-01 00:00 UTC (PostgreSQL's integer timestamps), rounded as the text form is.
    package func appendPostgresBinary(to bytes: inout [UInt8]) {
        PostgresBinary.append(PostgresTimestamp.microsecondsSince2000(self), to: &bytes)
    }
}

/// Arrays of strings, integers, … bind as one array parameter: `WHERE id = ANY(\(ids))`.
/// (`[UInt8]` is not an array parameter: it binds as `bytea`.)
extension Array: PostgresEncodable where Element: PostgresArrayElement {
    package static var postgresType: PostgresDataType { Element.postgresArrayType }
    package var postgresText: String {
        // Strings, the common case, skip the generic path (its metadata lookups cost more than the text).
        if Element.self == String.self { return PostgresArrayText.make(unsafeBitCast(self, to: [String].self)) }
        return PostgresArrayText.make(self) { $0 }
    }
    package var postgresParameter: PostgresParameterValue {
        if let bytes = PostgresBinary.eightByteArray(self) { return .binary(bytes) }
        guard let elementType = Element.postgresBinaryElementType else { return .text(postgresText) }
        return .binary(PostgresBinary.array(self, elementType: elementType) { $0 })
    }
}

/// An array parameter whose elements may be NULL, for the columns of `unnest(…)`:
/// `unnest(\(ids)::text[], \(PostgresNullableArray(users))::text[])`.
package struct PostgresNullableArray<Element: PostgresArrayElement>: PostgresEncodable {
    package var elements: [Element?]
    package init(_ elements: [Element?]) { self.elements = elements }
    package static var postgresType: PostgresDataType { Element.postgresArrayType }
    package var postgresText: String {
        if Element.self == String.self { return PostgresArrayText.make(unsafeBitCast(elements, to: [String?].self)) }
        return PostgresArrayText.make(elements) { $0 }
    }
    package var postgresParameter: PostgresParameterValue {
        if let bytes = PostgresBinary.eightByteArray(elements) { return .binary(bytes) }
        guard let elementType = Element.postgresBinaryElementType else { return .text(postgresText) }
        return .binary(PostgresBinary.array(elements, elementType: elementType) { $0 })
    }
}

/// Strings bound as `text[]`, for statements that read the parameter as `text[]` (`unnest(\(…)::text[], …)`,
/// `= ANY(\(…)::text[])`). Typed, so sent as a binary array: each element's bytes as they are, with none of
/// the text form's quoting and escaping (a batch binds thousands of identifiers).
package struct PostgresTextArray: PostgresEncodable {
    private enum Elements: Sendable {
        case strings([String])
        case optionals([String?])
    }
    private let elements: Elements
    package init(_ elements: [String?]) { self.elements = .optionals(elements) }
    package init(_ elements: [String]) { self.elements = .strings(elements) }
    package static var postgresType: PostgresDataType { .textArray }

    package var postgresText: String {
        switch elements {
        case .strings(let strings): PostgresArrayText.make(strings)
        case .optionals(let strings): PostgresArrayText.make(strings)
        }
    }

    package var postgresParameter: PostgresParameterValue {
        switch elements {
        case .strings(let strings): .binary(Self.binary(strings) { $0 })
        case .optionals(let strings): .binary(Self.binary(strings) { $0 })
        }
    }

    /// `array_recv`'s form, written in place: appending each 4-byte length through `append(contentsOf:)`
    /// cost more than the whole text form.
    private static func binary<Item>(_ items: [Item], _ text: (Item) -> String?) -> [UInt8] {
        var size = 20
        var hasNull = false
        for item in items {
            let element = text(item)
            size += 4 + (element?.utf8.count ?? 0)
            hasNull = hasNull || element == nil
        }
        return [UInt8](unsafeUninitializedCapacity: size) { buffer, initialized in
            let raw = UnsafeMutableRawBufferPointer(buffer)
            var offset = 0
            func put(_ value: Int32) {
                raw.storeBytes(of: value.bigEndian, toByteOffset: offset, as: Int32.self)
                offset += 4
            }
            put(items.isEmpty ? 0 : 1)  // dimensions
            put(hasNull ? 1 : 0)
            put(Int32(bitPattern: PostgresDataType.text.rawValue))
            if !items.isEmpty {
                put(Int32(items.count))
                put(1)  // lower bound
            }
            for item in items {
                guard var element = text(item) else {
                    put(-1)
                    continue
                }
                element.withUTF8 { utf8 in
                    put(Int32(utf8.count))
                    if let base = utf8.baseAddress, let target = raw.baseAddress {
                        (target + offset).copyMemory(from: base, byteCount: utf8.count)
                    }
                    offset += utf8.count
                }
            }
            initialized = offset
        }
    }
}

/// PostgreSQL's binary forms (network byte order), as its `*_recv` functions read them.
enum PostgresBinary {
    /// The array of `Int`, `Int64`, `Double` or `Date` elements (nil elements are NULL), written in place with no
    /// generic call per element; nil for any other element type. An array parameter built in another module runs
    /// ``array(_:elementType:_:)`` unspecialized: about 800 instructions an element, where this takes a few dozen.
    static func eightByteArray<Element: PostgresArrayElement>(_ items: [Element?]) -> [UInt8]? {
        if Element.self == Date.self {
            return write(unsafeBitCast(items, to: [Date?].self), .timestamptz) {
                UInt64(bitPattern: PostgresTimestamp.microsecondsSince2000($0))
            }
        }
        if Element.self == Int.self {
            return write(unsafeBitCast(items, to: [Int?].self), .int8) { UInt64(bitPattern: Int64($0)) }
        }
        if Element.self == Int64.self {
            return write(unsafeBitCast(items, to: [Int64?].self), .int8) { UInt64(bitPattern: $0) }
        }
        if Element.self == Double.self {
            return write(unsafeBitCast(items, to: [Double?].self), .float8) { $0.bitPattern }
        }
        return nil
    }

    /// ``eightByteArray(_:)-([Element?])`` for an array without NULLs.
    static func eightByteArray<Element: PostgresArrayElement>(_ items: [Element]) -> [UInt8]? {
        if Element.self == Date.self {
            return write(unsafeBitCast(items, to: [Date].self), .timestamptz) {
                UInt64(bitPattern: PostgresTimestamp.microsecondsSince2000($0))
            }
        }
        if Element.self == Int.self {
            return write(unsafeBitCast(items, to: [Int].self), .int8) { UInt64(bitPattern: Int64($0)) }
        }
        if Element.self == Int64.self {
            return write(unsafeBitCast(items, to: [Int64].self), .int8) { UInt64(bitPattern: $0) }
        }
        if Element.self == Double.self {
            return write(unsafeBitCast(items, to: [Double].self), .float8) { $0.bitPattern }
        }
        return nil
    }

    // Not nested in the functions above: a nested function shares their generic context, and is not specialized
    // when they are called from another module.
    private static func write<Item>(_ items: [Item?], _ type: PostgresDataType, _ bits: (Item) -> UInt64) -> [UInt8] {
        eightByteArray(items.count, hasNull: items.contains { $0 == nil }, type) { items[$0].map(bits) }
    }

    private static func write<Item>(_ items: [Item], _ type: PostgresDataType, _ bits: (Item) -> UInt64) -> [UInt8] {
        eightByteArray(items.count, hasNull: false, type) { bits(items[$0]) }
    }

    /// `count` elements of eight bytes, each element's bits by its index (nil is NULL), into one buffer.
    private static func eightByteArray(
        _ count: Int, hasNull: Bool, _ elementType: PostgresDataType, _ bits: (Int) -> UInt64?
    ) -> [UInt8] {
        [UInt8](unsafeUninitializedCapacity: 20 + count * 12) { buffer, initialized in
            let raw = UnsafeMutableRawBufferPointer(buffer)
            var offset = 0
            func put<Integer: FixedWidthInteger>(_ value: Integer) {
                raw.storeBytes(of: value.bigEndian, toByteOffset: offset, as: Integer.self)
                offset += MemoryLayout<Integer>.size
            }
            put(Int32(count == 0 ? 0 : 1))  // dimensions
            put(Int32(hasNull ? 1 : 0))
            put(Int32(bitPattern: elementType.rawValue))
            if count > 0 {
                put(Int32(count))
                put(Int32(1))  // lower bound
            }
            for index in 0..<count {
                guard let value = bits(index) else {
                    put(Int32(-1))
                    continue
                }
                put(Int32(8))
                put(value)
            }
            initialized = offset
        }
    }

    static func append<Integer: FixedWidthInteger>(_ value: Integer, to bytes: inout [UInt8]) {
        withUnsafeBytes(of: value.bigEndian) { bytes.append(contentsOf: $0) }
    }

    /// A one-dimensional array (`array_recv`): dimensions, flags, element type, then each element's
    /// length (-1 for NULL) and bytes.
    static func array<Item, Element: PostgresArrayElement>(
        _ items: [Item], elementType: PostgresDataType, _ element: (Item) -> Element?
    ) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(20 + items.count * 16)
        append(Int32(items.isEmpty ? 0 : 1), to: &bytes)  // dimensions
        let flagsAt = bytes.count
        append(Int32(0), to: &bytes)  // has NULLs (set below)
        append(elementType.rawValue, to: &bytes)
        guard !items.isEmpty else { return bytes }
        append(Int32(items.count), to: &bytes)
        append(Int32(1), to: &bytes)  // lower bound
        var hasNull = false
        for item in items {
            guard let value = element(item) else {
                append(Int32(-1), to: &bytes)
                hasNull = true
                continue
            }
            let lengthAt = bytes.count
            append(Int32(0), to: &bytes)
            value.appendPostgresBinary(to: &bytes)
            let length = UInt32(bytes.count - lengthAt - 4).bigEndian
            withUnsafeBytes(of: length) { length in
                for index in 0..<4 { bytes[lengthAt + index] = length[index] }
            }
        }
        if hasNull { bytes[flagsAt + 3] = 1 }
        return bytes
    }
}

enum PostgresArrayText {
    /// The array literal: every element quoted, NULL for nil.
    static func make<Item, Element: PostgresArrayElement>(_ items: [Item], _ element: (Item) -> Element?) -> String {
        literal(count: items.count) { index, text in
            guard let value = element(items[index]) else { return false }
            value.withPostgresTextBytes { appendQuoted($0, to: &text) }
            return true
        }
    }

    /// ``make(_:_:)`` for strings, without generics.
    static func make(_ strings: [String]) -> String {
        literal(count: strings.count) { index, text in
            var string = strings[index]
            string.withUTF8 { appendQuoted($0, to: &text) }
            return true
        }
    }

    /// ``make(_:_:)`` for optional strings, without generics.
    static func make(_ strings: [String?]) -> String {
        literal(count: strings.count) { index, text in
            guard var string = strings[index] else { return false }
            string.withUTF8 { appendQuoted($0, to: &text) }
            return true
        }
    }

    /// `{…}` around `count` elements separated by commas; `append` writes element `index` and returns
    /// false for NULL. Built from UTF-8 bytes: `"` and `\` are ASCII, so escaping them byte by byte is
    /// exact, and much cheaper than walking Characters (a batch binds thousands of elements).
    private static func literal(count: Int, _ append: (Int, inout [UInt8]) -> Bool) -> String {
        var text: [UInt8] = [UInt8(ascii: "{")]
        text.reserveCapacity(count * 16 + 2)
        for index in 0..<count {
            if index > 0 { text.append(UInt8(ascii: ",")) }
            if !append(index, &text) { text.append(contentsOf: "NULL".utf8) }
        }
        text.append(UInt8(ascii: "}"))
        return String(decoding: text, as: UTF8.self)
    }

    /// One element in double quotes; runs without `"` or `\` are copied whole, those two get a backslash.
    private static func appendQuoted(_ bytes: UnsafeBufferPointer<UInt8>, to text: inout [UInt8]) {
        text.append(UInt8(ascii: "\""))
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
        text.append(UInt8(ascii: "\""))
    }
}

/// Bytes bound as `bytea`, sent as they are (its binary form), alone or in an array.
package struct PostgresBytes: PostgresArrayElement, Hashable {
    package var bytes: [UInt8]
    package init(_ bytes: [UInt8]) { self.bytes = bytes }
    package static var postgresType: PostgresDataType { .bytea }
    package static var postgresArrayType: PostgresDataType { .byteaArray }
    package static var postgresBinaryElementType: PostgresDataType? { .bytea }
    package var postgresText: String { PostgresHex.encode(bytes) }
    package var postgresParameter: PostgresParameterValue { .binary(bytes) }
    package func appendPostgresBinary(to bytes: inout [UInt8]) { bytes.append(contentsOf: self.bytes) }
}

extension PostgresQuery.StringInterpolation {
    /// Bytes, sent as a `bytea` parameter.
    package mutating func appendInterpolation(_ bytes: [UInt8]) {
        appendInterpolation(PostgresBytes(bytes))
    }

    /// Optional bytes, sent as a `bytea` parameter or NULL.
    package mutating func appendInterpolation(_ bytes: [UInt8]?) {
        appendInterpolation(bytes.map(PostgresBytes.init))
    }

    /// Bytes, sent as a `bytea` parameter.
    package mutating func appendInterpolation(_ bytes: Data) {
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
            digits.withUnsafeBufferPointer { digits in
                bytes.withUnsafeBufferPointer { bytes in
                    for byte in bytes {
                        buffer[index] = digits[Int(byte >> 4)]
                        buffer[index + 1] = digits[Int(byte & 0x0f)]
                        index += 2
                    }
                }
            }
            return index
        }
    }

    /// Decodes the `\x…` form; nil when malformed. (Every order state read is one: a few kB.)
    static func decode(_ text: String) -> [UInt8]? {
        var text = text
        return text.withUTF8 { utf8 -> [UInt8]? in
            guard utf8.count >= 2, utf8[0] == UInt8(ascii: "\\"), utf8[1] == UInt8(ascii: "x"), utf8.count % 2 == 0
            else { return nil }
            let count = (utf8.count - 2) / 2
            var valid = true
            let bytes = [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
                values.withUnsafeBufferPointer { values in
                    var index = 2
                    var invalid: UInt8 = 0
                    for offset in 0..<count {
                        let high = values[Int(utf8[index])]
                        let low = values[Int(utf8[index + 1])]
                        invalid |= (high | low) & 0x10
                        buffer[offset] = high << 4 | (low & 0x0F)
                        index += 2
                    }
                    valid = invalid == 0
                }
                initialized = valid ? count : 0
            }
            return valid ? bytes : nil
        }
    }

    /// Each byte's value as a hex digit; 0x10 where it is not one.
    private static let values: [UInt8] = (0...255).map { nibble(UInt8($0)) ?? 0x10 }

    private static func nibble(_ character: UInt8) -> UInt8? {
        switch character {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): character - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): character - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): character - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}
