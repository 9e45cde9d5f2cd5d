package import Foundation
import LiveDelivery
import LiveDeliveryCore
import LiveDeliveryTime
import Postgres

/// How the admin commands print a result: `--format table|json|csv`.
package enum ReportFormat: String, CaseIterable, Sendable {
    /// The aligned table for people (``ReportTable/render(maxCellWidth:)``), unchanged.
    case table
    /// One JSON document: an array with one object per row, keyed by column name.
    case json
    /// RFC 4180: a header row, then one record per row.
    case csv
}

/// A JSON value for the admin commands' `--format json`, written with `JSONEncoder`. Objects are a
/// list of members (built in column order); the encoder writes their keys sorted, because
/// Foundation's encoder does not keep insertion order and sorted keys at least make the output
/// stable from run to run.
package enum AdminJSON: Sendable, Hashable, Encodable {
    case null
    case bool(Bool)
    case integer(Int64)
    case number(Double)
    case string(String)
    case array([AdminJSON])
    case object([Member])

    package struct Member: Sendable, Hashable {
        package var key: String
        package var value: AdminJSON
        package init(_ key: String, _ value: AdminJSON) {
            self.key = key
            self.value = value
        }
    }

    private struct Key: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    package func encode(to encoder: any Encoder) throws {
        switch self {
        case .null:
            var container = encoder.singleValueContainer()
            try container.encodeNil()
        case .bool(let value):
            var container = encoder.singleValueContainer()
            try container.encode(value)
        case .integer(let value):
            var container = encoder.singleValueContainer()
            try container.encode(value)
        case .number(let value):
            var container = encoder.singleValueContainer()
            // JSON has no NaN or infinity; PostgreSQL's numeric and float types do.
            if value.isFinite { try container.encode(value) } else { try container.encode(String(value)) }
        case .string(let value):
            var container = encoder.singleValueContainer()
            try container.encode(value)
        case .array(let values):
            var container = encoder.unkeyedContainer()
            for value in values { try container.encode(value) }
        case .object(let members):
            var container = encoder.container(keyedBy: Key.self)
            for member in members { try container.encode(member.value, forKey: Key(stringValue: member.key)) }
        }
    }

    /// The document as pretty-printed UTF-8 text with sorted keys (no final newline); control
    /// characters and bidirectional overrides in strings written as `\uXXXX` escapes
    /// (``TerminalText/escapedJSON(_:)``): the texts come from publishers, and a terminal shows this.
    package func serialized() throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        return TerminalText.escapedJSON(String(decoding: try encoder.encode(self), as: UTF8.self))
    }
}

extension ReportTable {
    /// The table in `format`; `maxCellWidth` cuts cells of the table format only (JSON and CSV
    /// carry whole cells: the views already leave out bodies, payloads and full device tokens).
    package func formatted(_ format: ReportFormat, maxCellWidth: Int = 60) throws -> String {
        switch format {
        case .table: render(maxCellWidth: maxCellWidth)
        case .json: try json.serialized()
        case .csv: csv()
        }
    }

    /// An array with one object per row.
    package var json: AdminJSON {
        .array(rows.indices.map(jsonObject(row:)))
    }

    /// One row as an object keyed by column name.
    package func jsonObject(row: Int) -> AdminJSON { .object(jsonMembers(row: row)) }

    /// The members of ``jsonObject(row:)``, for a caller that adds its own.
    package func jsonMembers(row: Int) -> [AdminJSON.Member] {
        columns.indices.map { AdminJSON.Member(columns[$0].name, value(row: row, column: $0)) }
    }

    /// A cell typed by its column: integers and numbers as numbers, booleans, timestamps as RFC 3339
    /// in UTC (with milliseconds when they have any), NULL as null, anything else as the table's text.
    package func value(row: Int, column: Int) -> AdminJSON {
        guard let text = rows[row][column] else { return .null }
        switch columns[column].kind {
        case .integer:
            if let value = Int64(text) { return .integer(value) }
            return Double(text).map(AdminJSON.number) ?? .string(text)
        case .number:
            return Double(text).map(AdminJSON.number) ?? .string(text)
        case .boolean:
            return text == "t" || text == "true"
                ? .bool(true) : text == "f" || text == "false" ? .bool(false) : .string(text)
        case .timestamp:
            return Self.rfc3339(text).map(AdminJSON.string) ?? .string(text)
        case .text:
            return .string(text)
        }
    }

    /// `2026-11-21 10:04:05.123+01` (any session time zone) → `2026-11-21T09:04:05.123Z`; nil for
    /// text that is not a timestamp (`infinity`).
    static func rfc3339(_ text: String) -> String? {
        let cell = PostgresCell(columnName: "", columnIndex: 0, dataType: .timestamptz, text: text)
        guard let date = try? Date.decode(from: cell) else { return nil }
        return rfc3339(date)
    }

    /// An instant as RFC 3339 in UTC, with milliseconds when it has any (the JSON and CSV formats).
    package static func rfc3339(_ date: Date) -> String {
        // Milliseconds rounded to nearest, not down as RFC3339.format does: the seconds are a
        // Double, and `.206` read back as `.20599…` must print as the table's `.206`.
        let seconds = date.timeIntervalSince1970
        var whole = seconds.rounded(.down)
        var milliseconds = Int(((seconds - whole) * 1000).rounded())
        if milliseconds == 1000 {
            whole += 1
            milliseconds = 0
        }
        let base = RFC3339.format(Date(timeIntervalSince1970: whole))
        guard milliseconds > 0, base.hasSuffix("Z") else { return base }
        let fraction = String(milliseconds)
        return base.dropLast() + "." + String(repeating: "0", count: 3 - fraction.count) + fraction + "Z"
    }

    /// RFC 4180 text: a header row of the column names, then one record per row, each line ending in
    /// CRLF (as the RFC says; spreadsheet programs and CSV libraries read it). A field with a comma, a
    /// double quote, CR or LF is quoted, its quotes doubled. NULL is an empty field; an empty string
    /// is `""`, so the two stay apart. Cells are typed as in ``value(row:column:)`` (timestamps in
    /// RFC 3339, booleans `true`/`false`) and numbers keep PostgreSQL's digits. A text cell that starts
    /// like a formula is defused (``TerminalText/defusedCell(_:)``), and control characters (but LF and
    /// tab) and bidirectional overrides are shown as U+FFFD (``TerminalText/printable(_:keepingLines:)``):
    /// the texts come from publishers.
    package func csv() -> String {
        var text = columns.map { Self.csvField($0.name) }.joined(separator: ",") + "\r\n"
        for row in rows.indices {
            let fields = columns.indices.map { column -> String in
                guard let cell = rows[row][column] else { return "" }
                switch value(row: row, column: column) {
                case .bool(let value): return value ? "true" : "false"
                case .string(let value):
                    return value.isEmpty
                        ? "\"\""
                        : Self.csvField(TerminalText.defusedCell(TerminalText.printable(value, keepingLines: true)))
                default: return Self.csvField(TerminalText.printable(cell, keepingLines: true))
                }
            }
            text += fields.joined(separator: ",") + "\r\n"
        }
        return text
    }

    static func csvField(_ text: String) -> String {
        guard text.contains(where: { $0 == "," || $0 == "\"" || $0 == "\r" || $0 == "\n" || $0 == "\r\n" }) else {
            return text
        }
        return "\"" + text.replacingOccurrences(of: "\"", with: "\"\"") + "\""
    }
}
