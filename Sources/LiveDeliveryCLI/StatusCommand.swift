import ArgumentParser
import Configuration
import Foundation
import LiveDelivery
import LiveDeliveryAdmin
import LiveDeliveryCore
import LiveDeliveryTime

/// `livedelivery status`: the one command an on-call engineer runs first.
struct StatusCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status",
        abstract: "Shows the schema version, queue depths, pending pushes, paused apps and recent workers.",
        discussion: """
            Reads postgres.url (the primary: the outbox is not behind a report_ view) and asks the broker \
            for the events queue (amqp.queue, default livedelivery.events) and its dead-letter queue with \
            passive declares, which create nothing. "Workers seen recently" are the workers that recorded \
            a push attempt in the last 5 minutes: a worker with nothing to send is not counted. When the \
            broker cannot be reached the database part is still printed, and the exit status is 3.
            """)

    enum Format: String, ExpressibleByArgument, CaseIterable {
        case table, json
    }

    @OptionGroup var options: AdminOptions

    @Option(name: .long, help: "Output format: table or json.")
    var format: Format = .table

    @Option(
        name: .long,
        help: ArgumentHelp(
            "Show every cell named (comma-separated), one after the other.",
            discussion:
                "Each cell's database is cells.<name>.postgresUrl and its events queue cells.<name>.queue "
                + "(LIVEDELIVERY_CELLS_<NAME>_POSTGRES_URL, LIVEDELIVERY_CELLS_<NAME>_QUEUE)."))
    var cells: String?

    func run() async throws {
        if let cells {
            try await runCells(OrderRouting.cellList(cells))
            return
        }
        let (status, configurationProblem) = try await withAdminContext(options) { context in
            var status = try await context.withPostgres { client in try await SystemStatus.read(client: client) }
            let configurationProblem: String?
            do {
                let broker = try context.broker()
                let queue = context.eventsQueue()
                await status.readBroker(endpoints: broker.endpoints, queue: queue, logger: context.logger)
                configurationProblem = nil
            } catch {
                configurationProblem = AdminContext.describe(error)
                status.brokerError = "not read: the broker's configuration is missing or invalid"
            }
            return (status, configurationProblem)
        }
        switch format {
        case .json: print(try status.json.serialized())
        case .table: print(Self.render(status))
        }
        if let configurationProblem {
            FileHandle.standardError.write(Data((configurationProblem + "\n").utf8))
            throw AdminExitCode.invalidConfiguration
        }
        if status.broker == nil {
            throw status.brokerUnreachable ? AdminExitCode.unreachable : AdminExitCode.failure
        }
    }

    /// `--cells`: each cell's status in turn (as JSON, one object keyed by cell).
    private func runCells(_ cells: [String]) async throws {
        let statuses = try await withAdminContext(options) { context in
            let broker = try? context.broker()
            return try await context.withCells(cells) { cell, client in
                var status = try await SystemStatus.read(client: client)
                if let broker, let queue = context.config.string(forKey: ConfigKey("cells.\(cell).queue")),
                    !queue.isEmpty
                {
                    await status.readBroker(endpoints: broker.endpoints, queue: queue, logger: context.logger)
                } else {
                    status.brokerError = "not read: set cells.\(cell).queue and amqp.url"
                }
                return status
            }
        }
        switch format {
        case .json:
            print(try AdminJSON.object(statuses.map { AdminJSON.Member($0.cell, $0.result.json) }).serialized())
        case .table:
            print(statuses.map { "── cell \($0.cell)\n" + Self.render($0.result) }.joined(separator: "\n\n"))
        }
    }

    static func render(_ status: SystemStatus) -> String {
        var lines: [String] = []
        let schemaNote =
            status.schemaVersion == status.requiredSchemaVersion
            ? "up to date"
            : status.schemaVersion < status.requiredSchemaVersion
                ? "behind: run `livedelivery migrate`" : "newer than this release"
        lines.append(
            "schema:       version \(status.schemaVersion), this release needs \(status.requiredSchemaVersion) (\(schemaNote))"
        )
        if let broker = status.broker {
            lines.append(
                "events queue: \(broker.events.name): \(broker.events.messages) messages, \(broker.events.consumers) consumers"
            )
            lines.append("dead letters: \(broker.deadLetters.name): \(broker.deadLetters.messages) messages")
        } else {
            lines.append("broker:       \(status.brokerError ?? "not read")")
        }
        lines.append("")
        lines.append("pending pushes (outbox; oldest_due_s: since the oldest due, unleased push became due):")
        lines.append(
            ReportTable(
                columns: [
                    .init(name: "app"), .init(name: "pending", isNumeric: true),
                    .init(name: "oldest_due_s", isNumeric: true),
                ],
                rows: status.pendingPushes.map {
                    [$0.app, String($0.pending), $0.oldestDueSeconds.map { String(format: "%.1f", $0) }]
                }
            ).render())
        lines.append("")
        lines.append("paused apps:")
        lines.append(
            ReportTable(
                columns: [
                    .init(name: "app"), .init(name: "reason"), .init(name: "status", isNumeric: true),
                    .init(name: "paused_until"),
                ],
                rows: status.pausedApps.map {
                    [$0.app, $0.reason, $0.status.map(String.init), RFC3339.format($0.pausedUntil)]
                }
            ).render())
        lines.append("")
        lines.append("workers that sent a push in the last \(Int(SystemStatus.recentWorkerWindow / 60)) minutes:")
        lines.append(
            ReportTable(
                columns: [.init(name: "worker_id"), .init(name: "last_attempt_at")],
                rows: status.recentWorkers.map { [$0.workerID, ReportTable.rfc3339($0.lastAttemptAt)] }
            ).render())
        return lines.joined(separator: "\n")
    }
}
