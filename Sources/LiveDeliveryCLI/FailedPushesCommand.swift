import ArgumentParser
import Foundation
import LiveDelivery
import LiveDeliveryAdmin

/// `livedelivery failed-pushes list|show|retry`.
struct FailedPushesCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "failed-pushes",
        abstract: "Lists and shows pushes given up for good; retry re-plans the newest state of their activity.",
        subcommands: [List.self, Show.self, Retry.self])

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Lists failed pushes, newest first.")

        @OptionGroup var options: AdminOptions
        @Option(name: .long, help: "Only since an age (24h, 7d) or an RFC 3339 time.") var since: String?
        @Option(name: .long, help: "At most N rows; 0 = all.") var limit: Int = 100
        @Flag(name: .long, help: "Only those not followed by a delivered push to the activity.") var unrecovered = false
        @Option(name: .long, help: "Output format: table, json or csv (see `livedelivery report --help`).")
        var format: TableFormatOption = .table

        func validate() throws {
            guard limit >= 0 else { throw ValidationError("--limit must be 0 or more") }
            if let since, ReportQuery.parseSince(since) == nil {
                throw ValidationError("--since must be an age like 24h or 7d, or an RFC 3339 time")
            }
        }

        func run() async throws {
            let table = try await withAdminContext(options) { context in
                try await context.withPostgres { client in
                    try await FailedPushStore(client: client, tracking: nil).list(
                        since: since.flatMap { ReportQuery.parseSince($0) }, limit: limit == 0 ? nil : limit,
                        unrecoveredOnly: unrecovered)
                }
            }
            try printTable(table, format: format)
        }
    }

    struct Show: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Shows a failed push and every attempt to its activity.")

        @OptionGroup var options: AdminOptions
        @Argument(help: "The failed push's id (push_attempts.id).") var id: Int64
        @Option(
            name: .long,
            help: "Output format: text, or json (one object: the push's columns and an `attempts` array).")
        var format: RecordFormatOption = .text

        func run() async throws {
            let shown = try await withAdminContext(options) { context in
                try await context.withPostgres { client in
                    try await FailedPushStore(client: client, tracking: nil).show(id)
                }
            }
            guard let shown else { throw adminFailure(NotFound(what: "failed push \(id)")) }
            let push = shown.push
            if format == .json {
                let members = push.jsonMembers(row: 0) + [.init("attempts", shown.attempts.json)]
                print(try AdminJSON.object(members).serialized())
                return
            }
            let width = push.columns.map(\.name.count).max() ?? 0
            for (index, column) in push.columns.enumerated() {
                let padding = String(repeating: " ", count: width - column.name.count)
                print("\(column.name):\(padding) \(TerminalText.printable(push.rows[0][index] ?? ""))")
            }
            print("")
            print("attempts to this activity:")
            print(shown.attempts.render())
        }
    }

    struct Retry: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Re-plans the newest state of each failed push's activity (the dispatcher sends it).",
            discussion: """
                The old payload is not resent: the core plans the order's newest state again, with a fresh \
                timestamp. An activity that has failed or ended gets nothing.
                """)

        @OptionGroup var options: AdminOptions
        @Argument(help: "Failed push ids.") var ids: [Int64]

        func run() async throws {
            var missing = 0
            try await withAdminContext(options) { context in
                try await context.withPostgres { client in
                    let store = FailedPushStore(client: client, tracking: try context.tracking())
                    for id in ids {
                        guard let result = try await store.retry(id, logger: context.logger) else {
                            print("\(id): not a failed push")
                            missing += 1
                            continue
                        }
                        let what =
                            result.planned.isEmpty
                            ? "nothing to re-plan (the activity is \(result.activityState ?? "gone"))"
                            : "planned \(result.planned.joined(separator: ", "))"
                        // The order id and the activity's key are a publisher's text.
                        print(
                            "\(id): order \(TerminalText.printable(result.orderID)) "
                                + "activity \(TerminalText.printable(result.activityKey)): \(what)")
                    }
                }
            }
            if missing > 0 { throw AdminExitCode.failure }
        }
    }
}
