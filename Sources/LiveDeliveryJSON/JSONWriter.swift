/// JSON text written as it is given, into one growing byte array: the one writer and the one string
/// escaper of the package (APNs payloads, the stored documents, admin output, log records).
///
/// A class so that the nested writers of one document (``Object``, the closures of a document's
/// fields) all append to the same bytes. Its state is only ever touched by the one writing on one
/// thread, so the dynamic exclusivity checks on its bytes (a measurable share of the work, per byte)
/// are turned off.
package final class JSONWriter {
    @exclusivity(unchecked) package var bytes: [UInt8] = []

    package init(capacity: Int = 512) { bytes.reserveCapacity(capacity) }

    package func writeRaw(_ text: String) { bytes.append(contentsOf: text.utf8) }

    package func writeNull() { writeRaw("null") }

    package func writeBool(_ value: Bool) { writeRaw(value ? "true" : "false") }

    package func writeInt(_ value: Int) { writeRaw(String(value)) }

    /// A finite number as ``format(_:)`` prints it; a non-finite one is an `EncodingError`, as
    /// `JSONEncoder` makes it, with `path` (built only then) as its coding path.
    package func writeDouble(_ value: Double, path: @autoclosure () -> [any CodingKey] = []) throws {
        guard value.isFinite else {
            throw EncodingError.invalidValue(
                value, .init(codingPath: path(), debugDescription: "\(value) is not a valid JSON number"))
        }
        writeRaw(Self.format(value))
    }

    package func writeString(_ string: String) { Self.appendQuoted(string, to: &bytes) }

    /// `[`, each element as `element` writes it with commas between, `]`.
    package func writeArray<Elements: Sequence>(
        _ elements: Elements, _ element: (Elements.Element) throws -> Void
    ) rethrows {
        bytes.append(UInt8(ascii: "["))
        var first = true
        for value in elements {
            if !first { bytes.append(UInt8(ascii: ",")) }
            first = false
            try element(value)
        }
        bytes.append(UInt8(ascii: "]"))
    }

    /// An object being written: braces, the commas between members, and members left out when nil
    /// (as `encodeIfPresent` leaves them out). Member names are static ASCII identifiers, written
    /// without escaping.
    package struct Object {
        let writer: JSONWriter
        var empty = true

        package init(_ writer: JSONWriter) {
            self.writer = writer
            writer.bytes.append(UInt8(ascii: "{"))
        }

        /// A member whose value `value` writes.
        package mutating func member(_ name: StaticString, _ value: () throws -> Void) rethrows {
            key(name)
            try value()
        }

        /// A member written by `value` when it is present, left out when nil.
        package mutating func member<Value>(
            _ name: StaticString, ifPresent present: Value?, _ value: (Value) throws -> Void
        ) rethrows {
            guard let present else { return }
            key(name)
            try value(present)
        }

        package mutating func string(_ name: StaticString, _ value: String) {
            key(name)
            writer.writeString(value)
        }

        package mutating func string(_ name: StaticString, ifPresent value: String?) {
            if let value { string(name, value) }
        }

        package mutating func int(_ name: StaticString, _ value: Int) {
            key(name)
            writer.writeInt(value)
        }

        package mutating func int(_ name: StaticString, ifPresent value: Int?) {
            if let value { int(name, value) }
        }

        package mutating func double(_ name: StaticString, _ value: Double) throws {
            key(name)
            try writer.writeDouble(value, path: [JSONPathKey(name.description)])
        }

        private mutating func key(_ name: StaticString) {
            if !empty { writer.bytes.append(UInt8(ascii: ",")) }
            empty = false
            writer.bytes.append(UInt8(ascii: "\""))
            name.withUTF8Buffer { writer.bytes.append(contentsOf: $0) }
            writer.bytes.append(UInt8(ascii: "\""))
            writer.bytes.append(UInt8(ascii: ":"))
        }

        package func close() { writer.bytes.append(UInt8(ascii: "}")) }
    }

    // MARK: Numbers and strings

    /// Integral values print without a fraction; others with Swift's shortest round-trip form,
    /// which is valid JSON (`1e-05`, `785412000.5`) and reads back to the same `Double`. Non-finite
    /// values have no JSON form; they print as null here (``writeDouble(_:path:)`` refuses them).
    package static func format(_ value: Double) -> String {
        guard value.isFinite else { return "null" }
        if value == value.rounded(), abs(value) < 9_007_199_254_740_992 { return String(Int64(value)) }
        return String(value)
    }

    /// `text` as a JSON string literal, quotes included (a log field's value, a CSV-safe cell).
    package static func quoted(_ text: String) -> String {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(text.utf8.count + 2)
        appendQuoted(text, to: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }

    private static let hexDigits = Array("0123456789abcdef".utf8)

    /// Appends `string` as a JSON string literal: quotes, backslashes and control characters
    /// escaped (`\n`, `\r`, `\t`, else `\u00XX`), everything else as its UTF-8 bytes.
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
                    out.append(contentsOf: [UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0")])
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
}

/// A member's name or an element's index in an error's coding path.
package struct JSONPathKey: CodingKey, Sendable {
    package var stringValue: String
    package var intValue: Int?

    package init(_ name: String) { stringValue = name }

    package init(index: Int) {
        stringValue = "Index \(index)"
        intValue = index
    }

    package init?(stringValue: String) { self.stringValue = stringValue }
    package init?(intValue: Int) { self.init(index: intValue) }
}
