import APNsSimulator
import Foundation
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
            let pending = try await fixture.count("SELECT count(*) FROM outbox")
            return open == 0 && pending == 0
        }
        try await eventually("the dead letter and the failed push", timeout: .seconds(120)) {
            let deadLetters = try await fixture.count("SELECT count(*) FROM dead_letters")
            let failedPushes = try await fixture.count("SELECT count(*) FROM report_failed_pushes")
            return deadLetters == 1 && failedPushes >= 1
        }
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
        try await eventually("livedelivery \(arguments.joined(separator: " ")) to exit", timeout: .seconds(60)) {
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
