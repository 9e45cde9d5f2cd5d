import Foundation

/// The package's one JSON parser: it reads UTF-8 text once into a flat tape of tokens, each container
/// knowing where it ends. Readers then find a member by comparing bytes along its object's members
/// and convert a string or a number only when asked for it.
///
/// Two kinds of reader use it:
/// - ``JSONValue`` builds a whole value from the tape (event bodies, configuration files, the
///   payloads apns-sim receives);
/// - the stored-document readers (the worker's order states and planned pushes, read back from
///   PostgreSQL on every event and every claim) go straight from the tape to their Swift types,
///   field by field, through ``Object``. `JSONDecoder` was a third of a worker's CPU: it builds a
///   dictionary of every object's keys, allocating a `String` per key, and goes through generic
///   machinery instantiated at run time for each value.
///
/// The readers answer as `JSONDecoder` with its default strategies does, to equal values: integers
/// from integral numbers only (`1.0` and `1e2` too), non-finite numbers refused, the first of
/// duplicate keys, lone surrogates and invalid UTF-8 refused. The text must be RFC 8259 JSON, with
/// `JSONDecoder`'s trailing commas when ``init(_:allowingTrailingCommas:)`` asks for them; malformed
/// text is a `DecodingError.dataCorrupted` naming the byte. Errors carry their coding path, assembled
/// only when one is thrown.
/// One token: a scalar, or a container with the index just past its last token.
package struct JSONToken: Sendable {
    package enum Kind: UInt8, Sendable { case object, array, string, number, `true`, `false`, null }

    package var kind: Kind
    /// Strings: contains a backslash escape. Numbers: has a fraction or an exponent.
    package var flag: Bool
    /// Strings: the bytes between the quotes. Numbers: the number's bytes.
    package var start: Int32
    package var end: Int32
    /// The index of the token after this value (containers: after their last member).
    package var next: Int32
    /// Containers: members (objects) or elements (arrays).
    package var count: Int32
}

/// A parsed document: its bytes and its tokens. The document's own value is the token at index 0.
///
/// Touched by one reading on one thread only, so the dynamic exclusivity checks are off.
package final class JSONTape {
    @exclusivity(unchecked) package private(set) var bytes: [UInt8]
    @exclusivity(unchecked) package private(set) var tokens: [JSONToken] = []

    /// Containers nested deeper than this are refused, as `JSONDecoder` refuses them.
    package static let maximumDepth = 512

    /// Parses `bytes`; a `DecodingError.dataCorrupted` naming the byte where they stop being JSON.
    package init(_ bytes: [UInt8], allowingTrailingCommas: Bool = false) throws {
        self.bytes = bytes
        tokens.reserveCapacity(bytes.count / 6 + 4)
        try bytes.withUnsafeBufferPointer { buffer in
            var parser = Parser(bytes: buffer, tape: self, trailingCommas: allowingTrailingCommas)
            parser.skipWhitespace()
            try parser.value(depth: 0)
            parser.skipWhitespace()
            if parser.position != buffer.count { throw parser.corrupted("unexpected text after the JSON value") }
        }
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
        let trailingCommas: Bool
        var position = 0

        init(bytes: UnsafeBufferPointer<UInt8>, tape: JSONTape, trailingCommas: Bool) {
            self.bytes = bytes
            self.tape = tape
            self.trailingCommas = trailingCommas
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

        /// `depth`: the containers around this value.
        mutating func value(depth: Int) throws {
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
            guard depth < JSONTape.maximumDepth else { throw corrupted("nested too deeply") }
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
                    if trailingCommas, position < bytes.count, bytes[position] == UInt8(ascii: "}") {
                        position += 1
                        tape.close(index, count: count)
                        return
                    }
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
            guard depth < JSONTape.maximumDepth else { throw corrupted("nested too deeply") }
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
                    if trailingCommas, position < bytes.count, bytes[position] == UInt8(ascii: "]") {
                        position += 1
                        tape.close(index, count: count)
                        return
                    }
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

    package func kind(at index: Int) -> JSONToken.Kind { tokens[index].kind }

    /// The index of the value after the one at `index` (containers: after their last member).
    package func next(after index: Int) -> Int { Int(tokens[index].next) }

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

    package func mismatch(_ type: Any.Type, at index: Int) -> DecodingError {
        if tokens[index].kind == .null {
            return DecodingError.valueNotFound(
                type, .init(codingPath: [], debugDescription: "Expected \(type) value but found null instead."))
        }
        return DecodingError.typeMismatch(
            type,
            .init(codingPath: [], debugDescription: "Expected to decode \(type) but found \(describe(index)) instead."))
    }

    /// The index of `key`'s value in the object at `object`, the first if it appears twice.
    package func find(_ key: String, in object: Int) -> Int? {
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

    /// Where a string's bytes lie in ``bytes`` when it holds no escape (the text between its quotes); nil for any
    /// other token (then ``string(at:)`` reads it).
    package func unescapedString(at index: Int) -> Range<Int>? {
        let token = tokens[index]
        guard token.kind == .string, !token.flag else { return nil }
        return Int(token.start)..<Int(token.end)
    }

    package func string(at index: Int) throws -> String {
        let token = tokens[index]
        guard token.kind == .string else { throw mismatch(String.self, at: index) }
        let start = Int(token.start)
        let end = Int(token.end)
        let text = bytes.withUnsafeBufferPointer { buffer in
            token.flag
                ? Self.unescaped(UnsafeBufferPointer(rebasing: buffer[start..<end]))
                : UTF8Text.string(UnsafeBufferPointer(rebasing: buffer[start..<end]))
        }
        guard let text else {
            throw DecodingError.dataCorrupted(
                .init(codingPath: [], debugDescription: "Invalid escape, lone surrogate or UTF-8 in a string."))
        }
        return text
    }

    package func bool(at index: Int) throws -> Bool {
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

    /// ``integer(_:at:)`` for `Int`, which nearly every reader asks for: concrete, so that a caller in another
    /// module runs the specialized loop rather than the generic one through witness tables (1,200 instructions
    /// for a two-digit number).
    package func integer(_ type: Int.Type, at index: Int) throws -> Int {
        try genericInteger(Int.self, at: index)
    }

    package func integer<T: FixedWidthInteger>(_ type: T.Type, at index: Int) throws -> T {
        try genericInteger(T.self, at: index)
    }

    private func genericInteger<T: FixedWidthInteger>(_ type: T.Type, at index: Int) throws -> T {
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

    package func double(at index: Int) throws -> Double {
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

    /// The text between a string literal's quotes when it has escapes: escapes resolved, surrogate
    /// pairs joined. Nil for a malformed escape, a lone surrogate, a raw control character or
    /// invalid UTF-8.
    static func unescaped(_ bytes: UnsafeBufferPointer<UInt8>) -> String? {
        var text: [UInt8] = []
        text.reserveCapacity(bytes.count)
        var index = 0
        func hex4() -> UInt32? {
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
        while index < bytes.count {
            let byte = bytes[index]
            index += 1
            guard byte == UInt8(ascii: "\\") else {
                if byte < 0x20 { return nil }
                text.append(byte)
                continue
            }
            guard index < bytes.count else { return nil }
            let escape = bytes[index]
            index += 1
            switch escape {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): text.append(escape)
            case UInt8(ascii: "b"): text.append(0x08)
            case UInt8(ascii: "f"): text.append(0x0C)
            case UInt8(ascii: "n"): text.append(0x0A)
            case UInt8(ascii: "r"): text.append(0x0D)
            case UInt8(ascii: "t"): text.append(0x09)
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
                text.append(contentsOf: String(Character(scalar)).utf8)
            default: return nil
            }
        }
        return text.withUnsafeBufferPointer(UTF8Text.string)
    }
}

/// Text from UTF-8 bytes, for the parser's readers.
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
