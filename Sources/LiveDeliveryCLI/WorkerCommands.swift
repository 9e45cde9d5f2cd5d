import ArgumentParser
import Configuration
import Foundation
import LiveDelivery
import Logging
import RabbitMQ
import ServiceLifecycle

/// Options every worker command shares; they take precedence over the environment and the file.
struct WorkerOptions: ParsableArguments {
    @Option(name: .long, help: "Folder of livedelivery.json, policy.json, content-mapping.json, apns-apps.json.")
    var configDir: String?

    @Option(name: .long, help: "Log level (trace, debug, info, notice, warning, error, critical).")
    var logLevel: String?

    @Option(name: .long, help: "Log format: logfmt or json (default: logfmt, or LIVEDELIVERY_LOG_FORMAT).")
    var logFormat: LogFormat?

    var overrides: [String: String] {
        var values: [String: String] = [:]
        if let configDir { values["config.dir"] = configDir }
        if let logLevel { values["log.level"] = logLevel }
        return values
    }

    /// The configuration (reading it makes the process non-dumpable before the `…_FILE` secrets are read).
    func reader(extra: [String: String] = [:]) async throws -> ConfigReader {
        try await WorkerConfiguration.makeReader(overrides: overrides.merging(extra) { $1 })
    }

    func logger(config: ConfigReader) -> Logger {
        let level = Logger.Level(rawValue: config.string(forKey: "log.level", default: "info")) ?? .info
        let format = logFormat ?? LogFormat(rawValue: config.string(forKey: "log.format", default: "logfmt")) ?? .logfmt
        var logger = Logger(label: "livedelivery") { label in StderrLogHandler(label: label, format: format) }
        logger.logLevel = level
        return logger
    }
}

/// `livedelivery run`: consumer, dispatcher, sweeper and the HTTP endpoint until SIGTERM/SIGINT.
struct RunCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "run",
        abstract: "Runs the worker: consumes events, sends pushes, sweeps, serves /metrics, /healthz, /readyz.")

    @OptionGroup var options: WorkerOptions

    @Option(name: .long, help: "Port of the metrics/health listener (0 = any free port).")
    var httpPort: Int?

    func run() async throws {
        var extra: [String: String] = [:]
        if let httpPort { extra["http.port"] = String(httpPort) }
        // Reading the configuration made the process non-dumpable before it read a secret: no core file or
        // same-user ptrace may carry the keys and passwords off.
        let config = try await options.reader(extra: extra)
        let logger = options.logger(config: config)
        if ProcessHardening.isNonDumpable {
            logger.info("the process is not dumpable: no core file, no ptrace by other processes of its user")
        } else {
            logger.warning("could not make the process non-dumpable: a core file may hold its keys and passwords")
        }
        do {
            let configuration = try WorkerConfiguration.load(config: config)
            let traces = try TraceExport.bootstrap(
                environment: ProcessInfo.processInfo.environment, instanceID: configuration.workerID, logger: logger)
            let group = try buildWorker(configuration: configuration, logger: logger, observability: traces)
            try await group.run()
        } catch let error as LiveDeliveryError {
            printError(error.description)
            throw ExitCode(1)
        }
    }
}

/// `livedelivery migrate`: applies the numbered SQL files that are missing.
struct MigrateCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "migrate",
        abstract: "Applies sql/NNN_*.sql migrations (recorded, idempotent, safe when run concurrently).")

    @OptionGroup var options: WorkerOptions

    @Option(name: .long, help: "Folder of the migration files (default: sql, or LIVEDELIVERY_MIGRATIONS_DIR).")
    var sqlDir: String?

    @Flag(name: .long, help: "Migrate the database only; do not declare the broker's exchange and queues.")
    var skipBroker = false

    func run() async throws {
        let config = try await options.reader(extra: sqlDir.map { ["migrations.dir": $0] } ?? [:])
        let logger = options.logger(config: config)
        let directory = config.string(forKey: "migrations.dir", default: "sql")
        do {
            let postgres = try WorkerConfiguration.readPostgres(config)
            log(LinkFinding.finding(postgres: postgres, name: "database").map { [$0] } ?? [], logger: logger)
            if !skipBroker, let endpoints = try? WorkerConfiguration.readEndpoints(config) {
                log(LinkFinding.findings(amqp: endpoints), logger: logger)
            }
            let applied = try await runMigrations(postgres: postgres, directory: directory, logger: logger)
            if applied.isEmpty {
                print("migrate: the database is up to date")
            } else {
                for name in applied { print("migrate: applied \(name)") }
            }
            // The broker's topology too, so that events published before the first worker runs are kept.
            if skipBroker {
                print("migrate: the broker's topology was not declared (--skip-broker)")
            } else {
                print("migrate: declared \(try await declareBrokerTopology(config: config, logger: logger))")
            }
        } catch let error as LiveDeliveryError {
            printError(error.description)
            throw ExitCode(1)
        } catch let error as RabbitMQError {
            printError("the database is migrated, but the broker's topology could not be declared: \(error)")
            throw ExitCode(1)
        }
    }
}

/// `livedelivery check-config`: validates everything and prints a summary without secrets;
/// `--connect` also reaches each broker node, the database and each APNs host.
struct CheckConfigCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "check-config",
        abstract: "Loads and validates the configuration, policy, mapping and APNs keys; prints a summary.",
        discussion: """
            Reads only what `run` reads. Each problem names its file and path, or its key and \
            environment variable; no password or key is printed. Exits 1 on any problem.
            """)

    @OptionGroup var options: WorkerOptions

    @Flag(
        name: .long,
        help: "Also connect to each broker node, the database and each APNs host (no push is sent); one line each.")
    var connect = false

    @Flag(name: .long, help: "Print every configuration key (environment variable, default, values, meaning) and exit.")
    var keys = false

    func run() async throws {
        if keys {
            print(WorkerConfiguration.keysTable)
            return
        }
        do {
            let config = try await options.reader()
            let logger = options.logger(config: config)
            for line in try checkConfiguration(config: config, logger: logger) { print(line) }
            let traces = TraceExportSettings()
            try traces.validate()
            print(traces.summary)
            print("check-config: the configuration is valid")
            guard connect else { return }
            let checks = try await checkConnections(config: config, logger: logger)
            for check in checks { print("connect: \(check)") }
            let failed = checks.filter { !$0.succeeded }.count
            guard failed == 0 else {
                printError("check-config: \(failed) of \(checks.count) targets could not be used")
                throw ExitCode(1)
            }
            print("check-config: all \(checks.count) targets reached")
        } catch let error as LiveDeliveryError {
            printError(error.description)
            throw ExitCode(1)
        }
    }
}

/// Logs each link finding: a warning over the network, a notice to this machine (as `run` does).
func log(_ findings: [LinkFinding], logger: Logger) {
    for finding in findings { logger.log(level: finding.isLocal ? .notice : .warning, "\(finding.message)") }
}

func printError(_ text: String) {
    FileHandle.standardError.write(Data((text + "\n").utf8))
}
