/// The result of one statement, copied out of libpq: column descriptions, rows of values and the number of rows
/// affected. Nothing in it refers to C memory. Values are text, as PostgreSQL writes them, except the `bytea` cells
/// of a result asked for in binary format (``PostgresQuery/ResultFormat/binary``), which keep their bytes.
package struct PostgresRows: Sendable, RandomAccessCollection {
    /// The result's columns, in order.
    package var columns: [PostgresColumn] { storage.columns }
    /// `PQcmdTuples`: rows inserted, updated, deleted, selected, … (0 when the command reports none).
    package let affectedRows: Int
    /// The command tag, e.g. `INSERT 0 1`.
    package let commandTag: String

    let storage: Storage

    init(columns: [PostgresColumn], cells: [String?], bytes: [[UInt8]?] = [], affectedRows: Int, commandTag: String) {
        storage = Storage(columns: columns, cells: cells, bytes: bytes)
        self.affectedRows = affectedRows
        self.commandTag = commandTag
    }

    package var startIndex: Int { 0 }
    package var endIndex: Int { storage.columns.isEmpty ? 0 : storage.cells.count / storage.columns.count }
    package subscript(position: Int) -> PostgresRow {
        precondition(position >= 0 && position < endIndex, "row index out of range")
        return PostgresRow(storage: storage, row: position)
    }

    /// Immutable, shared by the rows of one result.
    final class Storage: Sendable {
        let columns: [PostgresColumn]
        let indexByName: [String: Int]
        /// Row-major: `cells[row * columns.count + column]`; nil is SQL NULL, or a cell in ``bytes``.
        let cells: [String?]
        /// Empty, or row-major as ``cells``: the cells a binary result keeps as bytes.
        let bytes: [[UInt8]?]

        init(columns: [PostgresColumn], cells: [String?], bytes: [[UInt8]?]) {
            self.bytes = bytes
            self.columns = columns
            var indexByName: [String: Int] = [:]
            for (index, column) in columns.enumerated() where indexByName[column.name] == nil {
                indexByName[column.name] = index
            }
            self.indexByName = indexByName
            self.cells = cells
        }
    }
}

/// A result column: its name and type.
package struct PostgresColumn: Sendable, Hashable {
    package var name: String
    package var dataType: PostgresDataType
}

/// One row of a `PostgresRows`.
package struct PostgresRow: Sendable {
    let storage: PostgresRows.Storage
    let row: Int

    package var columns: [PostgresColumn] { storage.columns }

    /// The cell in the first column with this name.
    package func cell(_ column: String) throws(PostgresError) -> PostgresCell {
        guard let index = storage.indexByName[column] else {
            var error = PostgresError(code: .decoding, message: "the result has no column \"\(column)\"")
            error.columnName = column
            throw error
        }
        return cell(at: index)
    }

    /// The cell at a column index (precondition: in range).
    package func cell(at index: Int) -> PostgresCell {
        precondition(index >= 0 && index < storage.columns.count, "column index out of range")
        let column = storage.columns[index]
        return PostgresCell(
            columnName: column.name,
            columnIndex: index,
            dataType: column.dataType,
            text: storage.cells[row * storage.columns.count + index],
            bytes: storage.bytes.isEmpty ? nil : storage.bytes[row * storage.columns.count + index]
        )
    }

    /// Decodes the first column with this name: `try row.decode(String.self, "email")`.
    package func decode<Value: PostgresDecodable>(
        _ type: Value.Type = Value.self,
        _ column: String
    ) throws(PostgresError) -> Value {
        try Value.decode(from: cell(column))
    }

    /// Decodes the column at an index: `try row.decode(Int.self, at: 0)`.
    package func decode<Value: PostgresDecodable>(
        _ type: Value.Type = Value.self,
        at index: Int
    ) throws(PostgresError) -> Value {
        guard index >= 0 && index < storage.columns.count else {
            throw PostgresError(code: .decoding, message: "the result has no column at index \(index)")
        }
        return try Value.decode(from: cell(at: index))
    }
}

/// One value of a row in text format, with where it came from (for error messages).
package struct PostgresCell: Sendable, Hashable {
    package var columnName: String
    package var columnIndex: Int
    package var dataType: PostgresDataType
    /// The text form; nil is SQL NULL, or a value sent as ``bytes``.
    package var text: String?
    /// The value in PostgreSQL's binary form, for a result asked for in binary format (`bytea`: its bytes).
    package var bytes: [UInt8]?

    package init(columnName: String, columnIndex: Int, dataType: PostgresDataType, text: String?, bytes: [UInt8]? = nil)
    {
        self.columnName = columnName
        self.columnIndex = columnIndex
        self.dataType = dataType
        self.text = text
        self.bytes = bytes
    }

    /// SQL NULL.
    package var isNull: Bool { text == nil && bytes == nil }

    /// A `.decoding` error that names the column, its type and the Swift type; never the value.
    package func decodingError<Value>(_ type: Value.Type, _ reason: String? = nil) -> PostgresError {
        var message = "cannot decode column \"\(columnName)\" (index \(columnIndex), \(dataType)) as \(Value.self)"
        if let reason { message += ": \(reason)" }
        var error = PostgresError(code: .decoding, message: message)
        error.columnName = columnName
        return error
    }

    /// The text, or a `.decoding` error when the cell is NULL.
    package func requireText<Value>(for type: Value.Type) throws(PostgresError) -> String {
        guard let text else { throw decodingError(type, bytes == nil ? "unexpected NULL" : "sent in binary format") }
        return text
    }
}

/// The binary forms of the column types a binary result may hold (``PostgresQuery/ResultFormat/binary``).
enum PostgresBinaryCell {
    /// The text form of a binary cell that decoders read as text: text types as they are, integers and `bool`
    /// written as PostgreSQL writes them. Nil for `bytea`, kept as bytes, and for any other type, whose decoders
    /// then refuse the cell ("sent in binary format").
    static func text(_ value: UnsafeRawBufferPointer, _ type: PostgresDataType) -> String? {
        func integer<Integer: FixedWidthInteger>(_: Integer.Type) -> String? {
            guard value.count == MemoryLayout<Integer>.size else { return nil }
            return String(Integer(bigEndian: value.loadUnaligned(as: Integer.self)))
        }
        switch type {
        case .text, .varchar, .bpchar, .name, .char, .unknown: return String(decoding: value, as: UTF8.self)
        case .int8: return integer(Int64.self)
        case .int4: return integer(Int32.self)
        case .int2: return integer(Int16.self)
        case .oid: return integer(UInt32.self)
        case .bool: return value.count == 1 ? (value[0] == 0 ? "f" : "t") : nil
        default: return nil
        }
    }
}
