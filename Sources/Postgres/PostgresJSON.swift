public import Foundation

/// A JSON document, bound as a `jsonb` parameter (text format) and decoded from `json`/`jsonb` columns.
///
///     try await client.query("INSERT INTO outbox (payload) VALUES (\(PostgresJSON(event)))")
///     let event = try row.decode(PostgresJSON.self, "payload").decode(Event.self)
public struct PostgresJSON: PostgresEncodable, PostgresDecodable, Hashable {
    /// The encoded UTF-8 JSON text.
    public var bytes: [UInt8]

    /// Already-encoded JSON (not validated here; the server rejects malformed JSON).
    public init(bytes: [UInt8]) { self.bytes = bytes }

    /// Encodes a value with `JSONEncoder` (sorted keys so equal values give equal text).
    public init<Value: Encodable>(_ value: Value, encoder: JSONEncoder? = nil) throws {
        let encoder = encoder ?? {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys]
            return encoder
        }()
        self.bytes = Array(try encoder.encode(value))
    }

    /// Decodes the document with `JSONDecoder`.
    public func decode<Value: Decodable>(_ type: Value.Type, decoder: JSONDecoder = JSONDecoder()) throws -> Value {
        try decoder.decode(type, from: Data(bytes))
    }

    public static var postgresType: PostgresDataType { .jsonb }
    public var postgresText: String { String(decoding: bytes, as: UTF8.self) }

    public static func decode(from cell: PostgresCell) throws(PostgresError) -> PostgresJSON {
        guard cell.dataType == .json || cell.dataType == .jsonb || cell.dataType.isTextLike else {
            throw cell.decodingError(PostgresJSON.self)
        }
        return PostgresJSON(bytes: Array(try cell.requireText(for: PostgresJSON.self).utf8))
    }
}
