import Foundation
import LiveDeliveryCore

/// Encodes `Encodable` values straight into JSON bytes, for the worker's JSON parameters.
///
/// `JSONEncoder` first builds a tree of every value (a dictionary per object) and then writes it;
/// the worker encodes an order's state (about 2 kB, some 150 values) twice per event, and that was
/// the largest single cost of a worker. This encoder writes each value as it is given, so it asks
/// one thing of `encode(to:)` implementations, which synthesized conformances and the core's
/// hand-written ones meet: a value uses one container at a time and finishes a nested value before
/// starting the next (no `superEncoder`, no container kept aside and written to later).
///
/// A value that does otherwise (or asks for `superEncoder`) is encoded again with `JSONEncoder`.
///
/// The output is what `JSONDecoder` with its default strategies reads back to an equal value:
/// `Date` as seconds since 2001 (as `Date.encode(to:)` does), `Data` as Base64, `URL` as its
/// absolute string, non-finite numbers refused. Keys are not sorted (nothing compares the text).
enum JSONStreamEncoder {
    static func encode<Value: Encodable>(_ value: Value) throws -> [UInt8] {
        let writer = JSONByteWriter()
        try writer.encodeValue(value, parent: nil, key: nil)
        if writer.unsupported { return Array(try JSONEncoder().encode(value)) }
        return writer.bytes
    }
}

/// The output and the writing of one value at a time.
///
/// Its state is only ever touched by the one encoding on one thread, so the dynamic exclusivity
/// checks on its properties (a measurable share of the work, per byte) are turned off.
final class JSONByteWriter {
    @exclusivity(unchecked) var bytes: [UInt8] = []
    /// A value used its containers in a way this encoder cannot stream (the output is discarded).
    @exclusivity(unchecked) var unsupported = false

    init() { bytes.reserveCapacity(4096) }

    /// Writes one value; `parent` and `key` give its coding path (built only for an error).
    func encodeValue<Value: Encodable>(_ value: Value, parent: StreamingEncoder?, key: (any CodingKey)?) throws {
        // The common types by metatype identity (a pointer comparison), before any dynamic cast.
        if Value.self == String.self { return writeString(unsafeBitCast(value, to: String.self)) }
        if Value.self == Int.self { return writeRaw(String(unsafeBitCast(value, to: Int.self))) }
        if Value.self == Double.self {
            return try writeDouble(unsafeBitCast(value, to: Double.self), path: { StreamingEncoder.path(parent, key) })
        }
        if Value.self == Date.self {
            return try writeDouble(
                unsafeBitCast(value, to: Date.self).timeIntervalSinceReferenceDate,
                path: { StreamingEncoder.path(parent, key) })
        }
        if Value.self == Bool.self { return writeRaw(unsafeBitCast(value, to: Bool.self) ? "true" : "false") }
        guard Self.special.contains(ObjectIdentifier(Value.self)) else {
            let encoder = StreamingEncoder(writer: self, parent: parent, key: key)
            try value.encode(to: encoder)
            encoder.close()
            return
        }
        switch value {
        case let data as Data: writeString(data.base64EncodedString())
        case let url as URL: writeString(url.absoluteString)
        case let decimal as Decimal: writeRaw(decimal.description)
        case let int as Int64: writeRaw(String(int))
        case let int as Int32: writeRaw(String(int))
        case let int as Int16: writeRaw(String(int))
        case let int as Int8: writeRaw(String(int))
        case let int as UInt: writeRaw(String(int))
        case let int as UInt64: writeRaw(String(int))
        case let int as UInt32: writeRaw(String(int))
        case let int as UInt16: writeRaw(String(int))
        case let int as UInt8: writeRaw(String(int))
        case let float as Float:
            guard float.isFinite else {
                throw EncodingError.invalidValue(
                    float,
                    .init(
                        codingPath: StreamingEncoder.path(parent, key),
                        debugDescription: "\(float) is not a valid JSON number"))
            }
            writeRaw(float.description)
        default:
            let encoder = StreamingEncoder(writer: self, parent: parent, key: key)
            try value.encode(to: encoder)
            encoder.close()
        }
    }

    /// Types written as `JSONEncoder` writes them rather than through their `encode(to:)`.
    private static let special: Set<ObjectIdentifier> = [
        ObjectIdentifier(Data.self), ObjectIdentifier(URL.self), ObjectIdentifier(Decimal.self),
        ObjectIdentifier(Int64.self), ObjectIdentifier(Int32.self), ObjectIdentifier(Int16.self),
        ObjectIdentifier(Int8.self), ObjectIdentifier(UInt.self), ObjectIdentifier(UInt64.self),
        ObjectIdentifier(UInt32.self), ObjectIdentifier(UInt16.self), ObjectIdentifier(UInt8.self),
        ObjectIdentifier(Float.self),
    ]

    func writeRaw(_ text: String) {
        bytes.append(contentsOf: text.utf8)
    }

    func writeDouble(_ value: Double, path: () -> [any CodingKey]) throws {
        guard value.isFinite else {
            throw EncodingError.invalidValue(
                value, .init(codingPath: path(), debugDescription: "\(value) is not a valid JSON number"))
        }
        if value == value.rounded(), abs(value) < 1e15 {
            writeRaw(String(Int64(value)))
        } else {
            writeRaw(value.description)
        }
    }

    func writeString(_ string: String) {
        JSONValue.appendQuoted(string, to: &bytes)
    }
}

/// The `Encoder` handed to one value's `encode(to:)`: opens at most one container, which is closed
/// when `encode(to:)` returns.
final class StreamingEncoder: Encoder {
    enum Opened { case none, keyed, unkeyed, single }

    let writer: JSONByteWriter
    let parent: StreamingEncoder?
    let key: (any CodingKey)?
    var codingPath: [any CodingKey] { Self.path(parent, key) }
    var userInfo: [CodingUserInfoKey: Any] { [:] }
    // Touched by one encoding on one thread only (see JSONByteWriter).
    @exclusivity(unchecked) var opened = Opened.none
    /// Entries written in the open container (for commas).
    @exclusivity(unchecked) var count = 0
    @exclusivity(unchecked) var closed = false
    /// A nested container still open, closed before this one is written to again.
    @exclusivity(unchecked) var pendingChild: StreamingEncoder?

    init(writer: JSONByteWriter, parent: StreamingEncoder?, key: (any CodingKey)?) {
        self.writer = writer
        self.parent = parent
        self.key = key
    }

    static func path(_ parent: StreamingEncoder?, _ key: (any CodingKey)?) -> [any CodingKey] {
        (parent?.codingPath ?? []) + (key.map { [$0] } ?? [])
    }

    /// An array element's key in a coding path.
    struct Index: CodingKey {
        var intValue: Int?
        var stringValue: String { "Index \(intValue ?? 0)" }
        init(intValue: Int) { self.intValue = intValue }
        init?(stringValue: String) { nil }
    }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        open(.keyed)
        return KeyedEncodingContainer(Keyed<Key>(encoder: self))
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        open(.unkeyed)
        return Unkeyed(encoder: self)
    }

    func singleValueContainer() -> any SingleValueEncodingContainer {
        if opened != .none { writer.unsupported = true }
        opened = .single
        return Single(encoder: self)
    }

    private func open(_ kind: Opened) {
        if opened == .none {
            opened = kind
            writer.bytes.append(UInt8(ascii: kind == .keyed ? "{" : "["))
        } else if opened != kind {
            writer.unsupported = true
        }
    }

    /// Ends the value: closes its container (an object if it opened none, as `JSONEncoder` does).
    func close() {
        closePendingChild()
        switch opened {
        case .none: writer.bytes.append(contentsOf: [UInt8(ascii: "{"), UInt8(ascii: "}")])
        case .keyed: writer.bytes.append(UInt8(ascii: "}"))
        case .unkeyed: writer.bytes.append(UInt8(ascii: "]"))
        case .single: break
        }
        closed = true
    }

    private func closePendingChild() {
        pendingChild?.close()
        pendingChild = nil
    }

    /// Before writing an entry: closes a nested container left open; a write to a container
    /// already closed cannot be streamed.
    func separate() {
        if closed { writer.unsupported = true }
        closePendingChild()
        if count > 0 { writer.bytes.append(UInt8(ascii: ",")) }
        count += 1
    }

    /// A nested container, written in place and closed before this container's next entry.
    func nested(_ kind: Opened, key: any CodingKey) -> StreamingEncoder {
        let child = StreamingEncoder(writer: writer, parent: self, key: key)
        child.open(kind)
        pendingChild = child
        return child
    }

    /// For `superEncoder`: an encoder whose output is discarded, the value being encoded again.
    func unsupported() -> StreamingEncoder {
        writer.unsupported = true
        return StreamingEncoder(writer: JSONByteWriter(), parent: self, key: nil)
    }

    struct Keyed<Key: CodingKey>: KeyedEncodingContainerProtocol {
        let encoder: StreamingEncoder
        var codingPath: [any CodingKey] { encoder.codingPath }

        private func key(_ key: Key) {
            encoder.separate()
            encoder.writer.writeString(key.stringValue)
            encoder.writer.bytes.append(UInt8(ascii: ":"))
        }

        mutating func encodeNil(forKey key: Key) throws {
            self.key(key)
            encoder.writer.writeRaw("null")
        }

        mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws {
            self.key(key)
            try encoder.writer.encodeValue(value, parent: encoder, key: key)
        }

        mutating func encode(_ value: String, forKey key: Key) throws {
            self.key(key)
            encoder.writer.writeString(value)
        }

        mutating func encode(_ value: Int, forKey key: Key) throws {
            self.key(key)
            encoder.writer.writeRaw(String(value))
        }

        mutating func encode(_ value: Bool, forKey key: Key) throws {
            self.key(key)
            encoder.writer.writeRaw(value ? "true" : "false")
        }

        mutating func encode(_ value: Double, forKey key: Key) throws {
            self.key(key)
            try encoder.writer.writeDouble(value, path: { StreamingEncoder.path(encoder, key) })
        }

        mutating func encodeIfPresent<T: Encodable>(_ value: T?, forKey key: Key) throws {
            guard let value else { return }
            try encode(value, forKey: key)
        }

        mutating func nestedContainer<NestedKey: CodingKey>(
            keyedBy keyType: NestedKey.Type, forKey key: Key
        ) -> KeyedEncodingContainer<NestedKey> {
            self.key(key)
            return KeyedEncodingContainer(Keyed<NestedKey>(encoder: encoder.nested(.keyed, key: key)))
        }

        mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
            self.key(key)
            return Unkeyed(encoder: encoder.nested(.unkeyed, key: key))
        }

        mutating func superEncoder() -> any Encoder { encoder.unsupported() }
        mutating func superEncoder(forKey key: Key) -> any Encoder { encoder.unsupported() }
    }

    struct Unkeyed: UnkeyedEncodingContainer {
        let encoder: StreamingEncoder
        var codingPath: [any CodingKey] { encoder.codingPath }
        var count: Int { encoder.count }

        mutating func encodeNil() throws {
            encoder.separate()
            encoder.writer.writeRaw("null")
        }

        mutating func encode<T: Encodable>(_ value: T) throws {
            encoder.separate()
            try encoder.writer.encodeValue(value, parent: encoder, key: Index(intValue: encoder.count - 1))
        }

        mutating func nestedContainer<NestedKey: CodingKey>(
            keyedBy keyType: NestedKey.Type
        )
            -> KeyedEncodingContainer<NestedKey>
        {
            encoder.separate()
            let child = encoder.nested(.keyed, key: Index(intValue: encoder.count - 1))
            return KeyedEncodingContainer(Keyed<NestedKey>(encoder: child))
        }

        mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer {
            encoder.separate()
            return Unkeyed(encoder: encoder.nested(.unkeyed, key: Index(intValue: encoder.count - 1)))
        }

        mutating func superEncoder() -> any Encoder { encoder.unsupported() }
    }

    struct Single: SingleValueEncodingContainer {
        let encoder: StreamingEncoder
        var codingPath: [any CodingKey] { encoder.codingPath }

        /// A single value is written once.
        private func once() {
            if encoder.count > 0 { encoder.writer.unsupported = true }
            encoder.count += 1
        }

        mutating func encodeNil() throws {
            once()
            encoder.writer.writeRaw("null")
        }

        mutating func encode<T: Encodable>(_ value: T) throws {
            once()
            try encoder.writer.encodeValue(value, parent: encoder.parent, key: encoder.key)
        }
    }
}
