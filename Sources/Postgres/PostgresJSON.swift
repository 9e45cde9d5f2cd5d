package import Foundation

/// A JSON document, bound as a `jsonb` parameter (text format) and decoded from `json`/`jsonb` columns.
///
///     try await client.query("INSERT INTO outbox (payload) VALUES (\(PostgresJSON(event)))")
///     let event = try row.decode(PostgresJSON.self, "payload").decode(Event.self)
package struct PostgresJSON: PostgresEncodable, PostgresDecodable, Hashable {
    /// The encoded UTF-8 JSON text.
    package var bytes: [UInt8]

    /// Already-encoded JSON (not validated here; the server rejects malformed JSON).
    package init(bytes: [UInt8]) { self.bytes = bytes }

    /// Encodes a value with `JSONEncoder` (sorted keys so equal values give equal text).
    package init<Value: Encodable>(_ value: Value, encoder: JSONEncoder? = nil) throws {
        let encoder =
            encoder
            ?? {
                let encoder = JSONEncoder()
                encoder.outputFormatting = [.sortedKeys]
                return encoder
            }()
        self.bytes = Array(try encoder.encode(value))
    }

    /// Decodes the document with `JSONDecoder`.
    package func decode<Value: Decodable>(_ type: Value.Type, decoder: JSONDecoder = JSONDecoder()) throws -> Value {
        try decoder.decode(type, from: Data(bytes))
    }

    package static var postgresType: PostgresDataType { .jsonb }
    package var postgresText: String { String(decoding: bytes, as: UTF8.self) }

    package static func decode(from cell: PostgresCell) throws(PostgresError) -> PostgresJSON {
        guard cell.dataType == .json || cell.dataType == .jsonb || cell.dataType.isTextLike else {
            throw cell.decodingError(PostgresJSON.self)
        }
        return PostgresJSON(bytes: Array(try cell.requireText(for: PostgresJSON.self).utf8))
    }
}

/// A JSON document bound as a `json` parameter: the server checks its syntax and keeps the text.
///
/// `jsonb` builds a binary tree on input and prints it back on output, which for a 2 kB document
/// costs the server about twice as much on the way in and three times on the way out. Use this for
/// documents that are stored and read whole (a `json` column), alone or as the elements of a
/// `json[]` parameter; it still converts to a `jsonb` column on assignment.
package struct PostgresJSONText: PostgresArrayElement, Hashable {
    /// The encoded UTF-8 JSON text (not validated here; the server rejects malformed JSON).
    package var bytes: [UInt8]

    package init(bytes: [UInt8]) { self.bytes = bytes }

    package static var postgresType: PostgresDataType { .json }
    package static var postgresArrayType: PostgresDataType { .jsonArray }
    package var postgresText: String { String(decoding: bytes, as: UTF8.self) }

    package func withPostgresTextBytes<Result>(
        _ body: (UnsafeBufferPointer<UInt8>) throws -> Result
    ) rethrows
        -> Result
    {
        try bytes.withUnsafeBufferPointer(body)
    }

    /// `json`'s binary form is its text.
    package static var postgresBinaryElementType: PostgresDataType? { .json }
    package func appendPostgresBinary(to bytes: inout [UInt8]) { bytes.append(contentsOf: self.bytes) }
}
