import Foundation
import LiveDelivery
import LiveDeliveryAdmin
import Testing

/// What a publisher wrote, as the CLI prints it: control characters and bidirectional overrides shown
/// as U+FFFD, formulas defused in CSV, a dead letter kept in part said to be so.
@Suite struct PublisherTextTests {
    @Test func controlCharactersAndOverridesAreShownAsReplacementCharacters() {
        #expect(TerminalText.printable("order.status") == "order.status")
        #expect(TerminalText.printable("a\u{1B}[2Jb") == "a\u{FFFD}[2Jb")
        #expect(TerminalText.printable("a\rb\nc\td\u{7F}\u{9B}") == "a\u{FFFD}b\u{FFFD}c\u{FFFD}d\u{FFFD}\u{FFFD}")
        #expect(TerminalText.printable("a\nb\tc\r", keepingLines: true) == "a\nb\tc\u{FFFD}")
        #expect(TerminalText.printable("evil\u{202E}txt.exe\u{2066}") == "evil\u{FFFD}txt.exe\u{FFFD}")
        // The other bidirectional controls (marks) and the line and paragraph separators, lines kept or not.
        for keepingLines in [false, true] {
            #expect(
                TerminalText.printable("a\u{200E}b\u{200F}c\u{061C}d\u{2028}e\u{2029}f", keepingLines: keepingLines)
                    == "a\u{FFFD}b\u{FFFD}c\u{FFFD}d\u{FFFD}e\u{FFFD}f")
        }
        #expect(TerminalText.printable("Zoë 🍕") == "Zoë 🍕")
    }

    @Test func textCellsThatLookLikeFormulasAreDefusedInCSV() {
        let table = ReportTable(
            columns: [.init(name: "routing_key"), .init(name: "delta", isNumeric: true, kind: .integer)],
            rows: [
                ["=HYPERLINK(\"http://x\")", "-5"], ["+1", "1"], ["-2+3", "2"], ["@SUM(A1)", "3"],
                ["\tx", "4"], ["order.status", "5"],
            ])
        #expect(
            table.csv() == """
                routing_key,delta\r
                "'=HYPERLINK(""http://x"")",-5\r
                '+1,1\r
                '-2+3,2\r
                '@SUM(A1),3\r
                '\tx,4\r
                order.status,5\r

                """)
        // The table form shows control characters as U+FFFD and keeps a cell on one line.
        let hostile = ReportTable(columns: [.init(name: "event_id")], rows: [["ok\u{1B}]0;pwned\u{07}"]])
        #expect(hostile.render().contains("ok\u{FFFD}]0;pwned\u{FFFD}"))
    }

    @Test func jsonAndCSVCarryNoRawControlCharactersOrOverrides() throws {
        let hostile = "k\u{1B}[31m\u{9B}2J\u{85}\u{7F}\u{202E}txt\u{2066}\u{2028}\u{200F}"
        let table = ReportTable(
            columns: [.init(name: "routing_key"), .init(name: "message")], rows: [[hostile, "a\nb\r"]])
        // JSON: each written as its escape, so the parsed document holds the texts unchanged.
        let json = try table.formatted(.json)
        #expect(json.unicodeScalars.allSatisfy { $0.isASCII }, "\(json.debugDescription)")
        #expect(json.contains("\\u009b") && json.contains("\\u202e") && json.contains("\\u2066"))
        #expect(json.contains("\\u2028") && json.contains("\\u200f"))
        let parsed = try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [[String: String]]
        #expect(parsed?.first?["routing_key"] == hostile && parsed?.first?["message"] == "a\nb\r")
        let object = try AdminJSON.object([.init("event_id", .string(hostile))]).serialized()
        #expect(object.unicodeScalars.allSatisfy { $0.isASCII })
        // CSV: shown as U+FFFD, as the table shows them; a line break (LF) inside a quoted cell stays,
        // a line separator does not.
        let expected =
            "routing_key,message\r\nk\u{FFFD}[31m\u{FFFD}2J\u{FFFD}\u{FFFD}\u{FFFD}txt\u{FFFD}\u{FFFD}\u{FFFD},\"a\nb\u{FFFD}\"\r\n"
        #expect(table.csv() == expected)
    }

    @Test func aDeadLetterKeptInPartSaysSoAndShowsWholeCharacters() {
        // "é" is two bytes: a prefix cut between them still shows the text before it.
        let letter = DeadLetter(
            id: 1, eventID: nil, routingKey: "order.status", reason: "body_too_large", field: nil, message: "m",
            body: Array("{\"a\":\"\u{1B}é".utf8.dropLast()), bodyLength: 100_000, receivedAt: .now, replayedAt: nil)
        #expect(!letter.isWhole)
        #expect(letter.displayBody == "(the first 8 of 100000 bytes) {\"a\":\"\u{FFFD}")
        let whole = DeadLetter(
            id: 2, eventID: nil, routingKey: "k", reason: "r", field: nil, message: "m", body: Array("{}".utf8),
            receivedAt: .now, replayedAt: nil)
        #expect(whole.isWhole && whole.displayBody == "{}")
    }
}
