import Foundation
import LiveDelivery
import LiveDeliveryAdmin
import Testing

/// `--format json` and `csv` of a table built by hand, for the cases a real report rarely has:
/// quotes, line breaks, NULL next to an empty string, other time zones, milliseconds near a boundary.
/// (AdminCommandTests in EndToEndServerTests parses real reports with JSONSerialization and SwiftCSV.)
@Suite struct ReportFormatsTests {
    let table = ReportTable(
        columns: [
            .init(name: "id", isNumeric: true, kind: .integer), .init(name: "note"),
            .init(name: "at", kind: .timestamp), .init(name: "ok", kind: .boolean),
            .init(name: "ms", isNumeric: true, kind: .number),
        ],
        rows: [
            ["1", #"say "hi", then"#, "2026-11-25 14:45:30.206+00", "t", "4.0"],
            ["2", "two\nlines", "2026-11-25 15:45:30.9996+01", "f", nil],
            ["3", "", nil, nil, "17.25"],
        ])

    @Test func csvQuotesOnlyWhatItMustAndKeepsNullApartFromEmpty() {
        #expect(
            table.csv() == """
                id,note,at,ok,ms\r
                1,"say ""hi"", then",2026-11-25T14:45:30.206Z,true,4.0\r
                2,"two
                lines",2026-11-25T14:45:31Z,false,\r
                3,"",,,17.25\r

                """)
    }

    @Test func jsonIsTypedAndInUTC() throws {
        let text = try table.formatted(.json)
        let rows = try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [[String: Any]])
        #expect(rows.count == 3)
        #expect((rows[0]["id"] as? NSNumber)?.int64Value == 1)
        #expect(rows[0]["note"] as? String == #"say "hi", then"#)
        #expect(rows[0]["at"] as? String == "2026-11-25T14:45:30.206Z")
        #expect((rows[0]["ok"] as? NSNumber)?.boolValue == true)
        #expect((rows[0]["ms"] as? NSNumber)?.doubleValue == 4)
        // 15:45:30.9996 at +01 is 14:45:31.000 UTC once rounded to milliseconds.
        #expect(rows[1]["at"] as? String == "2026-11-25T14:45:31Z")
        #expect(rows[1]["ms"] is NSNull)
        #expect(rows[2]["note"] as? String == "")
        #expect(rows[2]["at"] is NSNull && rows[2]["ok"] is NSNull)
    }

    @Test func theTableFormatIsTheRenderedTable() throws {
        #expect(try table.formatted(.table, maxCellWidth: 8) == table.render(maxCellWidth: 8))
    }
}
