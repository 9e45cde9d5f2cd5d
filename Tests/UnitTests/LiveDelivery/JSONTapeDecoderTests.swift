import Foundation
import LiveDeliveryCore
import Testing

@testable import LiveDelivery

/// The tape decoder against `JSONDecoder`, the reference: the same values from the same text, and
/// an error wherever `JSONDecoder` has one.
@Suite("JSONTapeDecoder")
struct JSONTapeDecoderTests {
    typealias Sample = JSONStreamEncoderTests.Sample
    typealias Shape = JSONStreamEncoderTests.Shape
    typealias Derived = JSONStreamEncoderTests.Derived

    static func decode<T: Decodable>(_ type: T.Type, _ text: String) throws -> T {
        try JSONTapeDecoder.decode(type, from: Array(text.utf8))
    }

    @Test("every state and push of the example deliveries decodes equal, from either encoder's text")
    func coreValues() throws {
        let (states, pushes) = try JSONStreamEncoderTests.statesAndPushes()
        #expect(states.count > 10 && pushes.count > 5)
        let sorted = JSONEncoder()
        sorted.outputFormatting = [.sortedKeys, .prettyPrinted, .withoutEscapingSlashes]
        for state in states {
            #expect(try JSONTapeDecoder.decode(OrderState.self, from: try JSONStreamEncoder.encode(state)) == state)
            #expect(try JSONTapeDecoder.decode(OrderState.self, from: Array(try sorted.encode(state))) == state)
        }
        #expect(try JSONTapeDecoder.decode([PlannedPush].self, from: try JSONStreamEncoder.encode(pushes)) == pushes)
        #expect(try JSONTapeDecoder.decode([PlannedPush].self, from: Array(try sorted.encode(pushes))) == pushes)
    }

    @Test("escapes, numbers, optionals, dates, data, URLs, dictionaries, enums and superDecoder")
    func everyKindOfValue() throws {
        let sample = JSONStreamEncoderTests.sample
        for bytes in [try JSONStreamEncoder.encode(sample), Array(try JSONEncoder().encode(sample))] {
            #expect(try JSONTapeDecoder.decode(Sample.self, from: bytes) == sample)
        }
        let shapes: [Shape] = [.dot, .circle(radius: 2.5), .path([.dot, .path([], closed: false)], closed: true)]
        #expect(try JSONTapeDecoder.decode([Shape].self, from: Array(try JSONEncoder().encode(shapes))) == shapes)
        let derived = [Derived(base: 7, extra: "x")]
        #expect(try JSONTapeDecoder.decode([Derived].self, from: Array(try JSONEncoder().encode(derived))) == derived)
    }

    /// Documents both decoders must read alike: escapes JSONEncoder never writes, surrogate pairs,
    /// integral numbers spelled with fractions or exponents, whitespace, duplicate keys, null.
    @Test(arguments: [
        #"{"a":"\u00e9\ud83d\udeb2\/\b\f\n\r\t\"\\","b":[1,2.0,3e2,-0,1E+1,-12.5e-1]}"#,
        #" { "a" : "x" , "b" : [ ] } "#,
        #"{"a":"first","a":"second","b":[]}"#,
        #"{"a":null,"b":[1]}"#,
        #"{"b":[9007199254740993, 123456789012345678]}"#,
    ])
    func agreesWithJSONDecoder(text: String) throws {
        struct Document: Decodable, Equatable {
            var a: String?
            var b: [Double]
        }
        let reference = try JSONDecoder().decode(Document.self, from: Data(text.utf8))
        #expect(try Self.decode(Document.self, text) == reference)
        let integers = try JSONDecoder().decode([String: [Int64]].self, from: Data(#"{"b":[1,2.0,3e2,-0]}"#.utf8))
        #expect(try Self.decode([String: [Int64]].self, #"{"b":[1,2.0,3e2,-0]}"#) == integers)
    }

    @Test(arguments: [
        #"{"a":1,}"#, #"[1,]"#, #"{"a" 1}"#, #"{'a':1}"#, #"[01]"#, #"[1.]"#, #"[.5]"#, #"[1e]"#, #"[-]"#,
        #"["\x"]"#, #"["\u12"]"#, "[\"tab\there\"]", #"["\ud83d"]"#, #"["\udeb2x"]"#, #"[tru]"#, #"[1] 2"#, "",
        #"{"a":"#, #"["unterminated]"#,
    ])
    func malformedTextIsDataCorrupted(text: String) {
        #expect(throws: DecodingError.self) { try Self.decode([String: [String]].self, text) }
        #expect(throws: DecodingError.self) { try Self.decode([String].self, text) }
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
        let decoded = try JSONTapeDecoder.decode([Double].self, from: Array("[\(texts.joined(separator: ","))]".utf8))
        for (text, value) in zip(texts, decoded) {
            #expect(value.bitPattern == Double(text)!.bitPattern, "\(text): \(value) against strtod's \(Double(text)!)")
        }
    }

    /// ASCII strings take a faster path than the rest; both must refuse bytes that are not UTF-8.
    @Test("strings are UTF-8: ASCII, other text and escapes are read; invalid bytes are refused")
    func utf8Strings() throws {
        func bytes(_ inner: [UInt8]) -> [UInt8] { [0x5B, 0x22] + inner + [0x22, 0x5D] }  // ["…"]
        #expect(try JSONTapeDecoder.decode([String].self, from: bytes(Array("plain".utf8))) == ["plain"])
        #expect(try JSONTapeDecoder.decode([String].self, from: bytes([0xC3, 0xA9])) == ["é"])
        #expect(try JSONTapeDecoder.decode([String].self, from: bytes([0x5C, 0x6E, 0xC3, 0xA9])) == ["\né"])
        for invalid: [UInt8] in [[0xFF], [0x61, 0xC3], [0xC3, 0x28], [0x5C, 0x6E, 0xFF], [0xED, 0xA0, 0x80]] {
            #expect(throws: DecodingError.self) { try JSONTapeDecoder.decode([String].self, from: bytes(invalid)) }
        }
    }

    @Test("type mismatches, missing keys, nulls and overflows fail with their coding path")
    func errorsCarryTheirPath() throws {
        struct Inner: Decodable { var count: Int8 }
        struct Outer: Decodable {
            var name: String
            var items: [Inner]
        }
        func path(_ text: String) -> [String]? {
            let error = #expect(throws: DecodingError.self) { try Self.decode(Outer.self, text) }
            switch error {
            case .typeMismatch(_, let context), .valueNotFound(_, let context), .keyNotFound(_, let context),
                .dataCorrupted(let context):
                return context.codingPath.map(\.stringValue)
            default:
                return nil
            }
        }
        #expect(path(#"{"name":"x","items":[{"count":1},{"count":"2"}]}"#) == ["items", "Index 1", "count"])
        #expect(path(#"{"name":"x","items":[{"count":1},{"count":300}]}"#) == ["items", "Index 1", "count"])
        #expect(path(#"{"name":"x","items":[{"count":1.5}]}"#) == ["items", "Index 0", "count"])
        #expect(path(#"{"name":null,"items":[]}"#) == ["name"])
        #expect(path(#"{"items":[]}"#) == [])
        #expect(path(#"{"name":"x","items":{}}"#) == ["items"])
        #expect(throws: DecodingError.self) { try Self.decode([Int].self, "[9223372036854775808]") }
        #expect(try Self.decode([Int].self, "[-9223372036854775808]") == [.min])
        #expect(throws: DecodingError.self) { try Self.decode([Double].self, "[1e400]") }
        #expect(throws: DecodingError.self) { try Self.decode([UInt].self, "[-1]") }
    }

    @Test("nesting deeper than 512 levels is refused, not a stack overflow")
    func depthIsBounded() {
        let deep = String(repeating: "[", count: 10_000) + String(repeating: "]", count: 10_000)
        #expect(throws: DecodingError.self) { try Self.decode([[String]].self, deep) }
    }
}
