import Foundation
import LiveDeliveryJSON
import TestSupport
import Testing

/// The one parser against `JSONDecoder`, the reference: the same values from the same text, and a
/// refusal wherever `JSONDecoder` refuses.
@Suite("JSON parser")
struct JSONParserTests {
    /// What decoding through `JSONDecoder` made of a document.
    static func reference(_ text: String) -> JSONValue? {
        try? JSONDecoder().decode(JSONValue.self, from: Data(text.utf8))
    }

    static let corpus: [String] = [
        "{}", "[]", "null", "true", "false", "0", "-0", "-0.0", "1.0", "1e2", "1E+2", "1.5", "-12.25e-3",
        "12345678901234567890", "9223372036854775807", "-9223372036854775808", "0.1", "1e-7",
        #""plain""#, #""é 李 🚲""#, #""esc \" \\ \/ \b \f \n \r \t \u00e9 \ud83d\udeb2""#,
        #"{"b": 1, "a": [1, 2, {"c": null}], "d": "x"}"#, #"{"a": 1, "a": 2}"#, "[1, 2,]", #"{"a": 1,}"#,
        " \n\t {\"a\" : [ true , false ] } \r\n",
        #"{"aps":{"event":"update","timestamp":1790000000,"content-state":{"a":[1,2.5,-3e2],"b":null,"c":true}}}"#,
        // Refused.
        "", " ", "{", "[1 2]", "01", "1.", ".5", "-", "1e", "1e400", "tru", "nul", #"{"a"}"#, #"{a: 1}"#,
        #"{"a":}"#, #"{'a':1}"#, #""\ud800""#, #""\udc00""#, #""\udeb2x""#, #""\x""#, #""\u12""#, "\"\u{01}\"",
        "\"open", "[1]]", "{} {}", "NaN", "Infinity",
        String(repeating: "[", count: 600) + String(repeating: "]", count: 600),
    ]

    @Test("a number keeps its value through serializing and parsing again; after one round the bytes are stable")
    func numbersRoundTrip() throws {
        // Found by scripts/fuzz: below Int.min the literal is a double, written with an exponent, which
        // reads back as Int.min, the same value. The fuzz target's property is the value, not the case.
        let text = #"{"a":[1e308,-0,0.1,123456789012345678901234567890,-9223372036854775823,1E-400]}"#
        let value = try #require(JSONValue.parse(Array(text.utf8)))
        let again = try #require(JSONValue.parse(value.serialized()))
        guard case .object(let first) = value, case .array(let numbers)? = first["a"],
            case .object(let second) = again, case .array(let reread)? = second["a"]
        else {
            Issue.record("not an object of an array")
            return
        }
        #expect(numbers.count == reread.count && numbers.count == 6)
        for (a, b) in zip(numbers, reread) { #expect(a.numberValue == b.numberValue, "\(a) → \(b)") }
        #expect(JSONValue.parse(again.serialized())?.serialized() == again.serialized())
    }

    @Test("answers as JSONDecoder does, on tricky documents and on every example event")
    func agreesWithJSONDecoder() throws {
        var documents = Self.corpus
        for file in ["examples/delivery-A-10023.jsonl", "examples/cancelled-B-20417.jsonl"] {
            let url = TestEnvironment.projectRoot.appendingPathComponent(file)
            documents += try String(contentsOf: url, encoding: .utf8).split(separator: "\n").map(String.init)
        }
        for document in documents {
            #expect(JSONValue.parse(Array(document.utf8)) == Self.reference(document), "\(document.prefix(80))")
        }
    }

    @Test("strict RFC 8259 for apns-sim: no trailing commas, the rest alike")
    func strict() {
        for document in Self.corpus {
            let strict = JSONValue.parse(Array(document.utf8), allowingTrailingCommas: false)
            if document.contains(",]") || document.contains(",}") {
                #expect(strict == nil, "\(document)")
            } else {
                #expect(strict == JSONValue.parse(Array(document.utf8)), "\(document.prefix(80))")
            }
        }
    }

    @Test("512 levels of nesting are read, 513 refused, 10,000 refused without a stack overflow")
    func depthIsBounded() {
        func nested(_ depth: Int) -> [UInt8] {
            Array((String(repeating: "[", count: depth) + "1" + String(repeating: "]", count: depth)).utf8)
        }
        #expect(JSONValue.parse(nested(512)) != nil)
        #expect(JSONValue.parse(nested(513)) == nil)
        #expect(JSONValue.parse(nested(10_000)) == nil)
    }

    /// ASCII strings take a faster path than the rest; both must refuse bytes that are not UTF-8.
    @Test("strings are UTF-8: ASCII, other text and escapes are read; invalid bytes are refused")
    func utf8Strings() {
        func string(_ inner: [UInt8]) -> JSONValue? { JSONValue.parse([0x22] + inner + [0x22]) }
        #expect(string(Array("plain".utf8)) == .string("plain"))
        #expect(string([0xC3, 0xA9]) == .string("é"))
        #expect(string([0x5C, 0x6E, 0xC3, 0xA9]) == .string("\né"))  // after an escape
        for invalid: [UInt8] in [[0xFF], [0x61, 0xC3], [0xC3, 0x28], [0x5C, 0x6E, 0xFF], [0xED, 0xA0, 0x80]] {
            #expect(string(invalid) == nil, "\(invalid)")
        }
        #expect(UTF8Text.string(UnsafeBufferPointer(start: nil, count: 0)) == "")
    }

    @Test("malformed text is a DecodingError that says what and where")
    func malformedTextSaysWhere() throws {
        do {
            _ = try JSONValue(parsing: Array(#"{"a":1 "b":2}"#.utf8))
            Issue.record("malformed text was read")
        } catch DecodingError.dataCorrupted(let context) {
            #expect(context.debugDescription.contains("expected ',' or '}'"))
            #expect(context.debugDescription.contains("at byte 7"))
        }
    }

    /// Plain decimals up to 2^53 take a fast path (Clinger's); the rest go to `strtod`. Both must give
    /// the very `Double` that `strtod` gives, bit for bit, on either side of every limit.
    @Test("numbers read as Double are strtod's, bit for bit, on and off the fast path")
    func doublesAreStrtods() throws {
        var mantissas: [UInt64] = [
            0, 1, 5, 10, 999_999_999_999_999, 8_172_515_942_639_999, 4_503_599_627_370_497,
            9_007_199_254_740_991, 9_007_199_254_740_992, 9_007_199_254_740_993, 1_234_567_890_123_456_789,
        ]
        var next: UInt64 = 0x9E37_79B9_7F4A_7C15
        for _ in 0..<200 {
            next = next &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            mantissas.append(next >> (next % 40))  // every magnitude, from 2^24 to 2^64
        }
        var texts: [String] = []
        for mantissa in mantissas {
            let digits = String(mantissa)
            for fraction in [0, 1, 3, 7, 15, 16, 17, 22, 23, 25] {
                let padded = String(repeating: "0", count: max(0, fraction + 1 - digits.count)) + digits
                let text = fraction == 0 ? padded : "\(padded.dropLast(fraction)).\(padded.suffix(fraction))"
                texts += [text, "-" + text]
            }
        }
        texts += ["1e3", "-2.5E-3", "123456789012.5e2", "-0.0", "0.1", "817251594.2639999"]
        let tape = try JSONTape(Array("[\(texts.joined(separator: ","))]".utf8))
        let decoded = try tape.array(at: 0) { try tape.double(at: $0) }
        for (text, value) in zip(texts, decoded) {
            #expect(value.bitPattern == Double(text)!.bitPattern, "\(text): \(value) against strtod's \(Double(text)!)")
        }
    }

    @Test("integers: overflow and fractions refused as JSONDecoder refuses them, integral spellings read")
    func integers() throws {
        func int<T: FixedWidthInteger>(_ type: T.Type, _ text: String) throws -> T {
            let tape = try JSONTape(Array(text.utf8))
            return try tape.integer(T.self, at: 0)
        }
        #expect(try int(Int.self, "-9223372036854775808") == .min)
        #expect(try int(Int.self, "3e2") == 300)
        #expect(try int(Int64.self, "2.0") == 2)
        #expect(throws: DecodingError.self) { try int(Int.self, "9223372036854775808") }
        #expect(throws: DecodingError.self) { try int(Int.self, "1.5") }
        #expect(throws: DecodingError.self) { try int(UInt.self, "-1") }
        #expect(throws: DecodingError.self) { try int(Int8.self, "300") }
    }
}

@Suite("JSON reading field by field")
struct JSONTapeReadingTests {
    struct Item: Equatable {
        var count: Int
        var label: String?
    }

    /// `{"name": String, "items": [{"count": Int, "label": String?}]}`, read as `StoredJSON` reads.
    static func read(_ text: String) throws -> (String, [Item]) {
        let tape = try JSONTape(Array(text.utf8))
        let object = try JSONTape.Object(tape, 0)
        return (
            try object.string("name"),
            try object.read("items") {
                try tape.array(at: $0) { index in
                    let item = try JSONTape.Object(tape, index)
                    return Item(count: try item.int("count"), label: try item.stringIfPresent("label"))
                }
            }
        )
    }

    @Test("values, optional members missing or null, and the first of duplicate keys")
    func reads() throws {
        let (name, items) = try Self.read(
            #"{"items":[{"count":1,"label":null},{"count":2.0,"label":"b"}],"name":"x","name":"y"}"#)
        #expect(name == "x")
        #expect(items == [Item(count: 1, label: nil), Item(count: 2, label: "b")])
    }

    @Test("type mismatches, missing keys, nulls and overflows fail with their coding path")
    func errorsCarryTheirPath() {
        func path(_ text: String) -> [String]? {
            let error = #expect(throws: DecodingError.self) { try Self.read(text) }
            switch error {
            case .typeMismatch(_, let context), .valueNotFound(_, let context), .keyNotFound(_, let context),
                .dataCorrupted(let context):
                return context.codingPath.map(\.stringValue)
            default:
                return nil
            }
        }
        #expect(path(#"{"name":"x","items":[{"count":1},{"count":"2"}]}"#) == ["items", "Index 1", "count"])
        #expect(path(#"{"name":"x","items":[{"count":1},{"count":1e300}]}"#) == ["items", "Index 1", "count"])
        #expect(path(#"{"name":"x","items":[{"count":1.5}]}"#) == ["items", "Index 0", "count"])
        #expect(path(#"{"name":"x","items":[{"count":1,"label":7}]}"#) == ["items", "Index 0", "label"])
        #expect(path(#"{"name":null,"items":[]}"#) == ["name"])
        #expect(path(#"{"items":[]}"#) == [])
        #expect(path(#"{"name":"x","items":{}}"#) == ["items"])
    }
}

@Suite("JSON writer")
struct JSONWriterTests {
    @Test("strings: escapes exact, plain runs kept, and the text reads back")
    func escapes() throws {
        let quoted = JSONWriter.quoted
        #expect(quoted("plain é 李") == "\"plain é 李\"")
        #expect(quoted(#"{"a":"b\c"}"#) == #""{\"a\":\"b\\c\"}""#)
        #expect(quoted("tab\tline\nret\r\u{01}\u{1F}end") == #""tab\tline\nret\r\u0001\u001fend""#)
        #expect(quoted("\"") == #""\"""#)
        #expect(quoted("") == "\"\"")
        for text in ["q\" b\\ n\n c\u{07} 🚲", "\u{7F}\u{2028}", String(repeating: "\"", count: 100)] {
            #expect(JSONValue.parse(Array(quoted(text).utf8)) == .string(text))
            #expect(try JSONDecoder().decode(String.self, from: Data(quoted(text).utf8)) == text)
        }
    }

    @Test("numbers: integral without a fraction, the rest in the shortest form that reads back")
    func numbers() throws {
        #expect(JSONWriter.format(42) == "42")
        #expect(JSONWriter.format(-0.5) == "-0.5")
        #expect(JSONWriter.format(1e-5) == "1e-05")
        for value in [0.1, 817_251_594.2639999, 1e300, -2.5e-3, 9_007_199_254_740_992, 1.5e16] {
            #expect(Double(JSONWriter.format(value)) == value)
        }
        let writer = JSONWriter()
        #expect(throws: EncodingError.self) { try writer.writeDouble(.nan) }
        #expect(throws: EncodingError.self) { try writer.writeDouble(.infinity) }
    }

    @Test("a value serialised, compact or pretty, parses back to itself; Foundation's coders agree")
    func valuesRoundTrip() throws {
        let text = #"{"b":[1,2.5,"x",null,true,{"c":[]}],"a":{"é":"\n"},"d":-12}"#
        let value = try #require(JSONValue.parse(Array(text.utf8)))
        #expect(JSONValue.parse(value.serialized()) == value)
        #expect(JSONValue.parse(value.serialized(pretty: true)) == value)
        #expect(JSONValue.parse(Array(JSONValue.prettyPrinted(value.serialized()).utf8)) == value)
        #expect(try JSONDecoder().decode(JSONValue.self, from: try JSONEncoder().encode(value)) == value)
        #expect(JSONValue.parse(Array(try JSONEncoder().encode(value))) == value)
    }
}
