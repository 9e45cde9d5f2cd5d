import ArgumentParser
import Foundation
import LiveDelivery
import LiveDeliveryAdmin
import LiveDeliveryCore
import LiveDeliveryTime

/// `livedelivery dead-letters list|show|replay|purge`.
struct DeadLettersCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "dead-letters",
        abstract: "Lists, shows, replays and purges dead-lettered messages.",
        subcommands: [List.self, Show.self, Replay.self, Purge.self])

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Lists dead letters not replayed yet, newest first.")

        @OptionGroup var options: AdminOptions
        @Option(name: .long, help: "Only this reason (e.g. invalid_json, delivery_limit).") var reason: String?
        @Option(name: .long, help: "At most N rows; 0 = all.") var limit: Int = 100
        @Flag(name: .long, help: "Include rows already replayed.") var replayed = false
        @Option(name: .long, help: "Output format: table, json or csv (see `livedelivery report --help`).")
        var format: TableFormatOption = .table

        func validate() throws {
            guard limit >= 0 else { throw ValidationError("--limit must be 0 or more") }
        }

        func run() async throws {
            let table = try await withAdminContext(options) { context in
                try await context.withPostgres { client in
                    try await DeadLetterStore(client: client).list(
                        reason: reason, limit: limit == 0 ? nil : limit, includeReplayed: replayed)
                }
            }
            try printTable(table, format: format)
        }
    }

    struct Show: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Shows one dead letter with its body (device tokens cut to 8 hex digits unless --raw).")

        @OptionGroup var options: AdminOptions
        @Argument(help: "The dead letter's id.") var id: Int64
        @Flag(name: .long, help: "Write the exact body bytes to stdout, nothing else.") var raw = false
        @Option(
            name: .long,
            help: "Output format: text, or json (one object; the body as text shows it, tokens cut).")
        var format: RecordFormatOption = .text

        func validate() throws {
            if raw && format == .json { throw ValidationError("--raw writes the body only; leave out --format") }
        }

        func run() async throws {
            let letter = try await withAdminContext(options) { context in
                try await context.withPostgres { client in
                    try await DeadLetterStore(client: client).get(id)
                }
            }
            guard let letter else { throw adminFailure(NotFound(what: "dead letter \(id)")) }
            if raw {
                FileHandle.standardOutput.write(Data(letter.body))
                return
            }
            if format == .json {
                print(try letter.json.serialized())
                return
            }
            print("id:          \(letter.id)")
            print("received:    \(RFC3339.format(letter.receivedAt, fractional: true))")
            // What a publisher wrote is shown with its control characters as U+FFFD.
            print(
                "reason:      \(TerminalText.printable(letter.reason))"
                    + (letter.field.map { " (field \(TerminalText.printable($0)))" } ?? ""))
            print("message:     \(TerminalText.printable(letter.message))")
            print("routing key: \(TerminalText.printable(letter.routingKey))")
            print("event id:    \(TerminalText.printable(letter.eventID ?? ""))")
            print("replayed:    \(letter.replayedAt.map { RFC3339.format($0, fractional: true) } ?? "no")")
            print("body (\(letter.bodyLength) bytes):")
            print(letter.displayBody)
        }
    }

    struct Replay: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Republishes dead letters to the events exchange (confirmed) and marks them replayed.",
            discussion: """
                The original body and routing key are published with message_id = event_id. The worker's \
                inbox applies each event once, so replaying twice is harmless. Fix the cause first: a \
                message the worker still refuses is dead-lettered again.
                """)

        @OptionGroup var options: AdminOptions
        @Argument(help: "Dead letter ids.") var ids: [Int64] = []
        @Flag(name: .long, help: "Every dead letter not replayed yet (optionally of --reason).") var all = false
        @Option(name: .long, help: "With --all: only this reason.") var reason: String?

        func validate() throws {
            guard all != !ids.isEmpty else { throw ValidationError("give dead letter ids or --all, not both") }
            if reason != nil && !all { throw ValidationError("--reason goes with --all") }
        }

        func run() async throws {
            // With --all there may be thousands: a progress line on a terminal, one summary line
            // otherwise (no line per dead letter, which a script would have to skip).
            let progress = all ? ProgressLine(label: "dead-letters replay") : nil
            let results = try await withAdminContext(options) { context in
                try await context.withPostgres { client in
                    let store = DeadLetterStore(client: client)
                    let targets = all ? try await store.pendingIDs(reason: reason) : ids
                    guard !targets.isEmpty else { return [DeadLetterReplayer.Result]() }
                    let broker = try context.broker()
                    let replayer: DeadLetterReplayer
                    do {
                        replayer = try await DeadLetterReplayer.connect(
                            store: store, endpoints: broker.endpoints, exchange: broker.exchange, logger: context.logger
                        )
                    } catch {
                        // connect only fails when no node of the broker accepts a connection.
                        FileHandle.standardError.write(Data((AdminContext.describe(error) + "\n").utf8))
                        throw AdminExitCode.unreachable
                    }
                    do {
                        let results = try await replayer.replay(targets) { done in
                            progress?.update(done: done, total: targets.count)
                        }
                        await replayer.close()
                        return results
                    } catch {
                        await replayer.close()
                        throw error
                    }
                }
            }
            progress?.finish()
            var missing = 0
            for result in results {
                switch result {
                case .replayed(let id, let routingKey):
                    if !all { print("replayed \(id) (\(TerminalText.printable(routingKey)))") }
                case .notFound(let id):
                    print("no dead letter \(id)")
                    missing += 1
                case .notWhole(let id, let bytes):
                    print(
                        "dead letter \(id) kept only the first \(DeadLetterRows.bodyPrefix) of its \(bytes) bytes: not replayed"
                    )
                    missing += 1
                }
            }
            let notFound = missing > 0 ? ", \(missing) not replayed (not found, or kept in part)" : ""
            print("dead-letters replay: \(results.count - missing) replayed\(notFound)")
            if missing > 0 { throw AdminExitCode.failure }
        }
    }

    struct Purge: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Deletes dead letters older than an age (the retention rule; run it from cron).")

        @OptionGroup var options: AdminOptions
        @Option(name: .long, help: "Age: 30d, 12h, 2w …") var olderThan: String
        @Flag(name: .long, help: "Only rows already replayed.") var replayedOnly = false

        func validate() throws {
            guard ReportQuery.parseAge(olderThan) != nil else {
                throw ValidationError("--older-than must be an age like 30d, 12h or 2w")
            }
        }

        func run() async throws {
            let age = ReportQuery.parseAge(olderThan) ?? 0
            let deleted = try await withAdminContext(options) { context in
                try await context.withPostgres { client in
                    try await DeadLetterStore(client: client).purge(olderThan: age, replayedOnly: replayedOnly)
                }
            }
            print("dead-letters purge: \(deleted) deleted")
        }
    }
}

struct NotFound: Error, CustomStringConvertible {
    var what: String
    var description: String { "\(what) not found" }
}
