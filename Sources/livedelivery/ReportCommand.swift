import ArgumentParser
import Configuration
import Foundation
import LiveDelivery
import Logging

/// Options of the admin commands (`report`, `dead-letters`, `failed-pushes`). Secrets (the
/// PostgreSQL and AMQP URLs) come from the environment or livedelivery.json, never from flags.
struct AdminOptions: ParsableArguments {
    @Option(name: .long, help: "Folder of livedelivery.json, policy.json, content-mapping.json.")
    var configDir: String?

    @Option(name: .long, help: "Log level on stderr (default warning).")
    var logLevel: String = "warning"

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
/// exits 1. `context.withPostgres { client in … }` opens (and closes) the database client.
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

/// Prints an error on stderr; returns exit code 1.
func adminFailure(_ error: any Error) -> ExitCode {
    FileHandle.standardError.write(Data((AdminContext.describe(error) + "\n").utf8))
    return ExitCode(1)
}

/// `livedelivery report [NAME]`: prints a report_ view as an aligned table; without NAME, lists them.
struct ReportCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "report",
        abstract: "Prints an admin report (a report_ view) as a table; without a name, lists the reports.",
        discussion: "Reads only the report_ views: the role livedelivery_reporting suffices.")

    @OptionGroup var options: AdminOptions

    @Argument(help: "The report, e.g. activities-by-state (see `livedelivery report`).")
    var name: String?

    @Option(name: .long, help: "Only this order (reports with an order_id column).")
    var order: String?

    @Option(name: .long, help: "Only rows since an age (90s, 30m, 24h, 7d, 2w) or an RFC 3339 time.")
    var since: String?

    @Option(name: .long, help: "At most N rows; 0 = all.")
    var limit: Int = 100

    @Option(name: .long, help: "Cut cells longer than this many characters; 0 = never.")
    var width: Int = 60

    func validate() throws {
        guard limit >= 0 else { throw ValidationError("--limit must be 0 or more") }
        if let since, ReportQuery.parseSince(since) == nil {
            throw ValidationError("--since must be an age like 30m, 24h, 7d or an RFC 3339 time")
        }
        if let name, Report.named(name) == nil {
            throw ValidationError("no report named \(name); `livedelivery report` lists them")
        }
    }

    func run() async throws {
        guard let name, let report = Report.named(name) else {
            let width = Report.all.map(\.name.count).max() ?? 0
            print("Reports (livedelivery report NAME [--order ID] [--since AGE|TIME] [--limit N]):")
            for report in Report.all {
                let flags = [report.hasOrderColumn ? "--order" : nil, report.timeColumn.map { _ in "--since" }]
                    .compactMap { $0 }.joined(separator: " ")
                let padding = String(repeating: " ", count: width - report.name.count)
                print("  \(report.name)\(padding)  \(report.summary)" + (flags.isEmpty ? "" : " [\(flags)]"))
            }
            return
        }
        let query = ReportQuery(
            orderID: order, since: since.flatMap { ReportQuery.parseSince($0) }, limit: limit == 0 ? nil : limit)
        let table = try await withAdminContext(options) { context in
            try await context.withPostgres(reporting: true) { client in try await report.run(query, client: client) }
        }
        print(table.render(maxCellWidth: width))
    }
}
