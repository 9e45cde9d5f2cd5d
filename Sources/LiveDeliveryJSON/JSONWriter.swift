/// JSON text written as it is given, into one growing buffer: the one writer and the one string
/// escaper of the package (APNs payloads, the stored documents, admin output, log records).
///
/// A class so that the nested writers of one document (``Object``, the closures of a document's
/// fields) all append to the same bytes. The bytes live in a buffer the writer owns and grows itself:
/// every token of a document is a few appends, and an `Array`'s uniqueness and capacity checks on each
/// of them were most of the cost of writing one. Only ever used by the one writing, on one thread.
package final class JSONWriter {
    private var storage: UnsafeMutablePointer<UInt8>
    private var capacity: Int
    private var count = 0

    package init(capacity: Int = 512) {
        self.capacity = max(capacity, 16)
        storage = .allocate(capacity: self.capacity)
    }

    deinit { storage.deallocate() }

    /// The text written so far.
    package var bytes: [UInt8] { Array(UnsafeBufferPointer(start: storage, count: count)) }

    @inline(__always)
    private func reserve(_ extra: Int) {
        if count + extra > capacity { grow(extra) }
    }

    private func grow(_ extra: Int) {
        let grown = max(capacity * 2, count + extra)
        let larger = UnsafeMutablePointer<UInt8>.allocate(capacity: grown)
        larger.update(from: storage, count: count)
        storage.deallocate()
        storage = larger
        capacity = grown
    }

    @inline(__always)
    func append(_ byte: UInt8) {
        reserve(1)
        storage[count] = byte
        count += 1
    }

    @inline(__always)
    func append(_ buffer: UnsafeBufferPointer<UInt8>) {
        guard let base = buffer.baseAddress, !buffer.isEmpty else { return }
        reserve(buffer.count)
        (storage + count).update(from: base, count: buffer.count)
        count += buffer.count
    }

    package func writeRaw(_ text: String) {
        var text = text
        text.withUTF8 { append($0) }
    }

    /// Bytes that are JSON text already (a value serialized elsewhere), as they are.
    package func writeRaw(_ bytes: [UInt8]) {
        bytes.withUnsafeBufferPointer { append($0) }
    }

    package func writeNull() { writeRaw("null") }

    package func writeBool(_ value: Bool) { writeRaw(value ? "true" : "false") }

    package func writeInt(_ value: Int) { appendDecimal(Int64(value)) }

    /// A finite number as ``format(_:)`` prints it; a non-finite one is an `EncodingError`, as
    /// `JSONEncoder` makes it, with `path` (built only then) as its coding path.
    package func writeDouble(_ value: Double, path: @autoclosure () -> [any CodingKey] = []) throws {
        guard value.isFinite else {
            throw EncodingError.invalidValue(
                value, .init(codingPath: path(), debugDescription: "\(value) is not a valid JSON number"))
        }
        if let integral = Self.integral(value) {
            appendDecimal(integral)
        } else {
            writeRaw(String(value))
        }
    }

    /// The value as an integer when it is one that a `Double` holds exactly (below 2^53): JSON prints it
    /// without a fraction.
    private static func integral(_ value: Double) -> Int64? {
        value == value.rounded() && abs(value) < 9_007_199_254_740_992 ? Int64(value) : nil
    }

    /// The decimal digits of `value`, written straight into the buffer (no `String` in between).
    private func appendDecimal(_ value: Int64) {
        if value < 0 { append(UInt8(ascii: "-")) }
        var magnitude = value.magnitude
        guard magnitude >= 10 else {
            append(UInt8(ascii: "0") + UInt8(magnitude))
            return
        }
        // At most 20 digits, written backwards into a fixed buffer, then appended in order.
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 20) { buffer in
            var start = 20
            while magnitude > 0 {
                start -= 1
                buffer[start] = UInt8(ascii: "0") + UInt8(magnitude % 10)
                magnitude /= 10
            }
            append(UnsafeBufferPointer(rebasing: buffer[start..<20]))
        }
    }

    package func writeString(_ string: String) {
        Self.quote(string, byte: { append($0) }, run: { append($0) })
    }

    /// `[`, each element as `element` writes it with commas between, `]`.
    package func writeArray<Elements: Sequence>(
        _ elements: Elements, _ element: (Elements.Element) throws -> Void
    ) rethrows {
        append(UInt8(ascii: "["))
        var first = true
        for value in elements {
            if !first { append(UInt8(ascii: ",")) }
            first = false
            try element(value)
        }
        append(UInt8(ascii: "]"))
    }

    /// An object being written: braces, the commas between members, and members left out when nil
    /// (as `encodeIfPresent` leaves them out). Member names are static ASCII identifiers, written
    /// without escaping.
    package struct Object {
        let writer: JSONWriter
        var empty = true

        package init(_ writer: JSONWriter) {
            self.writer = writer
            writer.append(UInt8(ascii: "{"))
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
            if !empty { writer.append(UInt8(ascii: ",")) }
            empty = false
            writer.append(UInt8(ascii: "\""))
            name.withUTF8Buffer { writer.append($0) }
            writer.append(UInt8(ascii: "\""))
            writer.append(UInt8(ascii: ":"))
        }

        package func close() { writer.append(UInt8(ascii: "}")) }
    }

    // MARK: Numbers and strings

    /// Integral values print without a fraction; others with Swift's shortest round-trip form,
    /// which is valid JSON (`1e-05`, `785412000.5`) and reads back to the same `Double`. Non-finite
    /// values have no JSON form; they print as null here (``writeDouble(_:path:)`` refuses them).
    package static func format(_ value: Double) -> String {
        guard value.isFinite else { return "null" }
        if let integral = integral(value) { return String(integral) }
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
        quote(string, byte: { out.append($0) }, run: { out.append(contentsOf: $0) })
    }

    /// `string` quoted and escaped, given to `byte` and `run` in order. Runs of plain bytes go whole; the
    /// content-state JSON kept in every stored state is full of quotes, so this path is a hot one.
    @inline(__always)
    private static func quote(
        _ string: String, byte: (UInt8) -> Void, run: (UnsafeBufferPointer<UInt8>) -> Void
    ) {
        var text = string
        byte(UInt8(ascii: "\""))
        text.withUTF8 { bytes in
            var start = 0
            for index in 0..<bytes.count {
                let character = bytes[index]
                guard character < 0x20 || character == UInt8(ascii: "\"") || character == UInt8(ascii: "\\") else {
                    continue
                }
                run(UnsafeBufferPointer(rebasing: bytes[start..<index]))
                byte(UInt8(ascii: "\\"))
                switch character {
                case UInt8(ascii: "\n"): byte(UInt8(ascii: "n"))
                case UInt8(ascii: "\r"): byte(UInt8(ascii: "r"))
                case UInt8(ascii: "\t"): byte(UInt8(ascii: "t"))
                case 0..<0x20:
                    byte(UInt8(ascii: "u"))
                    byte(UInt8(ascii: "0"))
                    byte(UInt8(ascii: "0"))
                    byte(hexDigits[Int(character >> 4)])
                    byte(hexDigits[Int(character & 0xF)])
                default: byte(character)  // `"` or `\`
                }
                start = index + 1
            }
            run(UnsafeBufferPointer(rebasing: bytes[start..<bytes.count]))
        }
        byte(UInt8(ascii: "\""))
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
