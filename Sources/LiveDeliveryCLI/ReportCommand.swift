import ArgumentParser
import Configuration
import Foundation
import LiveDelivery
import LiveDeliveryAdmin
import Logging

/// Options of the admin commands (`report`, `dead-letters`, `failed-pushes`). Secrets (the
/// PostgreSQL and AMQP URLs) come from the environment or livedelivery.json, never from flags.
struct AdminOptions: ParsableArguments {
    @Option(name: .long, help: "Folder of livedelivery.json, policy.json, content-mapping.json.")
    var configDir: String?

    @Option(name: .long, help: "Log level on stderr (default warning).")
    var logLevel: String = "warning"

    /// The context (reading the configuration makes the process non-dumpable before the `…_FILE` secrets are
    /// read).
    func context() async throws -> AdminContext {
        var overrides: [String: String] = [:]
        if let configDir { overrides["config.dir"] = configDir }
        let config = try await WorkerConfiguration.makeReader(overrides: overrides)
        let format = LogFormat(rawValue: config.string(forKey: "log.format", default: "logfmt")) ?? .logfmt
        var logger = Logger(label: "livedelivery") { StderrLogHandler(label: $0, format: format) }
        logger.logLevel = Logger.Level(rawValue: logLevel) ?? .warning
        return AdminContext(config: config, logger: logger)
    }
}

/// Runs `body` with the admin context; an error is printed on stderr (without SQL or secrets) and
/// exits with its ``AdminExitCode``. `context.withPostgres { client in … }` opens (and closes) the
/// database client.
func withAdminContext<Result>(
    _ options: AdminOptions, _ body: (AdminContext) async throws -> Result
) async throws -> Result {
    do {
        return try await body(try await options.context())
    } catch let error as ExitCode {
        throw error
    } catch {
        throw adminFailure(error)
    }
}

/// Prints an error on stderr; returns its exit code: 1 for a failed operation, 2 for invalid
/// configuration, 3 for a server that could not be reached.
func adminFailure(_ error: any Error) -> ExitCode {
    FileHandle.standardError.write(Data((AdminContext.describe(error) + "\n").utf8))
    return AdminExitCode.code(for: AdminFailure(error))
}

/// `--format` of the commands that print rows (`report`, `dead-letters list`, `failed-pushes list`).
enum TableFormatOption: String, ExpressibleByArgument, CaseIterable {
    case table, json, csv

    var format: ReportFormat {
        switch self {
        case .table: .table
        case .json: .json
        case .csv: .csv
        }
    }
}

/// `--format` of the commands that show one record (`dead-letters show`, `failed-pushes show`).
enum RecordFormatOption: String, ExpressibleByArgument, CaseIterable {
    case text, json
}

/// Prints a result in the chosen format on stdout. CSV keeps its own CRLF line ends and JSON is one
/// document, so nothing else is written to stdout with them.
func printTable(_ table: ReportTable, format: TableFormatOption, maxCellWidth: Int = 60) throws {
    let text = try table.formatted(format.format, maxCellWidth: maxCellWidth)
    print(text, terminator: format == .csv ? "" : "\n")
}

/// `livedelivery report [NAME]`: prints a report_ view as an aligned table (or JSON, or CSV);
/// without NAME, lists them.
struct ReportCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "report",
        abstract: "Prints an admin report (a report_ view) as a table; without a name, lists the reports.",
        discussion: """
            Reads only the report_ views and functions: the role livedelivery_reporting suffices. Reports \
            over history (push-outcomes-hourly, failed-pushes, sweeper-actions, activity-timings, \
            activity-timings-by-app, alerts-per-activity, duplicate-starts) read only the window \
            --since..--until, the last 24 hours by default. --format json prints \
            one array of objects keyed by column name (numbers as numbers, NULL as null, timestamps as \
            RFC 3339 in UTC); --format csv prints RFC 4180 with CRLF line ends (NULL as an empty field). \
            --width cuts cells of the table only.
            """)

    @OptionGroup var options: AdminOptions

    @Argument(help: "The report, e.g. activities-by-state (see `livedelivery report`).")
    var name: String?

    @Option(name: .long, help: "Only this order (reports with an order_id column).")
    var order: String?

    @Option(
        name: .long,
        help: "Only rows since an age (90s, 30m, 24h, 7d, 2w) or an RFC 3339 time (reports over history: 24h).")
    var since: String?

    @Option(name: .long, help: "Only rows before an age (as --since) or an RFC 3339 time; default: now.")
    var until: String?

    @Option(name: .long, help: "At most N rows; 0 = all.")
    var limit: Int = 100

    @Option(name: .long, help: "Cut cells longer than this many characters; 0 = never (table only).")
    var width: Int = 60

    @Option(name: .long, help: "Output format: table, json or csv.")
    var format: TableFormatOption = .table

    @Option(
        name: .long,
        help: ArgumentHelp(
            "Read every cell named (comma-separated): their rows together, each with its cell first.",
            discussion: "Each cell's database is cells.<name>.postgresUrl (LIVEDELIVERY_CELLS_<NAME>_POSTGRES_URL)."))
    var cells: String?

    /// The cells of `--cells`, in the order given.
    var cellNames: [String] { cells.map(OrderRouting.cellList) ?? [] }

    func validate() throws {
        if cells != nil {
            guard !cellNames.isEmpty, cellNames.allSatisfy(OrderRouting.isCellName) else {
                throw ValidationError("--cells takes cell names (a–z, 0–9, '-'), comma-separated")
            }
        }
        guard limit >= 0 else { throw ValidationError("--limit must be 0 or more") }
        if let since, ReportQuery.parseSince(since) == nil {
            throw ValidationError("--since must be an age like 30m, 24h, 7d or an RFC 3339 time")
        }
        if let until, ReportQuery.parseSince(until) == nil {
            throw ValidationError("--until must be an age like 30m, 24h, 7d or an RFC 3339 time")
        }
        if let name {
            guard let report = Report.named(name) else {
                throw ValidationError("no report named \(name); `livedelivery report` lists them")
            }
            // Checked here, not by the query, so that a wrong filter is a usage error (exit 64).
            if order != nil && !report.hasOrderColumn {
                throw ValidationError("report \(report.name) has no order_id column (--order)")
            }
            if (since != nil || until != nil) && report.timeColumn == nil {
                throw ValidationError("report \(report.name) is a snapshot without time (--since, --until)")
            }
        }
    }

    func run() async throws {
        guard let name, let report = Report.named(name) else {
            if format != .table {
                // The catalogue itself, for scripts: which reports exist and which filters they take.
                let catalogue = ReportTable(
                    columns: [
                        .init(name: "name"), .init(name: "summary"), .init(name: "order_filter", kind: .boolean),
                        .init(name: "since_column"),
                    ],
                    rows: Report.all.map { [$0.name, $0.summary, $0.hasOrderColumn ? "t" : "f", $0.timeColumn] })
                try printTable(catalogue, format: format)
                return
            }
            let width = Report.all.map(\.name.count).max() ?? 0
            print("Reports (livedelivery report NAME [--order ID] [--since AGE|TIME] [--until AGE|TIME] [--limit N]):")
            for report in Report.all {
                let flags = [report.hasOrderColumn ? "--order" : nil, report.timeColumn.map { _ in "--since --until" }]
                    .compactMap { $0 }.joined(separator: " ")
                let padding = String(repeating: " ", count: width - report.name.count)
                print("  \(report.name)\(padding)  \(report.summary)" + (flags.isEmpty ? "" : " [\(flags)]"))
            }
            return
        }
        let query = ReportQuery(
            orderID: order, since: since.flatMap { ReportQuery.parseSince($0) },
            until: until.flatMap { ReportQuery.parseSince($0) }, limit: limit == 0 ? nil : limit)
        let table = try await withAdminContext(options) { context in
            guard !cellNames.isEmpty else {
                return try await context.withPostgres(reporting: true) { client in
                    try await report.run(query, client: client)
                }
            }
            return ReportTable.joining(
                try await context.withCells(cellNames) { _, client in try await report.run(query, client: client) })
        }
        try printTable(table, format: format, maxCellWidth: width)
    }
}
