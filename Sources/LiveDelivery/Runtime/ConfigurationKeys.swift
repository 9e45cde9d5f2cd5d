import Configuration
import Foundation
import LiveDeliveryCore
import LiveDeliveryJSON
import Postgres
import RabbitMQ

/// One configuration key, declared once: its name (from which its environment variable and JSON path
/// follow), its values, its meaning, where it goes in ``WorkerConfiguration`` and how `check-config`
/// shows it. Its default is the value ``WorkerConfiguration`` starts with (``WorkerConfiguration/defaults``).
///
/// ``WorkerConfiguration/keys`` is the one table: loading reads it, `check-config` prints it (its summary,
/// and `--keys`), and the table in docs/configuration.md is made from it (a unit test compares them).
package struct ConfigurationKey: Sendable {
    package enum Values: Sendable {
        case text
        /// A list (comma-separated in the environment, an array in the file).
        case list
        case int(ClosedRange<Int>)
        case seconds(ClosedRange<Double>)
        case oneOf([String])
    }

    package let name: String
    package let values: Values
    package let secret: Bool
    package let meaning: String
    /// The default as the table shows it, when it is not the value ``WorkerConfiguration/defaults`` holds.
    let defaultText: String?
    /// Reads the key (its problems go to the reader's list) into a configuration.
    let read: @Sendable (inout WorkerConfiguration, KeyReader) -> Void
    /// The value in effect as `check-config` shows it (secrets masked); nil: shown with another key.
    let show: (@Sendable (WorkerConfiguration) -> String)?

    package var environmentVariable: String { WorkerConfiguration.environmentName(name) }

    static func int(
        _ name: String, _ path: any WritableKeyPath<WorkerConfiguration, Int> & Sendable, _ range: ClosedRange<Int>,
        _ meaning: String
    ) -> Self {
        Self(
            name: name, values: .int(range), secret: false, meaning: meaning, defaultText: nil,
            read: { configuration, reader in
                configuration[keyPath: path] = reader.int(name, configuration[keyPath: path], range)
            },
            show: { "\($0[keyPath: path])" })
    }

    static func seconds(
        _ name: String, _ path: any WritableKeyPath<WorkerConfiguration, Duration> & Sendable,
        _ range: ClosedRange<Double>, _ meaning: String
    ) -> Self {
        Self(
            name: name, values: .seconds(range), secret: false, meaning: meaning, defaultText: nil,
            read: { configuration, reader in
                configuration[keyPath: path] = reader.seconds(name, configuration[keyPath: path], range)
            },
            show: { JSONWriter.format($0[keyPath: path].seconds) })
    }

    static func text(
        _ name: String, _ path: any WritableKeyPath<WorkerConfiguration, String> & Sendable, _ meaning: String,
        nonEmpty: Bool = false
    ) -> Self {
        Self(
            name: name, values: .text, secret: false, meaning: meaning, defaultText: nil,
            read: { configuration, reader in
                configuration[keyPath: path] = reader.text(name, configuration[keyPath: path])
                if nonEmpty && configuration[keyPath: path].isEmpty { reader.problems.add("\(name) must not be empty") }
            },
            show: { $0[keyPath: path] })
    }

    static func oneOf(
        _ name: String, _ path: any WritableKeyPath<WorkerConfiguration, String> & Sendable, _ choices: [String],
        _ meaning: String
    ) -> Self {
        Self(
            name: name, values: .oneOf(choices), secret: false, meaning: meaning, defaultText: nil,
            read: { configuration, reader in
                let value = reader.text(name, configuration[keyPath: path])
                if choices.contains(value) {
                    configuration[keyPath: path] = value
                } else {
                    reader.problems.add("\(name) must be one of \(choices.joined(separator: ", "))")
                }
            },
            show: { $0[keyPath: path] })
    }

    /// A text that may be left out.
    static func optional(
        _ name: String, _ path: any WritableKeyPath<WorkerConfiguration, String?> & Sendable, _ meaning: String,
        check: (@Sendable (String, KeyReader) -> Void)? = nil
    ) -> Self {
        Self(
            name: name, values: .text, secret: false, meaning: meaning, defaultText: "none",
            read: { configuration, reader in
                configuration[keyPath: path] = reader.optional(name)
                if let value = configuration[keyPath: path] { check?(value, reader) }
            },
            show: { $0[keyPath: path] ?? "none" })
    }

    /// The table's row: key, environment variable, default, values, meaning.
    func row(defaults: WorkerConfiguration) -> String {
        let values: String
        switch self.values {
        case .text: values = "text"
        case .list: values = "list"
        case .int(let range): values = "\(range.lowerBound)…\(range.upperBound)"
        case .seconds(let range):
            values = "\(JSONWriter.format(range.lowerBound))…\(JSONWriter.format(range.upperBound)) s"
        case .oneOf(let choices): values = choices.map { "`\($0)`" }.joined(separator: ", ")
        }
        let defaultValue = defaultText ?? show.map { "`\($0(defaults))`" } ?? ""
        return
            "| `\(name)` | `\(environmentVariable)` | \(defaultValue) | \(values)\(secret ? ", secret" : "") | \(meaning) |"
    }
}

/// Reads keys from a `ConfigReader`, noting each problem (the key, its environment variable, the range)
/// rather than stopping at the first.
package struct KeyReader: Sendable {
    let config: ConfigReader
    let problems: ProblemList

    func int(_ key: String, _ defaultValue: Int, _ range: ClosedRange<Int>) -> Int {
        let value = config.int(forKey: ConfigKey(key), default: defaultValue)
        guard range.contains(value) else {
            problems.add("\(key) must be between \(range.lowerBound) and \(range.upperBound) (is \(value))")
            return defaultValue
        }
        return value
    }

    func seconds(_ key: String, _ defaultValue: Duration, _ range: ClosedRange<Double>) -> Duration {
        let value = config.double(forKey: ConfigKey(key), default: defaultValue.seconds)
        guard range.contains(value) else {
            problems.add("\(key) must be between \(range.lowerBound) and \(range.upperBound) seconds (is \(value))")
            return defaultValue
        }
        return .milliseconds(Int64((value * 1000).rounded()))
    }

    func text(_ key: String, _ defaultValue: String) -> String {
        config.string(forKey: ConfigKey(key), default: defaultValue)
    }

    func optional(_ key: String) -> String? {
        config.string(forKey: ConfigKey(key)).flatMap { $0.isEmpty ? nil : $0 }
    }
}

extension WorkerConfiguration {
    /// Every key `livedelivery run` reads, in the order it reads them (`config.dir` first: other defaults
    /// follow from it).
    package static let keys: [ConfigurationKey] = [
        ConfigurationKey(
            name: "config.dir", values: .text, secret: false,
            meaning: "The folder of `livedelivery.json`, `policy.json`, `content-mapping.json` and "
                + "`apns-apps.json`. Environment or flag only.",
            defaultText: nil,
            read: { configuration, reader in
                configuration.configDirectory = reader.text("config.dir", configuration.configDirectory)
            },
            show: { $0.configDirectory }),
        ConfigurationKey(
            name: "amqp.urls", values: .list, secret: true,
            meaning: "The broker's nodes, tried in order; after losing a connection the worker starts with the "
                + "next node. This or `amqp.url` is required.",
            defaultText: "none",
            read: { configuration, reader in
                do throws(LiveDeliveryError) {
                    configuration.amqp.endpoints = try readEndpoints(reader.config)
                } catch {
                    reader.problems.add(error.message)
                }
            },
            show: { "\($0.amqp.endpoints)" }),
        ConfigurationKey(
            name: "amqp.url", values: .text, secret: true, meaning: "One node, when `amqp.urls` is not set.",
            defaultText: "none", read: { _, _ in }, show: nil),
        .text("amqp.exchange", \.amqp.exchange, "The topic exchange upstream publishes the events to.", nonEmpty: true),
        .text("amqp.queue", \.amqp.queue, "The quorum work queue the workers share.", nonEmpty: true),
        .optional(
            "cell.name", \.amqp.cell,
            "The cell this worker belongs to (a whole deployment: `amqp.queue` and `postgres.url` are the cell's): "
                + "its queue is bound to `<amqp.exchange>.cells`, which sends each order to one cell by its "
                + "`order_id` header ([scaling.md](scaling.md#cells)); with `cell.all`, that is a first guess. Unset: "
                + "one deployment, the queue takes every event.",
            check: { value, reader in
                if !OrderRouting.isCellName(value) {
                    reader.problems.add(
                        "cell.name (environment \(environmentName("cell.name"))): 1–32 of a–z, 0–9 and '-', not starting with '-'"
                    )
                }
            }),
        .int(
            "cell.weight", \.amqp.cellWeight, CellAssignment.weights,
            "The cell's share of the orders against the other cells': its queue's binding weight on the hash exchange "
                + "and, with `cell.all`, its weight in the hash."),
        ConfigurationKey(
            name: "cell.all", values: .list, secret: false,
            meaning: "Every cell of the deployment, this one included, each with `cells.<name>.queue`: the workers "
                + "give each order to one of them by a rendezvous hash of its `order_id` and forward an event that "
                + "reached another cell to its own ([scaling.md](scaling.md#which-cell-an-order-belongs-to)). "
                + "Every worker of every cell has the same list. Unset: the hash exchange alone places orders.",
            defaultText: "none",
            read: { configuration, reader in configuration.amqp.cells = readCells(configuration.amqp, reader) },
            show: { $0.amqp.cells.map { $0.cells.map(\.name).joined(separator: ", ") } ?? "none" }),
        ConfigurationKey(
            name: "cells.<name>.queue", values: .text, secret: false,
            meaning: "Each cell's events queue (every cell of `cell.all`; this cell's is `amqp.queue`): where the "
                + "events of its orders are forwarded. In the variable's name the cell's is upper-cased, `-` as `_`. "
                + "`status --cells` reads it too.",
            defaultText: "none",
            read: { _, _ in },  // with cell.all
            show: { showCells($0, \.queue) }),
        ConfigurationKey(
            name: "cells.<name>.weight", values: .int(CellAssignment.weights), secret: false,
            meaning: "Each cell's share of the orders in the hash (every cell of `cell.all`); this cell's may be "
                + "given as `cell.weight` instead (if both are set, they must agree).",
            defaultText: "`1`",
            read: { _, _ in },  // with cell.all
            show: { showCells($0, \.weight) }),
        ConfigurationKey(
            name: "cell.takeOverFrom", values: .list, secret: false,
            meaning: "For a cell added to the deployment, while the orders in flight that the grown `cell.all` gives "
                + "it move: the cells it was added to. An event of an order this cell does not know yet makes it take "
                + "the order over from the one of them the hash names, through that cell's database "
                + "(`cells.<name>.postgresUrl`, a login of `livedelivery_worker` on its primary), with the same "
                + "activities ([operations.md](operations.md#adding-a-cell)). Unset once they have ended (12 hours).",
            defaultText: "none",
            read: { configuration, reader in configuration.cellHandover = readHandover(configuration.amqp, reader) },
            show: { $0.cellHandover.map { $0.previous.cells.map(\.name).joined(separator: ", ") } ?? "none" }),
        .int("amqp.prefetch", \.amqp.prefetch, 1...65_535, "Deliveries a worker holds unacknowledged at most."),
        .int("amqp.deliveryLimit", \.amqp.deliveryLimit, 1...1000, "The queue's `x-delivery-limit`."),
        .int(
            "amqp.batchSize", \.amqp.batchSize, 1...10_000,
            "The most deliveries applied together: one transaction, or several when their events name more than 1,000 users."
        ),
        ConfigurationKey(
            name: "postgres.url", values: .text, secret: true,
            meaning: "The database, as a libpq connection string ([below](#connection-strings)). Required. The "
                + "workers log in as a member of `livedelivery_worker`; `migrate` runs with the owner's login.",
            defaultText: "none",
            read: { configuration, reader in
                do throws(LiveDeliveryError) {
                    configuration.postgres.connection = try readPostgres(reader.config)
                } catch {
                    reader.problems.add(error.message)
                }
            },
            show: { "\($0.postgres.connection)" }),
        ConfigurationKey(
            name: "postgres.reportingUrl", values: .text, secret: true,
            meaning: "Where `livedelivery report` reads: a hot standby, with a role of `livedelivery_reporting`.",
            defaultText: "`postgres.url`",
            read: { configuration, reader in
                guard reader.optional("postgres.reportingUrl") != nil else { return }
                do throws(LiveDeliveryError) {
                    configuration.postgres.reporting = try readPostgres(reader.config, key: "postgres.reportingUrl")
                } catch {
                    reader.problems.add(error.message)
                }
            },
            show: { $0.postgres.reporting.map { "\($0)" } ?? "postgres.url" }),
        .int("postgres.poolSize", \.postgres.poolSize, 1...256, "Connections of the worker's pool."),
        .int(
            "postgres.statementCacheSize", \.postgres.statementCacheSize, 0...10_000,
            "Statements each connection prepares once and runs by name (saves the server's parse and plan). "
                + "0 behind a pooler that cannot keep prepared statements."),
        .int(
            "postgres.stateCacheSize", \.postgres.stateCacheSize, 0...1_000_000,
            "Order states this worker wrote, kept decoded for up to five minutes, so that recording a push does "
                + "not read back the state its event just wrote (a row whose version moved on is read). 0: off."),
        ConfigurationKey(
            name: "apns.appsFile", values: .text, secret: false,
            meaning: "The apps, their keys and environments ([below](#the-apns-apps-file)).",
            defaultText: "`$CONFIG_DIR/apns-apps.json`",
            read: { configuration, reader in
                // Joined as text, not resolved, so that messages show the path as the operator wrote it.
                let directory = configuration.configDirectory
                configuration.apns.appsFile =
                    reader.optional("apns.appsFile")
                    ?? (directory.hasSuffix("/") ? directory + appsFileName : directory + "/" + appsFileName)
            },
            show: { $0.apns.appsFile }),
        .optional(
            "apns.baseURL", \.apns.baseURL, "Send every app's pushes to this `https://` URL (the simulator).",
            check: { value, reader in
                if URL(string: value)?.scheme != "https" {
                    reader.problems.add(
                        "apns.baseURL (environment \(environmentName("apns.baseURL"))): must be an https:// URL")
                }
            }),
        .optional(
            "apns.broadcastURL", \.apns.broadcastURL,
            "Send broadcasts to this `https://` URL (default: the device-push host, as Apple documents).",
            check: { value, reader in
                if URL(string: value)?.scheme != "https" {
                    reader.problems.add(
                        "apns.broadcastURL (environment \(environmentName("apns.broadcastURL"))): must be an https:// URL"
                    )
                }
            }),
        .optional(
            "apns.channelsURL", \.apns.channelsURL,
            "Create and delete broadcast channels at this `https://` URL (default: `apns.baseURL` when set, else "
                + "`api-manage-broadcast.push.apple.com:2196`, sandbox `:2195`).",
            check: { value, reader in
                if URL(string: value)?.scheme != "https" {
                    reader.problems.add(
                        "apns.channelsURL (environment \(environmentName("apns.channelsURL"))): must be an https:// URL"
                    )
                }
            }),
        .optional(
            "apns.caFile", \.apns.caFile, "A CA or certificate (PEM) to trust for APNs.",
            check: { value, reader in
                if !FileManager.default.isReadableFile(atPath: value) {
                    reader.problems.add(
                        "apns.caFile (environment \(environmentName("apns.caFile"))): cannot read \(value)")
                }
            }),
        .seconds("apns.requestTimeoutSeconds", \.apns.requestTimeout, 1...120, "A push's request, answer included."),
        .int(
            "apns.eventLoops", \.apns.eventLoopsSetting, 0...64,
            "libcurl threads per APNs host (0: one per core, at most one per connection). One carries about "
                + "15,000 pushes/s, more than a worker's database path."),
        .text("http.host", \.http.host, "Where `/metrics`, `/health` and `/ready` listen."),
        .int("http.port", \.http.port, 0...65_535, "0 picks any free port (written to `http.portFile`)."),
        .optional("http.portFile", \.http.portFile, "Where the port chosen is written."),
        ConfigurationKey(
            name: "worker.id", values: .text, secret: false, meaning: "In logs and outbox leases.",
            defaultText: "hostname-pid",
            read: { configuration, reader in configuration.workerID = reader.optional("worker.id") ?? defaultWorkerID()
            },
            show: { $0.workerID }),
        .oneOf(
            "log.level", \.logLevel, ["trace", "debug", "info", "notice", "warning", "error", "critical"],
            "The least severe level logged."),
        .oneOf("log.format", \.logFormat, ["logfmt", "json"], "One line per entry, as logfmt or JSON."),
        .int("dispatcher.batchSize", \.dispatcher.batchSize, 1...10_000, "Rows per claim, answers per recording."),
        .int(
            "dispatcher.concurrency", \.dispatcher.concurrency, 1...10_000,
            "Pushes sent and not yet answered, and answers awaiting their recording: each at most this. "
                + "Keep it at least twice `amqp.batchSize`."),
        .seconds(
            "dispatcher.handoffWaitSeconds", \.dispatcher.handoffWait, 0...10,
            "How long a consumer batch waits, at most, for its dispatcher to have a slot per event, so that its "
                + "pushes go over in memory instead of being claimed from the outbox. 0: it never waits."),
        .seconds(
            "dispatcher.leaseSeconds", \.dispatcher.lease, 1...3600,
            "How long a claimed push is this worker's; after it, any worker claims it again. A push handed over "
                + "in memory with no answer recorded after it is built again by a sweeper."),
        .seconds(
            "dispatcher.pollSeconds", \.dispatcher.poll, 0.01...60,
            "How often the outbox is read without a `NOTIFY` (rows come due, expired leases)."),
        .int("dispatcher.maxAttempts", \.dispatcher.maxAttempts, 1...100, "Sends of one push at most."),
        .seconds(
            "dispatcher.backoffBaseSeconds", \.dispatcher.backoffBase, 0.001...3600,
            "The first retry's delay (at least APNs' own), doubled per attempt with jitter."),
        .seconds("dispatcher.backoffMaxSeconds", \.dispatcher.backoffMax, 0.001...86_400, "The longest retry delay."),
        .seconds(
            "dispatcher.pauseSeconds", \.dispatcher.pause, 0.01...86_400,
            "How long an app with a configuration fault (a bad key, topic or certificate) stays paused."),
        .seconds("sweeper.intervalSeconds", \.sweeper.interval, 0.01...3600, "Between two sweeps."),
        .int("sweeper.batchSize", \.sweeper.batchSize, 1...10_000, "Orders a sweep takes in one transaction."),
        .int(
            "retention.days", \.retention.days, 0...36_500,
            "The day partitions of `inbox`, `push_attempts` and `timeline` that ended more than this many days "
                + "ago are dropped. Reports look back this far at most. 0 keeps everything; else at least 7, the "
                + "least the database's upkeep functions let a worker's login keep (sql/122)."),
        .seconds(
            "retention.intervalSeconds", \.retention.interval, 1...86_400,
            "Between retention rounds, which also create partitions ahead and roll up push outcomes."),
        .int(
            "pushToStart.maxStartsPerDevice", \.pushToStart.maxStartsPerDevice, 1...1000,
            "Remote starts per device in the window (Apple refuses about ten in quick succession); a held "
                + "start is tried again later."),
        .seconds("pushToStart.windowSeconds", \.pushToStart.window, 1...86_400, "The push-to-start window."),
        .seconds(
            "metrics.sampleSeconds", \.metricsSampleInterval, 0.1...3600,
            "How often the deployment-wide gauges (pending pushes, paused apps, queue depths) are sampled."),
        .text("migrations.dir", \.migrationsDirectory, "The folder of the schema's migrations (`migrate`)."),
    ]

    /// The values a configuration starts with: each key's default (the connection settings are
    /// placeholders, and the policy and mapping the built-in ones until the files are read).
    package static var defaults: WorkerConfiguration {
        WorkerConfiguration(
            configDirectory: DefaultConfiguration.directoryName, amqp: AMQP(endpoints: AMQPEndpoints([.init()])),
            postgres: Postgres(connection: PostgresConfiguration()), apns: APNs(appsFile: ""), workerID: "",
            tracking: TrackingConfiguration(
                policy: Policy(), mapping: ContentMapping(attributesType: "", attributes: [], contentState: [])))
    }

    /// The keys as the table in docs/configuration.md shows them (`check-config --keys` prints it).
    package static var keysTable: String {
        let defaults = Self.defaults
        return
            (["| Key | Environment | Default | Values | Meaning |", "|---|---|---|---|---|"]
            + keys.map { $0.row(defaults: defaults) }).joined(separator: "\n")
    }
}

/// Each cell of the list with one of its settings (`check-config`): "a events-a, b events-b", or "none".
private func showCells<Value>(
    _ configuration: WorkerConfiguration, _ setting: KeyPath<CellAssignment.Cell, Value>
)
    -> String
{
    configuration.amqp.cells.map { $0.cells.map { "\($0.name) \($0[keyPath: setting])" }.joined(separator: ", ") }
        ?? "none"
}
