import APNsSimulator
import ChildProcesses
import Foundation
import Postgres
import SwiftCSV
import TestSupport
import Testing
import WorkerHarness

/// The admin command line as scripts use it: every `--format` parsed back by a real parser (JSON by
/// JSONSerialization, CSV by SwiftCSV) and checked against the table a person sees, `status`, the
/// exit statuses, and `--version`. The data comes from a real worker: a scenario, a malformed
/// message (a dead letter) and an APNs payload fault (a failed push).
@Suite(.serialized, .timeLimit(.minutes(5)))
struct AdminCommandTests {
    @Test("report, dead-letters list and failed-pushes list print the same rows as table, JSON and CSV")
    func formatsAgreeWithTheTable() async throws {
        try await Fixture.with("admin-formats") { fixture in
            try await seed(fixture)
            let environment = fixture.environment(worker: "admin")

            for arguments in [
                ["report", "activities-by-state"], ["report", "push-outcomes-hourly"], ["report", "failed-pushes"],
                ["dead-letters", "list"], ["failed-pushes", "list"],
            ] {
                let table = try await AdminRun.livedelivery(arguments, environment: environment)
                #expect(table.status == 0, "\(arguments): \(table.stderr)")
                let rows = try TableText(table.stdout)
                #expect(!rows.rows.isEmpty, "\(arguments) has rows to compare:\n\(table.stdout)")

                let json = try await AdminRun.livedelivery(arguments + ["--format", "json"], environment: environment)
                #expect(json.status == 0, "\(arguments): \(json.stderr)")
                let objects = try #require(
                    try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [[String: Any]],
                    "\(arguments): JSON is an array of objects")
                #expect(objects.count == rows.rows.count, "\(arguments): JSON rows")

                let csvRun = try await AdminRun.livedelivery(arguments + ["--format", "csv"], environment: environment)
                #expect(csvRun.status == 0, "\(arguments): \(csvRun.stderr)")
                #expect(csvRun.stdout.contains("\r\n"), "CSV lines end in CRLF")
                let csv = try CSV<Named>(string: csvRun.stdout)
                #expect(csv.header == rows.columns, "\(arguments): CSV header")
                #expect(csv.rows.count == rows.rows.count, "\(arguments): CSV rows")

                for (index, row) in rows.rows.enumerated() where index < objects.count && index < csv.rows.count {
                    let object = objects[index]
                    #expect(Set(object.keys) == Set(rows.columns), "\(arguments): JSON keys are the columns")
                    for column in rows.columns {
                        let shown = try #require(row[column])
                        let fromJSON = try #require(object[column])
                        let fromCSV = try #require(csv.rows[index][column])
                        // Cut table cells (…) cannot be compared; every other cell must agree.
                        guard !shown.hasSuffix("…") else { continue }
                        #expect(
                            TableText.same(shown, json: fromJSON),
                            "\(arguments) row \(index) \(column): \(shown) vs \(fromJSON)")
                        #expect(
                            TableText.same(shown, csv: fromCSV),
                            "\(arguments) row \(index) \(column): \(shown) vs \(fromCSV)")
                    }
                }
            }

            // Typed values: ids and counts are JSON numbers, NULL is null, timestamps RFC 3339 in UTC.
            let letters = try await AdminRun.livedelivery(
                ["dead-letters", "list", "--format", "json"], environment: environment)
            let letter = try #require(
                (try JSONSerialization.jsonObject(with: Data(letters.stdout.utf8)) as? [[String: Any]])?.first)
            #expect(letter["id"] is NSNumber && !(letter["id"] is String))
            #expect(letter["body_bytes"] is NSNumber)
            #expect(letter["replayed_at"] is NSNull)
            let received = try #require(letter["received_at"] as? String)
            #expect(received.hasSuffix("Z") && received.contains("T"), "\(received)")
            #expect(letter["reason"] as? String == "malformed_json")

            // show --format json: one object, the body only as the text form shows it.
            let id = try #require((letter["id"] as? NSNumber)?.int64Value)
            let show = try await AdminRun.livedelivery(
                ["dead-letters", "show", String(id), "--format", "json"], environment: environment)
            #expect(show.status == 0, "\(show.stderr)")
            let shown = try #require(try JSONSerialization.jsonObject(with: Data(show.stdout.utf8)) as? [String: Any])
            #expect((shown["id"] as? NSNumber)?.int64Value == id)
            #expect(shown["body"] as? String == "{not json")

            let failed = try await AdminRun.livedelivery(
                ["failed-pushes", "list", "--format", "json"], environment: environment)
            let push = try #require(
                (try JSONSerialization.jsonObject(with: Data(failed.stdout.utf8)) as? [[String: Any]])?.first)
            #expect((push["status"] as? NSNumber)?.intValue == 413)
            let pushID = try #require((push["id"] as? NSNumber)?.int64Value)
            let pushShow = try await AdminRun.livedelivery(
                ["failed-pushes", "show", String(pushID), "--format", "json"], environment: environment)
            let pushObject = try #require(
                try JSONSerialization.jsonObject(with: Data(pushShow.stdout.utf8)) as? [String: Any],
                "\(pushShow.stderr)")
            #expect((pushObject["id"] as? NSNumber)?.int64Value == pushID)
            #expect(((pushObject["attempts"] as? [[String: Any]])?.count ?? 0) >= 1)

            // status: a migrated database, the worker consuming, the worker that sent pushes.
            let status = try await AdminRun.livedelivery(["status", "--format", "json"], environment: environment)
            #expect(status.status == 0, "\(status.stderr)")
            let object = try #require(
                try JSONSerialization.jsonObject(with: Data(status.stdout.utf8)) as? [String: Any])
            let version = try #require((object["schema_version"] as? NSNumber)?.intValue)
            #expect(version > 0 && version == (object["required_schema_version"] as? NSNumber)?.intValue)
            let events = try #require(object["events_queue"] as? [String: Any], "\(status.stdout)")
            #expect(events["name"] as? String == fixture.queue)
            #expect(events["messages"] is NSNumber)
            #expect(((events["consumers"] as? NSNumber)?.intValue ?? 0) >= 1)
            let deadLetterQueue = try #require(object["dead_letter_queue"] as? [String: Any])
            #expect(deadLetterQueue["name"] as? String == "\(fixture.queue).dead-letter")
            #expect(object["pending_pushes"] is [Any])
            #expect(object["paused_apps"] is [Any])
            let workers = try #require(object["recent_workers"] as? [[String: Any]])
            #expect(workers.contains { $0["worker_id"] as? String == "\(fixture.name)-w1" }, "\(workers)")
            let tableStatus = try await AdminRun.livedelivery(["status"], environment: environment)
            #expect(
                tableStatus.status == 0
                    && tableStatus.stdout.contains("version \(version), this release needs \(version)"))

            // replay --all off a terminal: no progress line, one summary line.
            let replay = try await AdminRun.livedelivery(["dead-letters", "replay", "--all"], environment: environment)
            #expect(replay.status == 0, "\(replay.stderr)")
            #expect(replay.stdout == "dead-letters replay: 1 replayed\n", "\(replay.stdout)")
            #expect(!replay.stderr.contains("\r"))
        }
    }

    @Test("exit statuses: 3 for an unreachable server (publish too; status still prints the database part), 2, 64")
    func exitStatuses() async throws {
        try await Fixture.with("admin-exit") { fixture in
            var environment = fixture.environment(worker: "admin")
            // Nothing listens on port 1.
            environment["LIVEDELIVERY_AMQP_URL"] = "amqp://guest:guest@127.0.0.1:1/%2F"
            let status = try await AdminRun.livedelivery(["status", "--format", "json"], environment: environment)
            #expect(status.status == 3, "\(status.stdout)\(status.stderr)")
            let object = try #require(
                try JSONSerialization.jsonObject(with: Data(status.stdout.utf8)) as? [String: Any])
            #expect((object["schema_version"] as? NSNumber)?.intValue ?? 0 > 0)
            #expect(object["events_queue"] is NSNull)
            #expect((object["broker_error"] as? String)?.contains("unreachable") == true)
            #expect(!status.stdout.contains("guest"), "no secrets in the output")
            let examples = TestEnvironment.projectRoot.appendingPathComponent("examples/delivery-A-10023.jsonl").path
            let publish = try await AdminRun.livedelivery(["publish", examples], environment: environment)
            #expect(publish.status == 3, "\(publish.stdout)\(publish.stderr)")
            #expect(publish.stderr.contains("cannot connect"), "\(publish.stderr)")
            #expect(!publish.stderr.contains("guest:guest"), "no secrets: \(publish.stderr)")

            environment["LIVEDELIVERY_POSTGRES_URL"] =
                "postgresql://nobody:secret@127.0.0.1:1/nothing?connect_timeout=2"
            for arguments in [
                ["status"], ["report", "activities-by-state", "--format", "json"], ["dead-letters", "list"],
            ] {
                let run = try await AdminRun.livedelivery(arguments, environment: environment)
                #expect(run.status == 3, "\(arguments): \(run.stdout)\(run.stderr)")
                #expect(run.stdout.isEmpty, "\(arguments): nothing on stdout: \(run.stdout)")
                #expect(!run.stderr.contains("secret"), "\(arguments): no secrets: \(run.stderr)")
            }

            var unconfigured = environment
            unconfigured["LIVEDELIVERY_POSTGRES_URL"] = ""
            let missing = try await AdminRun.livedelivery(["failed-pushes", "list"], environment: unconfigured)
            #expect(missing.status == 2, "\(missing.stderr)")
            #expect(missing.stderr.contains("postgres.url is required"), "\(missing.stderr)")

            let usage = try await AdminRun.livedelivery(["report", "no-such-report"], environment: environment)
            #expect(usage.status == 64, "\(usage.stderr)")
            let filter = try await AdminRun.livedelivery(
                ["report", "activities-by-state", "--order", "A-1"], environment: environment)
            #expect(filter.status == 64, "\(filter.stderr)")
            let format = try await AdminRun.livedelivery(
                ["dead-letters", "list", "--format", "xml"], environment: environment)
            #expect(format.status == 64, "\(format.stderr)")
        }
    }

    @Test(
        "ESC, C1, bidirectional controls and line separators from publishers reach no output raw: every format of every admin command"
    )
    func publishersControlCharactersAreDefusedInEveryFormat() async throws {
        try await Fixture.with("admin-hostile") { fixture in
            // A real worker stores an order whose order id, event ids and device id carry the hostile text,
            // and gives up one push to it (APNs 413): rows in orders, activities, the timeline, push
            // attempts and the failed pushes. The dead letter is a row as the worker writes one, inserted
            // here with every text hostile.
            let worker = try await fixture.startWorker("w1")
            fixture.simulator.injectFault(FaultRule(status: 413, reason: "PayloadTooLarge", count: 1))
            let scenario = Scenario.deliveries(orders: 1, prefix: "O" + Hostile.text)
            let orderID = try #require(scenario.orders.first?.orderID)
            try await fixture.publish(scenario.events)
            try await fixture.waitUntilSettled(eventIDs: Set(scenario.events.map(\.eventID)))
            try await eventually("the failed push", timeout: .seconds(120)) {
                try await fixture.count("SELECT count(*) FROM report_failed_pushes") >= 1
            }
            try await fixture.database.query(
                """
                INSERT INTO dead_letters (event_id, routing_key, reason, field, message, body, body_sha256)
                VALUES (\("E" + Hostile.text), \("R" + Hostile.text), 'invalid_field', \("F" + Hostile.text),
                        \("M" + Hostile.text), \(Array("{\"order_id\":\"B\(Hostile.text)\"}".utf8)), '\\x01'::bytea)
                """)
            let letterID = try #require(
                try await fixture.strings("SELECT id::text FROM dead_letters").first.flatMap { Int64($0) })
            let pushID = try #require(
                try await fixture.strings("SELECT id::text FROM report_failed_pushes").first.flatMap { Int64($0) })
            let environment = fixture.environment(worker: "admin")

            // Every command and format; each output (stdout and stderr) must hold none of them raw. (A failure
            // names them by code point: the test's own output carries none either.)
            func run(_ arguments: [String]) async throws -> AdminRun {
                let run = try await AdminRun.livedelivery(arguments, environment: environment)
                let label = Hostile.visible(arguments.joined(separator: " "))
                #expect(run.status == 0, "\(label): \(Hostile.visible(run.stderr))")
                Hostile.expectNoneRaw(run.stdout, "\(label): stdout")
                Hostile.expectNoneRaw(run.stderr, "\(label): stderr")
                return run
            }
            let catalogue = try await run(["report", "--format", "json"])
            let reports = try #require(
                try JSONSerialization.jsonObject(with: Data(catalogue.stdout.utf8)) as? [[String: Any]]
            ).compactMap { $0["name"] as? String }
            #expect(reports.contains("order-timeline") && reports.contains("dead-letters"), "\(reports)")
            var tables: [[String]: [String: AdminRun]] = [:]
            for arguments in reports.map({ ["report", $0] }) + [
                ["report", "order-timeline", "--order", orderID], ["dead-letters", "list"],
                ["failed-pushes", "list"],
            ] {
                for format in ["table", "json", "csv"] {
                    tables[arguments, default: [:]][format] = try await run(arguments + ["--format", format])
                }
            }
            let letterText = try await run(["dead-letters", "show", String(letterID)])
            let letterJSON = try await run(["dead-letters", "show", String(letterID), "--format", "json"])
            let pushText = try await run(["failed-pushes", "show", String(pushID)])
            let pushJSON = try await run(["failed-pushes", "show", String(pushID), "--format", "json"])
            let retry = try await run(["failed-pushes", "retry", String(pushID)])
            _ = try await run(["status"])
            _ = try await run(["status", "--format", "json"])

            // The defused forms are there: U+FFFD in text, tables and CSV; the escapes in JSON, which
            // parses back to the text as published.
            let shown = Hostile.shown
            for arguments in [["dead-letters", "list"], ["report", "dead-letters"]] {
                let runs = try #require(tables[arguments])
                let label = arguments.joined(separator: " ")
                for column in ["R", "E", "F", "M"] {
                    #expect(runs["table"]?.stdout.contains(column + Hostile.inTable) == true, "\(label) table")
                    #expect(runs["csv"]?.stdout.contains(column + shown) == true, "\(label) csv")
                    #expect(
                        runs["json"]?.stdout.lowercased().contains(column.lowercased() + Hostile.inJSON) == true,
                        "\(label) json")
                }
                let rows = try JSONSerialization.jsonObject(with: Data((runs["json"]?.stdout ?? "").utf8))
                let parsed = (rows as? [[String: Any]])?.first?["routing_key"] as? String == "R" + Hostile.text
                #expect(parsed, "\(label) json parses back to the routing key as stored")
            }
            for arguments in [
                ["failed-pushes", "list"], ["report", "failed-pushes"],
                ["report", "order-timeline", "--order", orderID],
            ] {
                let runs = try #require(tables[arguments])
                let label = Hostile.visible(arguments.joined(separator: " "))
                #expect(runs["table"]?.stdout.contains("O" + Hostile.inTable) == true, "\(label) table")
                #expect(runs["csv"]?.stdout.contains("O" + shown) == true, "\(label) csv")
                let rows = try JSONSerialization.jsonObject(with: Data((runs["json"]?.stdout ?? "").utf8))
                let parsed = (rows as? [[String: Any]])?.first?["order_id"] as? String == orderID
                #expect(parsed, "\(label) json parses back to the order id as stored")
            }
            for line in [
                "reason:      invalid_field (field F\(shown))", "message:     M\(shown)", "routing key: R\(shown)",
            ]
                + ["event id:    E\(shown)", "\"order_id\":\"B\(shown)\""]
            {
                let found = letterText.stdout.contains(line)
                #expect(found, "dead-letters show: \(line)")
            }
            let letter = try JSONSerialization.jsonObject(with: Data(letterJSON.stdout.utf8)) as? [String: Any]
            let parsed =
                letter?["field"] as? String == "F" + Hostile.text
                && letter?["event_id"] as? String == "E" + Hostile.text
            #expect(parsed, "dead-letters show --format json parses back to the texts as stored")
            let escaped = letterJSON.stdout.lowercased().contains("f" + Hostile.inJSON)
            #expect(escaped, "dead-letters show --format json")
            let pushShown = pushText.stdout.contains("O" + shown)
            #expect(pushShown, "failed-pushes show")
            let pushEscaped = pushJSON.stdout.lowercased().contains("o" + Hostile.inJSON)
            #expect(pushEscaped, "failed-pushes show --format json")
            let retryShown = retry.stdout.contains("order O\(shown)-0 ")
            #expect(retryShown, "failed-pushes retry: \(Hostile.visible(retry.stdout))")

            // The worker's own log (logfmt on stderr) names the order too: escaped, never raw.
            Hostile.expectNoneRaw(worker.process.output, "the worker's log")
        }
    }

    @Test func versionIsPrinted() async throws {
        let run = try await AdminRun.livedelivery(["--version"], environment: ["LIVEDELIVERY_REVISION": "abc123"])
        #expect(run.status == 0)
        let version = run.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(version.hasSuffix(" (revision abc123)"), "\(version)")
        #expect(version.split(separator: " ").first?.split(separator: ".").count == 3, "\(version)")
        let plain = try await AdminRun.livedelivery(["--version"], environment: ["LIVEDELIVERY_REVISION": ""])
        #expect(
            plain.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
                == version.split(separator: " ").first.map(String.init))
    }

    /// A settled scenario, one failed push (APNs 413 PayloadTooLarge, a payload fault) and one dead
    /// letter (a body that is not JSON).
    private func seed(_ fixture: Fixture) async throws {
        try await fixture.startWorker("w1")
        fixture.simulator.injectFault(FaultRule(status: 413, reason: "PayloadTooLarge", count: 1))
        let scenario = Scenario.deliveries(orders: 3, prefix: fixture.name)
        try await fixture.publish(scenario.events)
        try await fixture.publish([("order.status", Array("{not json".utf8), "m-json")])
        try await fixture.waitUntilSettled(eventIDs: Set(scenario.events.map(\.eventID)))
        // Every activity ended, so that the rows stay as they are between the runs a test compares.
        try await fixture.waitUntilAllEnded(scenario)
        try await eventually("every activity ended in the database", timeout: .seconds(120)) {
            let open = try await fixture.count("SELECT count(*) FROM activities WHERE state <> 'ended'")
            let pending = try await fixture.count("SELECT count(*) FROM pushes_waiting")
            return open == 0 && pending == 0
        }
        try await eventually("the dead letter and the failed push", timeout: .seconds(120)) {
            let deadLetters = try await fixture.count("SELECT count(*) FROM dead_letters")
            let failedPushes = try await fixture.count("SELECT count(*) FROM report_failed_pushes")
            return deadLetters == 1 && failedPushes >= 1
        }
    }
}

/// What a hostile publisher writes into order ids, event ids, routing keys and messages: ESC (a colour
/// sequence), C1 (CSI), a bidirectional override, an isolate, marks and the line and paragraph separators.
enum Hostile {
    static let text = "\u{1B}[31mR\u{9B}2J\u{202E}L\u{2066}\u{200E}\u{200F}\u{61C}M\u{2028}N\u{2029}"
    /// As text, CSV and `show` print it: each one U+FFFD.
    static let shown = "\u{FFFD}[31mR\u{FFFD}2J\u{FFFD}L\u{FFFD}\u{FFFD}\u{FFFD}\u{FFFD}M\u{FFFD}N\u{FFFD}"
    /// As the aligned table prints it: a line or paragraph separator is a line break, shown as a space.
    static let inTable = "\u{FFFD}[31mR\u{FFFD}2J\u{FFFD}L\u{FFFD}\u{FFFD}\u{FFFD}\u{FFFD}M N"
    /// As JSON writes it (lower-cased): every one an escape.
    static let inJSON = "\\u001b[31mr\\u009b2j\\u202el\\u2066\\u200e\\u200f\\u061cm\\u2028n\\u2029"

    /// Whether a terminal would act on `scalar`: C0 but LF, CR and tab; DEL and C1; the bidirectional
    /// controls; U+2028 and U+2029.
    static func isRaw(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x0A, 0x0D, 0x09: false
        case 0x00...0x1F, 0x7F...0x9F: true
        case 0x061C, 0x200E, 0x200F, 0x202A...0x202E, 0x2066...0x2069, 0x2028, 0x2029: true
        default: false
        }
    }

    /// `text` with each of them as `<U+XXXX>`: for failure messages, which must not carry them either.
    static func visible(_ text: String) -> String {
        var result = ""
        for scalar in text.unicodeScalars {
            if isRaw(scalar) {
                result += "<U+" + String(scalar.value, radix: 16, uppercase: true) + ">"
            } else {
                result.unicodeScalars.append(scalar)
            }
        }
        return result
    }

    /// Expects none of them in `output`; a failure names those found by code point.
    static func expectNoneRaw(_ output: String, _ what: String, sourceLocation: SourceLocation = #_sourceLocation) {
        let raw = Set(output.unicodeScalars.filter(isRaw).map { "U+" + String($0.value, radix: 16, uppercase: true) })
        #expect(raw.isEmpty, "\(what) carries \(raw.sorted()) raw", sourceLocation: sourceLocation)
    }
}

/// One run of the built `livedelivery`, with stdout and stderr apart (JSON and CSV must be the whole
/// of stdout). The test process's own LIVEDELIVERY_ variables are removed, as for the workers.
struct AdminRun {
    var status: Int32
    var stdout: String
    var stderr: String

    static func livedelivery(_ arguments: [String], environment: [String: String]) async throws -> AdminRun {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("admin-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let out = directory.appendingPathComponent("stdout")
        let err = directory.appendingPathComponent("stderr")
        try Data().write(to: out)
        try Data().write(to: err)
        var merged = ProcessInfo.processInfo.environment
        for key in merged.keys where key.hasPrefix("LIVEDELIVERY_") && key != "LIVEDELIVERY_BIN" { merged[key] = nil }
        merged.merge(environment) { $1 }

        let process = Process()
        process.executableURL = URL(fileURLWithPath: try LiveDeliveryBinary.path())
        process.arguments = arguments
        process.environment = merged
        process.standardInput = FileHandle.nullDevice
        let outHandle = try FileHandle(forWritingTo: out)
        let errHandle = try FileHandle(forWritingTo: err)
        process.standardOutput = outHandle
        process.standardError = errHandle
        try process.run()
        try await eventually("livedelivery \(arguments.joined(separator: " ")) to exit", timeout: .seconds(300)) {
            !process.isRunning
        }
        try outHandle.close()
        try errHandle.close()
        return AdminRun(
            status: process.terminationStatus,
            stdout: try String(contentsOf: out, encoding: .utf8),
            stderr: try String(contentsOf: err, encoding: .utf8))
    }
}

/// The aligned table as a person sees it, read back by the rule line's dash runs (a cell may hold
/// spaces; numbers are right-aligned inside their run).
struct TableText {
    var columns: [String]
    var rows: [[String: String]]

    init(_ text: String) throws {
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false).map { Array($0) }
        guard lines.count >= 3 else { throw HarnessError("not a table:\n\(text)") }
        var ranges: [Range<Int>] = []
        var start: Int?
        for (index, character) in (lines[1] + [" "]).enumerated() {
            if character == "-", start == nil { start = index }
            if character != "-", let begin = start {
                ranges.append(begin..<index)
                start = nil
            }
        }
        func cells(_ line: [Character]) -> [String] {
            ranges.map { range in
                let lower = min(range.lowerBound, line.count)
                let upper = min(range.upperBound, line.count)
                return String(line[lower..<upper]).trimmingCharacters(in: .whitespaces)
            }
        }
        let body = lines[2...].prefix { !$0.starts(with: "(") }
        let header = cells(lines[0])
        let parsed = body.map { Dictionary(uniqueKeysWithValues: zip(header, cells($0))) }
        guard let footer = lines.first(where: { $0.starts(with: "(") && $0.last == ")" }),
            String(footer).hasPrefix("(\(parsed.count) row")
        else { throw HarnessError("no row count matching \(parsed.count) rows:\n\(text)") }
        columns = header
        rows = parsed
    }

    /// A table cell and a JSON value say the same: NULL is empty, `t`/`f` are booleans, timestamps
    /// are the same instant, numbers the same number.
    static func same(_ shown: String, json: Any) -> Bool {
        switch json {
        case is NSNull: return shown.isEmpty
        case let text as String:
            if let left = timestamp(shown), let right = timestamp(text) {
                return abs(left.timeIntervalSince(right)) < 0.0005
            }
            return text.replacingOccurrences(of: "\n", with: " ").replacingOccurrences(of: "\t", with: " ") == shown
        case let number as NSNumber:
            // JSONSerialization gives booleans as NSNumber too; the table shows them as t/f.
            if shown == "t" || shown == "f" { return number.boolValue == (shown == "t") }
            return Double(shown).map { abs($0 - number.doubleValue) < 1e-9 * max(1, abs($0)) } ?? false
        default: return false
        }
    }

    /// A table cell and a CSV field say the same (CSV timestamps are RFC 3339, booleans true/false).
    static func same(_ shown: String, csv: String) -> Bool {
        if let left = timestamp(shown), let right = timestamp(csv) {
            return abs(left.timeIntervalSince(right)) < 0.0005
        }
        if csv == "true" || csv == "false" { return shown == (csv == "true" ? "t" : "f") }
        return csv.replacingOccurrences(of: "\n", with: " ").replacingOccurrences(of: "\t", with: " ") == shown
    }

    /// `2026-11-21 10:04:05.123+00` (the table) or `2026-11-21T10:04:05.123Z` (JSON, CSV).
    static func timestamp(_ text: String) -> Date? {
        guard text.count >= 20, text.dropFirst(4).first == "-",
            text.dropFirst(10).first == " " || text.dropFirst(10).first == "T"
        else { return nil }
        var iso = text.replacingOccurrences(of: " ", with: "T")
        if iso.hasSuffix("+00") { iso = String(iso.dropLast(3)) + "Z" }
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        if let date = formatter.date(from: iso) { return date }
        formatter.formatOptions = [.withInternetDateTime]
        return formatter.date(from: iso)
    }
}
