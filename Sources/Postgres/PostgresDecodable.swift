package import Foundation

/// A Swift type that a result cell (text format) decodes into. Wrong column types and unexpected NULLs throw a
/// `.decoding` error naming the column.
package protocol PostgresDecodable: Sendable {
    static func decode(from cell: PostgresCell) throws(PostgresError) -> Self
}

extension Optional: PostgresDecodable where Wrapped: PostgresDecodable {
    /// SQL NULL decodes as nil.
    package static func decode(from cell: PostgresCell) throws(PostgresError) -> Wrapped? {
        cell.isNull ? nil : try Wrapped.decode(from: cell)
    }
}

extension String: PostgresDecodable {
    /// Any column except `bytea` (whose text form is hex): text types, enums, uuid, json, numbers as written.
    package static func decode(from cell: PostgresCell) throws(PostgresError) -> String {
        guard cell.dataType != .bytea else { throw cell.decodingError(String.self, "use [UInt8] for bytea") }
        return try cell.requireText(for: String.self)
    }
}

extension PostgresCell {
    fileprivate func integer<Value: FixedWidthInteger>(_ type: Value.Type) throws(PostgresError) -> Value {
        guard dataType.isInteger || dataType == .unknown else { throw decodingError(type) }
        guard let value = Value(try requireText(for: type)) else { throw decodingError(type, "out of range") }
        return value
    }
}

extension Int: PostgresDecodable {
    /// From `int2`, `int4`, `int8` and `oid` columns.
    package static func decode(from cell: PostgresCell) throws(PostgresError) -> Int { try cell.integer(Int.self) }
}

extension Int64: PostgresDecodable {
    package static func decode(from cell: PostgresCell) throws(PostgresError) -> Int64 { try cell.integer(Int64.self) }
}

extension Int32: PostgresDecodable {
    package static func decode(from cell: PostgresCell) throws(PostgresError) -> Int32 { try cell.integer(Int32.self) }
}

extension Int16: PostgresDecodable {
    package static func decode(from cell: PostgresCell) throws(PostgresError) -> Int16 { try cell.integer(Int16.self) }
}

extension Double: PostgresDecodable {
    /// From `float4`, `float8`, `numeric` and integer columns.
    package static func decode(from cell: PostgresCell) throws(PostgresError) -> Double {
        guard
            cell.dataType == .float8 || cell.dataType == .float4 || cell.dataType == .numeric
                || cell.dataType.isInteger || cell.dataType == .unknown
        else { throw cell.decodingError(Double.self) }
        let text = try cell.requireText(for: Double.self)
        switch text {
        case "Infinity": return .infinity
        case "-Infinity": return -.infinity
        case "NaN": return .nan
        default:
            guard let value = Double(text) else { throw cell.decodingError(Double.self, "not a number") }
            return value
        }
    }
}

extension Bool: PostgresDecodable {
    package static func decode(from cell: PostgresCell) throws(PostgresError) -> Bool {
        guard cell.dataType == .bool || cell.dataType == .unknown else { throw cell.decodingError(Bool.self) }
        switch try cell.requireText(for: Bool.self) {
        case "t", "true": return true
        case "f", "false": return false
        default: throw cell.decodingError(Bool.self, "not a boolean")
        }
    }
}

extension Date: PostgresDecodable {
    /// From `timestamptz` (and `timestamp`, read as UTC), with microsecond precision.
    package static func decode(from cell: PostgresCell) throws(PostgresError) -> Date {
        guard cell.dataType == .timestamptz || cell.dataType == .timestamp || cell.dataType == .unknown else {
            throw cell.decodingError(Date.self)
        }
        guard let date = PostgresTimestamp.parse(try cell.requireText(for: Date.self)) else {
            throw cell.decodingError(Date.self, "not a finite ISO timestamp")
        }
        return date
    }
}

extension UUID: PostgresDecodable {
    /// From `uuid` columns, and from text columns holding a UUID.
    package static func decode(from cell: PostgresCell) throws(PostgresError) -> UUID {
        guard cell.dataType == .uuid || cell.dataType.isTextLike else { throw cell.decodingError(UUID.self) }
        guard let uuid = UUID(uuidString: try cell.requireText(for: UUID.self)) else {
            throw cell.decodingError(UUID.self, "not a UUID")
        }
        return uuid
    }
}

extension Array: PostgresDecodable where Element == UInt8 {
    /// `bytea` bytes; `json`/`jsonb`/text columns give their UTF-8 bytes.
    package static func decode(from cell: PostgresCell) throws(PostgresError) -> [UInt8] {
        if cell.dataType == .bytea, let bytes = cell.bytes { return bytes }
        let text = try cell.requireText(for: [UInt8].self)
        if cell.dataType == .bytea {
            guard let bytes = PostgresHex.decode(text) else { throw cell.decodingError([UInt8].self, "bad hex") }
            return bytes
        }
        guard cell.dataType == .json || cell.dataType == .jsonb || cell.dataType.isTextLike else {
            throw cell.decodingError([UInt8].self)
        }
        return Array(text.utf8)
    }
}

extension Data: PostgresDecodable {
    package static func decode(from cell: PostgresCell) throws(PostgresError) -> Data {
        Data(try [UInt8].decode(from: cell))
    }
}
