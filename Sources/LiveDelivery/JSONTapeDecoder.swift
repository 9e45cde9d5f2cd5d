import Foundation
import LiveDeliveryCore

/// Decodes `Decodable` values from JSON bytes through a flat tape of tokens, for the documents the
/// worker reads back from PostgreSQL (an order's state twice per event, a push per claim).
///
/// `JSONDecoder` was the largest single cost of a worker: about a third of its CPU. It builds a
/// dictionary of every object's keys, allocating a `String` per key, and goes through generic
/// machinery that is instantiated at run time for each value. This decoder parses the text once
/// into an array of tokens (each container knows where it ends), then finds a key by comparing
/// bytes along its object's members, and decodes the common types by metatype identity. Strings and
/// numbers are converted only when asked for.
///
/// It reads what `JSONDecoder` with its default strategies reads, to equal values: `Date` as
/// seconds since 2001, `Data` as Base64, `URL` from its string, integers from integral numbers
/// only, the first of duplicate keys. The input must be strict JSON (RFC 8259), which is what
/// PostgreSQL returns for `json` columns; malformed text is a `DecodingError.dataCorrupted`.
/// Errors carry their coding path, assembled only when one is thrown.
enum JSONTapeDecoder {
    static func decode<Value: Decodable>(_ type: Value.Type, from bytes: [UInt8]) throws -> Value {
        let document = try JSONTape(bytes)
        return try document.value(Value.self, at: 0)
    }
}

/// One token: a scalar, or a container with the index just past its last token.
struct JSONToken {
    enum Kind: UInt8 { case object, array, string, number, `true`, `false`, null }

    var kind: Kind
    /// Strings: contains a backslash escape. Numbers: has a fraction or an exponent.
    var flag: Bool
    /// Strings: the bytes between the quotes. Numbers: the number's bytes.
    var start: Int32
    var end: Int32
    /// The index of the token after this value (containers: after their last member).
    var next: Int32
    /// Containers: members (objects) or elements (arrays).
    var count: Int32
}

/// A parsed document: its bytes and its tokens, shared by every container of one decoding.
///
/// Touched by one decoding on one thread only, so the dynamic exclusivity checks are off.
final class JSONTape {
    @exclusivity(unchecked) private(set) var bytes: [UInt8]
    @exclusivity(unchecked) private(set) var tokens: [JSONToken] = []
    /// A `null` token after the document's own, for `superDecoder(forKey:)` of a missing key.
    private(set) var nullIndex = 0

    static let maximumDepth = 512

    init(_ bytes: [UInt8]) throws {
        self.bytes = bytes
        tokens.reserveCapacity(bytes.count / 6 + 4)
        try bytes.withUnsafeBufferPointer { buffer in
            var parser = Parser(bytes: buffer, tape: self)
            parser.skipWhitespace()
            try parser.value(depth: 0)
            parser.skipWhitespace()
            if parser.position != buffer.count { throw parser.corrupted("unexpected text after the JSON value") }
        }
        nullIndex = tokens.count
        tokens.append(JSONToken(kind: .null, flag: false, start: 0, end: 0, next: Int32(nullIndex + 1), count: 0))
    }

    fileprivate func append(_ token: JSONToken) -> Int {
        tokens.append(token)
        return tokens.count - 1
    }

    fileprivate func close(_ index: Int, count: Int) {
        tokens[index].next = Int32(tokens.count)
        tokens[index].count = Int32(count)
    }

    private struct Parser {
        let bytes: UnsafeBufferPointer<UInt8>
        let tape: JSONTape
        var position = 0

        init(bytes: UnsafeBufferPointer<UInt8>, tape: JSONTape) {
            self.bytes = bytes
            self.tape = tape
        }

        func corrupted(_ message: String) -> DecodingError {
            DecodingError.dataCorrupted(
                .init(
                    codingPath: [],
                    debugDescription: "The given data was not valid JSON: \(message) at byte \(position)."))
        }

        mutating func skipWhitespace() {
            while position < bytes.count {
                switch bytes[position] {
                case 0x20, 0x0A, 0x0D, 0x09: position += 1
                default: return
                }
            }
        }

        mutating func value(depth: Int) throws {
            guard depth < JSONTape.maximumDepth else { throw corrupted("nested too deeply") }
            guard position < bytes.count else { throw corrupted("unexpected end of data") }
            switch bytes[position] {
            case UInt8(ascii: "{"): try object(depth: depth)
            case UInt8(ascii: "["): try array(depth: depth)
            case UInt8(ascii: "\""): try string()
            case UInt8(ascii: "t"): try literal("true", .true)
            case UInt8(ascii: "f"): try literal("false", .false)
            case UInt8(ascii: "n"): try literal("null", .null)
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): try number()
            default: throw corrupted("unexpected character")
            }
        }

        mutating func object(depth: Int) throws {
            let index = tape.append(
                JSONToken(kind: .object, flag: false, start: Int32(position), end: 0, next: 0, count: 0))
            position += 1
            skipWhitespace()
            var count = 0
            if position < bytes.count, bytes[position] == UInt8(ascii: "}") {
                position += 1
                tape.close(index, count: 0)
                return
            }
            while true {
                guard position < bytes.count, bytes[position] == UInt8(ascii: "\"") else {
                    throw corrupted("expected a key")
                }
                try string()
                skipWhitespace()
                guard position < bytes.count, bytes[position] == UInt8(ascii: ":") else {
                    throw corrupted("expected ':'")
                }
                position += 1
                skipWhitespace()
                try value(depth: depth + 1)
                count += 1
                skipWhitespace()
                guard position < bytes.count else { throw corrupted("unexpected end of data in an object") }
                if bytes[position] == UInt8(ascii: ",") {
                    position += 1
                    skipWhitespace()
                } else if bytes[position] == UInt8(ascii: "}") {
                    position += 1
                    tape.close(index, count: count)
                    return
                } else {
                    throw corrupted("expected ',' or '}'")
                }
            }
        }

        mutating func array(depth: Int) throws {
            let index = tape.append(
                JSONToken(kind: .array, flag: false, start: Int32(position), end: 0, next: 0, count: 0))
            position += 1
            skipWhitespace()
            var count = 0
            if position < bytes.count, bytes[position] == UInt8(ascii: "]") {
                position += 1
                tape.close(index, count: 0)
                return
            }
            while true {
                try value(depth: depth + 1)
                count += 1
                skipWhitespace()
                guard position < bytes.count else { throw corrupted("unexpected end of data in an array") }
                if bytes[position] == UInt8(ascii: ",") {
                    position += 1
                    skipWhitespace()
                } else if bytes[position] == UInt8(ascii: "]") {
                    position += 1
                    tape.close(index, count: count)
                    return
                } else {
                    throw corrupted("expected ',' or ']'")
                }
            }
        }

        mutating func string() throws {
            position += 1  // the opening quote
            let start = position
            var escaped = false
            while position < bytes.count {
                let byte = bytes[position]
                if byte == UInt8(ascii: "\"") {
                    let index = tape.tokens.count
                    _ = tape.append(
                        JSONToken(
                            kind: .string, flag: escaped, start: Int32(start), end: Int32(position),
                            next: Int32(index + 1), count: 0))
                    position += 1
                    return
                }
                if byte == UInt8(ascii: "\\") {
                    escaped = true
                    position += 1
                    guard position < bytes.count else { break }
                    switch bytes[position] {
                    case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"), UInt8(ascii: "b"),
                        UInt8(ascii: "f"),
                        UInt8(ascii: "n"), UInt8(ascii: "r"), UInt8(ascii: "t"):
                        position += 1
                    case UInt8(ascii: "u"):
                        guard position + 4 < bytes.count,
                            (1...4).allSatisfy({ JSONTape.isHexDigit(bytes[position + $0]) })
                        else { throw corrupted("invalid \\u escape") }
                        position += 5
                    default:
                        throw corrupted("invalid escape")
                    }
                    continue
                }
                guard byte >= 0x20 else { throw corrupted("unescaped control character in a string") }
                position += 1
            }
            throw corrupted("unterminated string")
        }

        mutating func literal(_ text: StaticString, _ kind: JSONToken.Kind) throws {
            let length = text.utf8CodeUnitCount
            guard position + length <= bytes.count,
                memcmp(bytes.baseAddress! + position, text.utf8Start, length) == 0
            else { throw corrupted("unexpected character") }
            let index = tape.tokens.count
            _ = tape.append(
                JSONToken(
                    kind: kind, flag: false, start: Int32(position), end: Int32(position + length),
                    next: Int32(index + 1), count: 0))
            position += length
        }

        mutating func number() throws {
            let start = position
            var fractional = false
            if bytes[position] == UInt8(ascii: "-") { position += 1 }
            guard position < bytes.count, Self.isDigit(bytes[position]) else { throw corrupted("invalid number") }
            if bytes[position] == UInt8(ascii: "0") {
                position += 1
            } else {
                while position < bytes.count, Self.isDigit(bytes[position]) { position += 1 }
            }
            if position < bytes.count, bytes[position] == UInt8(ascii: ".") {
                fractional = true
                position += 1
                guard position < bytes.count, Self.isDigit(bytes[position]) else { throw corrupted("invalid number") }
                while position < bytes.count, Self.isDigit(bytes[position]) { position += 1 }
            }
            if position < bytes.count, bytes[position] == UInt8(ascii: "e") || bytes[position] == UInt8(ascii: "E") {
                fractional = true
                position += 1
                if position < bytes.count, bytes[position] == UInt8(ascii: "+") || bytes[position] == UInt8(ascii: "-")
                {
                    position += 1
                }
                guard position < bytes.count, Self.isDigit(bytes[position]) else { throw corrupted("invalid number") }
                while position < bytes.count, Self.isDigit(bytes[position]) { position += 1 }
            }
            let index = tape.tokens.count
            _ = tape.append(
                JSONToken(
                    kind: .number, flag: fractional, start: Int32(start), end: Int32(position),
                    next: Int32(index + 1), count: 0))
        }

        static func isDigit(_ byte: UInt8) -> Bool { byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") }
    }

    static func isHexDigit(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "f"),
            UInt8(ascii: "A")...UInt8(ascii: "F"):
            true
        default: false
        }
    }

    // MARK: Reading values

    func kind(at index: Int) -> JSONToken.Kind { tokens[index].kind }

    func describe(_ index: Int) -> String {
        switch tokens[index].kind {
        case .object: "a dictionary"
        case .array: "an array"
        case .string: "a string"
        case .number: "a number"
        case .true, .false: "a bool"
        case .null: "null"
        }
    }

    func mismatch(_ type: Any.Type, at index: Int) -> DecodingError {
        if tokens[index].kind == .null {
            return DecodingError.valueNotFound(
                type, .init(codingPath: [], debugDescription: "Expected \(type) value but found null instead."))
        }
        return DecodingError.typeMismatch(
            type,
            .init(codingPath: [], debugDescription: "Expected to decode \(type) but found \(describe(index)) instead."))
    }

    /// The index of `key`'s value in the object at `object`, the first if it appears twice.
    func find(_ key: String, in object: Int) -> Int? {
        var key = key
        let end = Int(tokens[object].next)
        return bytes.withUnsafeBufferPointer { buffer in
            key.withUTF8 { wanted -> Int? in
                var member = object + 1
                while member < end {
                    let token = tokens[member]
                    let value = member + 1
                    if !token.flag {
                        if Int(token.end - token.start) == wanted.count,
                            wanted.isEmpty
                                || memcmp(wanted.baseAddress!, buffer.baseAddress! + Int(token.start), wanted.count)
                                    == 0
                        {
                            return value
                        }
                    } else if let text = try? string(at: member), text.utf8.elementsEqual(wanted) {
                        return value
                    }
                    member = Int(tokens[value].next)
                }
                return nil
            }
        }
    }

    /// The member keys of the object at `object`, in document order.
    func keys(of object: Int) throws -> [String] {
        var keys: [String] = []
        keys.reserveCapacity(Int(tokens[object].count))
        var member = object + 1
        let end = Int(tokens[object].next)
        while member < end {
            keys.append(try string(at: member))
            member = Int(tokens[member + 1].next)
        }
        return keys
    }

    func string(at index: Int) throws -> String {
        let token = tokens[index]
        guard token.kind == .string else { throw mismatch(String.self, at: index) }
        let start = Int(token.start)
        let end = Int(token.end)
        let text = bytes.withUnsafeBufferPointer { buffer in
            token.flag
                // Escapes: the core's JSON parser resolves them, given the literal with its quotes.
                ? JSONValue.string(literal: UnsafeBufferPointer(rebasing: buffer[(start - 1)...end]))
                : UTF8Text.string(UnsafeBufferPointer(rebasing: buffer[start..<end]))
        }
        guard let text else {
            throw DecodingError.dataCorrupted(
                .init(codingPath: [], debugDescription: "Invalid escape, lone surrogate or UTF-8 in a string."))
        }
        return text
    }

    func bool(at index: Int) throws -> Bool {
        switch tokens[index].kind {
        case .true: true
        case .false: false
        default: throw mismatch(Bool.self, at: index)
        }
    }

    /// The number's text (short numbers are small strings: no allocation).
    private func numberText(_ token: JSONToken) -> String {
        bytes.withUnsafeBufferPointer { buffer in
            String(decoding: UnsafeBufferPointer(rebasing: buffer[Int(token.start)..<Int(token.end)]), as: UTF8.self)
        }
    }

    func integer<T: FixedWidthInteger>(_ type: T.Type, at index: Int) throws -> T {
        let token = tokens[index]
        guard token.kind == .number else { throw mismatch(T.self, at: index) }
        if !token.flag {
            // Digits only: accumulate with overflow checks.
            var i = Int(token.start)
            let end = Int(token.end)
            let negative = bytes[i] == UInt8(ascii: "-")
            if negative { i += 1 }
            var value: T = 0
            while i < end {
                let digit = T(bytes[i] - UInt8(ascii: "0"))
                let (times, overflow1) = value.multipliedReportingOverflow(by: 10)
                let (next, overflow2) =
                    negative ? times.subtractingReportingOverflow(digit) : times.addingReportingOverflow(digit)
                guard !overflow1, !overflow2 else { throw doesNotFit(T.self, token) }
                value = next
                i += 1
            }
            return value
        }
        // A fraction or an exponent: accepted when the value is integral and fits, as JSONDecoder does.
        guard let double = Double(numberText(token)), let value = T(exactly: double) else {
            throw doesNotFit(T.self, token)
        }
        return value
    }

    private func doesNotFit(_ type: Any.Type, _ token: JSONToken) -> DecodingError {
        DecodingError.dataCorrupted(
            .init(
                codingPath: [], debugDescription: "Parsed JSON number <\(numberText(token))> does not fit in \(type)."))
    }

    func double(at index: Int) throws -> Double {
        let token = tokens[index]
        guard token.kind == .number else { throw mismatch(Double.self, at: index) }
        if let value = plainDecimal(token) { return value }
        guard let value = Double(numberText(token)), value.isFinite else {
            throw DecodingError.dataCorrupted(
                .init(codingPath: [], debugDescription: "Number <\(numberText(token))> is not representable in Double.")
            )
        }
        return value
    }

    /// Clinger's fast path, for integers and for the dates the worker stores (seconds with a
    /// fraction, such as `817251594.2639999`, which `strtod` reads through its multi-precision path):
    /// a number without an exponent whose digits make an integer of at most 2^53, with at most 22 of
    /// them after the point, is that integer (exact as a `Double`) divided by a power of ten (exact
    /// too), and one IEEE division rounds the quotient correctly, as `strtod` does. The sign is applied
    /// last, so `-0` is negative zero, as `strtod` reads it. Nil for anything else.
    private func plainDecimal(_ token: JSONToken) -> Double? {
        var i = Int(token.start)
        let end = Int(token.end)
        let negative = bytes[i] == UInt8(ascii: "-")
        if negative { i += 1 }
        var mantissa: UInt64 = 0
        var digits = 0
        var fraction = -1  // digits after the point; -1 before it
        while i < end {
            let byte = bytes[i]
            i += 1
            if byte == UInt8(ascii: ".") {
                fraction = 0
                continue
            }
            let digit = byte &- UInt8(ascii: "0")
            // An exponent, or more digits than a UInt64 holds safely.
            guard digit < 10, digits < 19 else { return nil }
            mantissa = mantissa &* 10 &+ UInt64(digit)
            digits += 1
            if fraction >= 0 { fraction += 1 }
        }
        fraction = max(fraction, 0)  // no point: an integer
        guard fraction < Self.powersOfTen.count, mantissa <= 1 << 53 else { return nil }
        let value = Double(mantissa) / Self.powersOfTen[fraction]
        return negative ? -value : value
    }

    /// 10^0 … 10^22: every one exact as a `Double`.
    private static let powersOfTen: [Double] = [
        1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18,
        1e19, 1e20, 1e21, 1e22,
    ]

    func float(at index: Int) throws -> Float {
        let token = tokens[index]
        guard token.kind == .number else { throw mismatch(Float.self, at: index) }
        guard let value = Float(numberText(token)), value.isFinite else {
            throw DecodingError.dataCorrupted(
                .init(codingPath: [], debugDescription: "Number <\(numberText(token))> is not representable in Float."))
        }
        return value
    }

    /// Any `Decodable` at `index`: the common types directly, the rest through a ``TapeDecoder``.
    func value<T: Decodable>(_ type: T.Type, at index: Int) throws -> T {
        if T.self == String.self { return unsafeBitCast(try string(at: index), to: T.self) }
        if T.self == Int.self { return unsafeBitCast(try integer(Int.self, at: index), to: T.self) }
        if T.self == Double.self { return unsafeBitCast(try double(at: index), to: T.self) }
        if T.self == Bool.self { return unsafeBitCast(try bool(at: index), to: T.self) }
        if T.self == Date.self {
            return unsafeBitCast(Date(timeIntervalSinceReferenceDate: try double(at: index)), to: T.self)
        }
        if T.self == Data.self {
            guard let data = Data(base64Encoded: try string(at: index)) else {
                throw DecodingError.dataCorrupted(
                    .init(codingPath: [], debugDescription: "Encountered Data is not valid Base64."))
            }
            return data as! T
        }
        if T.self == URL.self {
            guard let url = URL(string: try string(at: index)) else {
                throw DecodingError.dataCorrupted(.init(codingPath: [], debugDescription: "Invalid URL string."))
            }
            return url as! T
        }
        if T.self == Decimal.self {
            guard tokens[index].kind == .number, let decimal = Decimal(string: numberText(tokens[index])) else {
                throw mismatch(Decimal.self, at: index)
            }
            return decimal as! T
        }
        return try T(from: TapeDecoder(tape: self, index: index))
    }
}

/// Puts `key` in front of a decoding error's coding path as the error leaves a container: the path
/// is built only when something fails.
private func prefixing<T>(_ key: any CodingKey, _ body: () throws -> T) throws -> T {
    do {
        return try body()
    } catch let error as DecodingError {
        throw error.prefixed(by: key)
    }
}

extension DecodingError {
    fileprivate func prefixed(by key: any CodingKey) -> DecodingError {
        func context(_ context: Context) -> Context {
            Context(
                codingPath: [key] + context.codingPath, debugDescription: context.debugDescription,
                underlyingError: context.underlyingError)
        }
        switch self {
        case .typeMismatch(let type, let c): return .typeMismatch(type, context(c))
        case .valueNotFound(let type, let c): return .valueNotFound(type, context(c))
        case .keyNotFound(let missing, let c): return .keyNotFound(missing, context(c))
        case .dataCorrupted(let c): return .dataCorrupted(context(c))
        @unknown default: return self
        }
    }
}

/// An index on an array, as the coding path shows it.
private struct IndexKey: CodingKey {
    var intValue: Int?
    var stringValue: String { "Index \(intValue ?? 0)" }
    init(_ index: Int) { intValue = index }
    init?(stringValue: String) { nil }
    init?(intValue: Int) { self.intValue = intValue }
}

private struct SuperKey: CodingKey {
    var stringValue: String { "super" }
    var intValue: Int? { nil }
    init() {}
    init?(stringValue: String) { nil }
    init?(intValue: Int) { nil }
}

/// The decoder of one value on the tape; also its single-value container.
struct TapeDecoder: Decoder, SingleValueDecodingContainer {
    let tape: JSONTape
    let index: Int

    var codingPath: [any CodingKey] { [] }
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        guard tape.kind(at: index) == .object else { throw tape.mismatch([String: Any].self, at: index) }
        return KeyedDecodingContainer(TapeKeyedContainer<Key>(tape: tape, object: index))
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        guard tape.kind(at: index) == .array else { throw tape.mismatch([Any].self, at: index) }
        return TapeUnkeyedContainer(tape: tape, array: index)
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer { self }

    func decodeNil() -> Bool { tape.kind(at: index) == .null }
    func decode(_ type: Bool.Type) throws -> Bool { try tape.bool(at: index) }
    func decode(_ type: String.Type) throws -> String { try tape.string(at: index) }
    func decode(_ type: Double.Type) throws -> Double { try tape.double(at: index) }
    func decode(_ type: Float.Type) throws -> Float { try tape.float(at: index) }
    func decode(_ type: Int.Type) throws -> Int { try tape.integer(Int.self, at: index) }
    func decode(_ type: Int8.Type) throws -> Int8 { try tape.integer(Int8.self, at: index) }
    func decode(_ type: Int16.Type) throws -> Int16 { try tape.integer(Int16.self, at: index) }
    func decode(_ type: Int32.Type) throws -> Int32 { try tape.integer(Int32.self, at: index) }
    func decode(_ type: Int64.Type) throws -> Int64 { try tape.integer(Int64.self, at: index) }
    func decode(_ type: UInt.Type) throws -> UInt { try tape.integer(UInt.self, at: index) }
    func decode(_ type: UInt8.Type) throws -> UInt8 { try tape.integer(UInt8.self, at: index) }
    func decode(_ type: UInt16.Type) throws -> UInt16 { try tape.integer(UInt16.self, at: index) }
    func decode(_ type: UInt32.Type) throws -> UInt32 { try tape.integer(UInt32.self, at: index) }
    func decode(_ type: UInt64.Type) throws -> UInt64 { try tape.integer(UInt64.self, at: index) }
    func decode<T: Decodable>(_ type: T.Type) throws -> T { try tape.value(T.self, at: index) }
}

struct TapeKeyedContainer<Key: CodingKey>: KeyedDecodingContainerProtocol {
    let tape: JSONTape
    let object: Int

    var codingPath: [any CodingKey] { [] }

    var allKeys: [Key] { ((try? tape.keys(of: object)) ?? []).compactMap { Key(stringValue: $0) } }

    func contains(_ key: Key) -> Bool { tape.find(key.stringValue, in: object) != nil }

    private func index(of key: Key) throws -> Int {
        guard let index = tape.find(key.stringValue, in: object) else {
            throw DecodingError.keyNotFound(
                key,
                .init(codingPath: [], debugDescription: "No value associated with key \(key) (\"\(key.stringValue)\").")
            )
        }
        return index
    }

    /// The value's index, or nil when the key is missing or its value is null.
    private func presentIndex(of key: Key) -> Int? {
        guard let index = tape.find(key.stringValue, in: object), tape.kind(at: index) != .null else { return nil }
        return index
    }

    func decodeNil(forKey key: Key) throws -> Bool { try tape.kind(at: index(of: key)) == .null }

    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T { try value(type, key) }
    func decodeIfPresent<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T? { try present(type, key) }
    func decode(_ type: String.Type, forKey key: Key) throws -> String { try value(type, key) }
    func decodeIfPresent(_ type: String.Type, forKey key: Key) throws -> String? { try present(type, key) }
    func decode(_ type: Int.Type, forKey key: Key) throws -> Int { try value(type, key) }
    func decodeIfPresent(_ type: Int.Type, forKey key: Key) throws -> Int? { try present(type, key) }
    func decode(_ type: Double.Type, forKey key: Key) throws -> Double { try value(type, key) }
    func decodeIfPresent(_ type: Double.Type, forKey key: Key) throws -> Double? { try present(type, key) }
    func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool { try value(type, key) }
    func decodeIfPresent(_ type: Bool.Type, forKey key: Key) throws -> Bool? { try present(type, key) }
    func decode(_ type: Float.Type, forKey key: Key) throws -> Float { try value(type, key) }
    func decode(_ type: Int8.Type, forKey key: Key) throws -> Int8 { try value(type, key) }
    func decode(_ type: Int16.Type, forKey key: Key) throws -> Int16 { try value(type, key) }
    func decode(_ type: Int32.Type, forKey key: Key) throws -> Int32 { try value(type, key) }
    func decode(_ type: Int64.Type, forKey key: Key) throws -> Int64 { try value(type, key) }
    func decode(_ type: UInt.Type, forKey key: Key) throws -> UInt { try value(type, key) }
    func decode(_ type: UInt8.Type, forKey key: Key) throws -> UInt8 { try value(type, key) }
    func decode(_ type: UInt16.Type, forKey key: Key) throws -> UInt16 { try value(type, key) }
    func decode(_ type: UInt32.Type, forKey key: Key) throws -> UInt32 { try value(type, key) }
    func decode(_ type: UInt64.Type, forKey key: Key) throws -> UInt64 { try value(type, key) }

    private func value<T: Decodable>(_ type: T.Type, _ key: Key) throws -> T {
        let index = try index(of: key)
        return try prefixing(key) { try tape.value(T.self, at: index) }
    }

    /// One lookup for a missing key, a null and a value alike (the default `decodeIfPresent` takes three).
    private func present<T: Decodable>(_ type: T.Type, _ key: Key) throws -> T? {
        guard let index = presentIndex(of: key) else { return nil }
        return try prefixing(key) { try tape.value(T.self, at: index) }
    }

    func nestedContainer<NestedKey: CodingKey>(
        keyedBy type: NestedKey.Type, forKey key: Key
    ) throws -> KeyedDecodingContainer<NestedKey> {
        let index = try index(of: key)
        return try prefixing(key) { try TapeDecoder(tape: tape, index: index).container(keyedBy: NestedKey.self) }
    }

    func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
        let index = try index(of: key)
        return try prefixing(key) { try TapeDecoder(tape: tape, index: index).unkeyedContainer() }
    }

    func superDecoder() throws -> any Decoder {
        TapeDecoder(tape: tape, index: tape.find(SuperKey().stringValue, in: object) ?? tape.nullIndex)
    }

    func superDecoder(forKey key: Key) throws -> any Decoder {
        TapeDecoder(tape: tape, index: tape.find(key.stringValue, in: object) ?? tape.nullIndex)
    }
}

struct TapeUnkeyedContainer: UnkeyedDecodingContainer {
    let tape: JSONTape
    /// The next element's token.
    private var position: Int
    private let end: Int

    var codingPath: [any CodingKey] { [] }
    let count: Int?
    private(set) var currentIndex = 0
    var isAtEnd: Bool { position >= end }

    init(tape: JSONTape, array: Int) {
        self.tape = tape
        position = array + 1
        end = Int(tape.tokens[array].next)
        count = Int(tape.tokens[array].count)
    }

    /// The next element's index, moving past it.
    private mutating func take(_ type: Any.Type) throws -> Int {
        guard !isAtEnd else {
            throw DecodingError.valueNotFound(
                type,
                .init(codingPath: [IndexKey(currentIndex)], debugDescription: "Unkeyed container is at end."))
        }
        let index = position
        position = Int(tape.tokens[index].next)
        currentIndex += 1
        return index
    }

    mutating func decodeNil() throws -> Bool {
        guard !isAtEnd else {
            throw DecodingError.valueNotFound(
                Any?.self, .init(codingPath: [IndexKey(currentIndex)], debugDescription: "Unkeyed container is at end.")
            )
        }
        guard tape.kind(at: position) == .null else { return false }
        _ = try take(Any?.self)
        return true
    }

    mutating func decode<T: Decodable>(_ type: T.Type) throws -> T { try next(type) }
    mutating func decode(_ type: Bool.Type) throws -> Bool { try next(type) }
    mutating func decode(_ type: String.Type) throws -> String { try next(type) }
    mutating func decode(_ type: Double.Type) throws -> Double { try next(type) }
    mutating func decode(_ type: Float.Type) throws -> Float { try next(type) }
    mutating func decode(_ type: Int.Type) throws -> Int { try next(type) }
    mutating func decode(_ type: Int8.Type) throws -> Int8 { try next(type) }
    mutating func decode(_ type: Int16.Type) throws -> Int16 { try next(type) }
    mutating func decode(_ type: Int32.Type) throws -> Int32 { try next(type) }
    mutating func decode(_ type: Int64.Type) throws -> Int64 { try next(type) }
    mutating func decode(_ type: UInt.Type) throws -> UInt { try next(type) }
    mutating func decode(_ type: UInt8.Type) throws -> UInt8 { try next(type) }
    mutating func decode(_ type: UInt16.Type) throws -> UInt16 { try next(type) }
    mutating func decode(_ type: UInt32.Type) throws -> UInt32 { try next(type) }
    mutating func decode(_ type: UInt64.Type) throws -> UInt64 { try next(type) }

    private mutating func next<T: Decodable>(_ type: T.Type) throws -> T {
        let key = IndexKey(currentIndex)
        let index = try take(T.self)
        return try prefixing(key) { try tape.value(T.self, at: index) }
    }

    mutating func nestedContainer<NestedKey: CodingKey>(
        keyedBy type: NestedKey.Type
    ) throws
        -> KeyedDecodingContainer<NestedKey>
    {
        let key = IndexKey(currentIndex)
        let index = try take([String: Any].self)
        return try prefixing(key) { try TapeDecoder(tape: tape, index: index).container(keyedBy: NestedKey.self) }
    }

    mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer {
        let key = IndexKey(currentIndex)
        let index = try take([Any].self)
        return try prefixing(key) { try TapeDecoder(tape: tape, index: index).unkeyedContainer() }
    }

    mutating func superDecoder() throws -> any Decoder {
        TapeDecoder(tape: tape, index: try take((any Decoder).self))
    }
}
