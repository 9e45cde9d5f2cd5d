import Foundation
import LiveDeliveryJSON
import LiveDeliveryTime

/// Reads typed fields of one JSON object of an event body straight from the parsed tape (no `JSONValue` tree:
/// a field is converted only when asked for), naming each field by its dotted path in rejections.
struct FieldReader {
    let tape: JSONTape
    /// The object's token.
    let index: Int
    let prefix: String

    /// The body's top-level object. The body is refused as a whole, as a full parse would refuse it, when it is
    /// not UTF-8 JSON (trailing commas allowed), when a string has an invalid escape or a lone surrogate, or
    /// when a number is not finite, wherever that is.
    static func body(_ bytes: [UInt8]) throws(EventRejection) -> FieldReader {
        let tape: JSONTape
        do {
            tape = try JSONTape(bytes, allowingTrailingCommas: true)
            try validate(tape)
        } catch {
            throw EventRejection(.malformedJSON, "the body is not valid UTF-8 JSON")
        }
        guard tape.kind(at: 0) == .object else {
            throw EventRejection(.malformedJSON, "the body is a JSON \(typeName(tape, 0)), not an object")
        }
        return FieldReader(tape: tape, index: 0, prefix: "")
    }

    /// What the tape leaves for its readers to find: invalid UTF-8, escapes that make no text, numbers out of
    /// range. Plain ASCII strings and short plain numbers, nearly all of a body, are checked by the scan alone.
    private static func validate(_ tape: JSONTape) throws {
        let valid = tape.bytes.withUnsafeBufferPointer { bytes in
            var high: UInt8 = 0
            for byte in bytes { high |= byte }
            return high < 0x80 || String(validating: bytes, as: UTF8.self) != nil
        }
        guard valid else { throw DecodingError.dataCorrupted(.init(codingPath: [], debugDescription: "not UTF-8")) }
        for (index, token) in tape.tokens.enumerated() {
            switch token.kind {
            case .string where token.flag: _ = try tape.string(at: index)
            case .number where token.flag || token.end - token.start > 15: _ = try tape.double(at: index)
            default: break
            }
        }
    }

    /// The name of the value's JSON type in a rejection, as `JSONValue` names it.
    private static func typeName(_ tape: JSONTape, _ index: Int) -> String {
        (try? JSONValue(tape: tape, at: index))?.typeName ?? "value"
    }

    func path(_ key: String) -> String { prefix.isEmpty ? key : "\(prefix).\(key)" }

    /// The member's token, or nil when absent or `null`.
    private func member(_ key: String) -> Int? {
        guard let member = tape.find(key, in: index), tape.kind(at: member) != .null else { return nil }
        return member
    }

    private func typeName(_ member: Int) -> String { Self.typeName(tape, member) }

    private func invalid(_ key: String, _ message: String) -> EventRejection {
        EventRejection(.invalidField, field: path(key), "\(path(key)) \(message)")
    }

    private func missing(_ key: String) -> EventRejection {
        EventRejection(.missingField, field: path(key), "\(path(key)) is required")
    }

    /// The text of a string member (valid: ``body(_:)`` checked every string).
    private func text(_ key: String, _ member: Int, _ expected: String = "a string") throws(EventRejection) -> String {
        guard tape.kind(at: member) == .string, let text = try? tape.string(at: member) else {
            throw invalid(key, "must be \(expected), not \(typeName(member))")
        }
        return text
    }

    func requiredString(_ key: String, length: ClosedRange<Int>) throws(EventRejection) -> String {
        guard let member = member(key) else { throw missing(key) }
        return try checked(try text(key, member), key, length: length)
    }

    private func checked(_ text: String, _ key: String, length: ClosedRange<Int>) throws(EventRejection) -> String {
        let bytes = Self.scan(text)
        // ASCII, as nearly every identifier is: a character per byte, without breaking graphemes.
        let count = bytes.ascii ? text.utf8.count : text.count
        guard length.contains(count), text.utf8.count <= length.upperBound * Self.bytesPerCharacter else {
            throw invalid(
                key,
                "must be \(length.lowerBound)–\(length.upperBound) characters of at most "
                    + "\(length.upperBound * Self.bytesPerCharacter) bytes (has \(count), \(text.utf8.count) bytes)"
            )
        }
        guard !bytes.nul else { throw unstorable(key) }
        return text
    }

    /// Whether the text is all ASCII, and whether it holds U+0000, in one pass over its bytes.
    private static func scan(_ text: String) -> (ascii: Bool, nul: Bool) {
        var text = text
        return text.withUTF8 { bytes in
            var high: UInt8 = 0
            var nul = false
            for byte in bytes {
                high |= byte
                nul = nul || byte == 0
            }
            return (high < 0x80, nul)
        }
    }

    private func unstorable(_ key: String) -> EventRejection {
        invalid(key, "must not contain U+0000 (NUL), which cannot be stored")
    }

    /// At most this many UTF-8 bytes per character of an identifier (every required text is one): a
    /// character may join any number of combining marks, and an identifier must fit in an index row
    /// (PostgreSQL's B-tree rows hold about 2.7 kB).
    static let bytesPerCharacter = 4

    /// Refuses what PostgreSQL's `text` cannot store: U+0000.
    private func storable(_ text: String, _ key: String) throws(EventRejection) {
        guard !Self.scan(text).nul else { throw unstorable(key) }
    }

    /// nil when absent, `null`, empty or whitespace only. An `identifier` (a key of an index) is held to
    /// ``bytesPerCharacter`` bytes per character too; a name is not (the body's size bounds it).
    func optionalString(_ key: String, maxLength: Int, identifier: Bool = false) throws(EventRejection) -> String? {
        guard let member = member(key) else { return nil }
        let text = try text(key, member)
        if text.allSatisfy(\.isWhitespace) { return nil }
        guard text.count <= maxLength else {
            throw invalid(key, "must be at most \(maxLength) characters (has \(text.count))")
        }
        if identifier, text.utf8.count > maxLength * Self.bytesPerCharacter {
            throw invalid(key, "must be at most \(maxLength * Self.bytesPerCharacter) bytes (has \(text.utf8.count))")
        }
        try storable(text, key)
        return text
    }

    /// An array (possibly empty) of at most `maxCount` strings, each as ``requiredString(_:length:)`` says.
    func requiredStrings(_ key: String, length: ClosedRange<Int>, maxCount: Int) throws(EventRejection) -> [String] {
        guard let member = member(key) else { throw missing(key) }
        guard tape.kind(at: member) == .array else {
            throw invalid(key, "must be an array of strings, not \(typeName(member))")
        }
        let count = Int(tape.tokens[member].count)
        guard count <= maxCount else { throw invalid(key, "may name at most \(maxCount) (has \(count))") }
        let elements = FieldReader(tape: tape, index: member, prefix: path(key))
        var strings: [String] = []
        strings.reserveCapacity(count)
        var item = member + 1
        while item < tape.next(after: member) {
            let name = "\(strings.count)"
            guard tape.kind(at: item) != .null else { throw elements.missing(name) }
            strings.append(try elements.checked(try elements.text(name, item), name, length: length))
            item = tape.next(after: item)
        }
        return strings
    }

    func requiredBool(_ key: String) throws(EventRejection) -> Bool {
        guard let member = member(key) else { throw missing(key) }
        guard let flag = try? tape.bool(at: member) else {
            throw invalid(key, "must be true or false, not \(typeName(member))")
        }
        return flag
    }

    /// An integer as `JSONValue` reads one (`2`, `2.0`, `2e0`), or an integral number below 9e15.
    func optionalInt(_ key: String) throws(EventRejection) -> Int? {
        guard let member = member(key) else { return nil }
        if tape.kind(at: member) == .number {
            let plain = !tape.tokens[member].flag
            if plain, let int = try? tape.integer(Int.self, at: member) { return int }
            if let double = try? tape.double(at: member), double == double.rounded() {
                if !plain, let int = Int(exactly: double) { return int }
                if abs(double) < 9e15 { return Int(double) }
            }
        }
        throw invalid(key, "must be an integer, not \(typeName(member))")
    }

    func optionalObject(_ key: String) throws(EventRejection) -> FieldReader? {
        guard let member = member(key) else { return nil }
        guard tape.kind(at: member) == .object else {
            throw invalid(key, "must be an object, not \(typeName(member))")
        }
        return FieldReader(tape: tape, index: member, prefix: path(key))
    }

    func requiredTimestamp(_ key: String) throws(EventRejection) -> Date {
        // An unescaped string is parsed where it lies; anything else takes the checked path below, which
        // says what is wrong with it.
        if let member = member(key), let range = tape.unescapedString(at: member), range.count <= 64,
            let date = tape.bytes.withUnsafeBufferPointer({ RFC3339.parse(bytes: .init(rebasing: $0[range])) })
        {
            return date
        }
        let text: String
        do {
            text = try requiredString(key, length: 1...64)
        } catch let error where error.reason == .invalidField {
            throw EventRejection(.invalidTimestamp, field: path(key), "\(path(key)) must be an RFC 3339 string")
        }
        guard let date = RFC3339.parse(text) else {
            throw EventRejection(
                .invalidTimestamp, field: path(key),
                "\(path(key)) is not an RFC 3339 timestamp with an offset (like 2026-11-21T10:04:05Z)")
        }
        return date
    }

    /// nil when absent or `null`; else as ``requiredTimestamp(_:)``.
    /// nil when absent, `null`, empty or whitespace only (as every optional field); else as
    /// ``requiredTimestamp(_:)``.
    func optionalTimestamp(_ key: String) throws(EventRejection) -> Date? {
        guard let member = member(key) else { return nil }
        if tape.kind(at: member) == .string, let text = try? tape.string(at: member),
            text.allSatisfy(\.isWhitespace)
        {
            return nil
        }
        return try requiredTimestamp(key)
    }

    func requiredToken(_ key: String) throws(EventRejection) -> DeviceToken {
        guard let member = member(key) else { throw missing(key) }
        guard tape.kind(at: member) == .string, let text = try? tape.string(at: member) else {
            throw EventRejection(
                .invalidToken, field: path(key), "\(path(key)) must be a hex string, not \(typeName(member))")
        }
        guard let token = DeviceToken(hex: text) else {
            // Never echo the token itself: its length is enough to diagnose.
            throw EventRejection(
                .invalidToken, field: path(key),
                "\(path(key)) must be even-length hex of 16–200 bytes (got \(text.utf8.count) characters)")
        }
        return token
    }

    func requiredBundleID(_ key: String) throws(EventRejection) -> String {
        let text = try requiredString(key, length: 1...155)
        guard
            text.utf8.allSatisfy({
                EventDecoder.isIdentifierByte($0) && $0 != UInt8(ascii: "_") || $0 == UInt8(ascii: ".")
                    || $0 == UInt8(ascii: "-")
            }), !text.hasPrefix("."), !text.hasSuffix(".")
        else {
            throw invalid(key, "must be a bundle identifier (letters, digits, '.', '-')")
        }
        return text
    }

    func requiredEnvironment(_ key: String) throws(EventRejection) -> APNsEnvironment {
        let text = try requiredString(key, length: 1...32)
        let environment = APNsEnvironment(rawValue: text)
        guard APNsEnvironment.known.contains(environment) else {
            throw invalid(key, "must be 'production' or 'sandbox'")
        }
        return environment
    }
}
