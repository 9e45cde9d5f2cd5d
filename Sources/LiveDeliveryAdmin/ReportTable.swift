import LiveDelivery
package import Postgres

/// A query result as text, printed as an aligned table (`livedelivery report`, `dead-letters list`).
package struct ReportTable: Sendable, Hashable {
    package struct Column: Sendable, Hashable {
        package var name: String
        /// Numbers are right-aligned.
        package var isNumeric: Bool
        /// How `--format json` and `csv` type the cells (see ReportTable+Formats.swift).
        package var kind: Kind

        package init(name: String, isNumeric: Bool = false, kind: Kind? = nil) {
            self.name = name
            self.isNumeric = isNumeric
            self.kind = kind ?? (isNumeric ? .number : .text)
        }
    }

    /// The type of a column's values, as far as the machine-readable formats care.
    package enum Kind: Sendable, Hashable {
        /// `int2`, `int4`, `int8`, `oid`: a JSON integer.
        case integer
        /// `float4`, `float8`, `numeric`: a JSON number.
        case number
        /// `bool` (`t`/`f` in the table): JSON `true`/`false`.
        case boolean
        /// `timestamptz`, `timestamp`: an RFC 3339 string in UTC.
        case timestamp
        /// Everything else (text, enums, uuid, date, interval, json): a string as the table shows it.
        case text

        init(_ type: PostgresDataType) {
            switch type {
            case .int2, .int4, .int8, .oid: self = .integer
            case .float4, .float8, .numeric: self = .number
            case .bool: self = .boolean
            case .timestamptz, .timestamp: self = .timestamp
            default: self = .text
            }
        }
    }

    package var columns: [Column]
    /// Cells as text; nil is SQL NULL.
    package var rows: [[String?]]

    package init(columns: [Column], rows: [[String?]]) {
        self.columns = columns
        self.rows = rows
    }

    /// The rows of a result, leaving out `hidden` columns. Timestamps keep milliseconds.
    package init(_ result: PostgresRows, hiding hidden: [String] = []) {
        let kept = result.columns.enumerated().filter { !hidden.contains($0.element.name) }
        self.columns = kept.map {
            Column(
                name: $0.element.name, isNumeric: Self.numericTypes.contains($0.element.dataType),
                kind: Kind($0.element.dataType))
        }
        self.rows = result.map { row in
            kept.map { index, column in
                let text = row.cell(at: index).text
                return column.dataType == .timestamptz ? text.map(Self.shortenTimestamp) : text
            }
        }
    }

    static let numericTypes: Set<PostgresDataType> = [.int2, .int4, .int8, .float4, .float8, .numeric, .oid]

    /// `2026-11-21 10:04:05.123456+00` → `2026-11-21 10:04:05.123+00`.
    static func shortenTimestamp(_ text: String) -> String {
        guard let dot = text.firstIndex(of: ".") else { return text }
        let fraction = text[text.index(after: dot)...].prefix { $0.isNumber }
        guard fraction.count > 3 else { return text }
        return String(text[...dot]) + fraction.prefix(3) + text[fraction.endIndex...]
    }

    /// The values of one column (tests, scripts).
    package func values(_ column: String) -> [String?] {
        guard let index = columns.firstIndex(where: { $0.name == column }) else { return [] }
        return rows.map { $0[index] }
    }

    /// Aligned columns under a header and a rule; cells longer than `maxCellWidth` are cut with "…",
    /// line breaks become spaces, NULL prints as empty. A last line counts the rows.
    package func render(maxCellWidth: Int = 60) -> String {
        func clean(_ text: String?) -> String {
            guard var text else { return "" }
            text = TerminalText.printable(String(text.map { $0.isNewline || $0 == "\t" ? " " : $0 }))
            if maxCellWidth > 1 && text.count > maxCellWidth { text = String(text.prefix(maxCellWidth - 1)) + "…" }
            return text
        }
        let cells = rows.map { $0.map(clean) }
        var widths = columns.map(\.name.count)
        for row in cells {
            for (index, cell) in row.enumerated() where index < widths.count {
                widths[index] = max(widths[index], cell.count)
            }
        }
        func line(_ values: [String], numeric: [Bool]) -> String {
            var parts: [String] = []
            for (index, value) in values.enumerated() {
                let padding = String(repeating: " ", count: max(0, widths[index] - value.count))
                parts.append(numeric[index] ? padding + value : value + padding)
            }
            return String(parts.joined(separator: "  ").reversed().drop { $0 == " " }.reversed())
        }
        var lines: [String] = []
        lines.append(line(columns.map(\.name), numeric: columns.map(\.isNumeric)))
        lines.append(widths.map { String(repeating: "-", count: $0) }.joined(separator: "  "))
        for row in cells { lines.append(line(row, numeric: columns.map(\.isNumeric))) }
        lines.append("(\(rows.count) row\(rows.count == 1 ? "" : "s"))")
        return lines.joined(separator: "\n")
    }
}

extension ReportTable {
    /// The tables of several cells as one: a first column `cell`, then each cell's rows in turn (the cells'
    /// tables have the same columns: the same report on the same schema).
    package static func joining(_ tables: [(cell: String, result: ReportTable)]) -> ReportTable {
        let columns = [Column(name: "cell")] + (tables.first?.result.columns ?? [])
        return ReportTable(
            columns: columns, rows: tables.flatMap { cell, table in table.rows.map { [cell] + $0 } })
    }
}
