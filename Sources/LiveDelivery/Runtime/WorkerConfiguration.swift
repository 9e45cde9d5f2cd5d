package import Configuration
import Foundation
package import LiveDeliveryCore
package import Postgres
package import RabbitMQ
import Synchronization

/// Everything `livedelivery run` needs, read once at start-up and validated as a whole.
///
/// Precedence: overrides (command-line flags) > environment variables (`LIVEDELIVERY_` + the key in
/// upper snake case, e.g. `amqp.prefetch` → `LIVEDELIVERY_AMQP_PREFETCH`) > `$CONFIG_DIR/livedelivery.json`
/// (nested objects, e.g. `{"amqp": {"prefetch": 200}}`) > the defaults below.
///
/// The keys, their defaults, ranges and meanings are declared once, in ``keys``
/// (ConfigurationKeys.swift); ``load(config:)`` reads them, and docs/configuration.md shows them.
package struct WorkerConfiguration: Sendable {
    package struct AMQP: Sendable {
        /// The broker's nodes, in the order to try them.
        package var endpoints: AMQPEndpoints
        package var exchange: String = "delivery.events"
        package var queue: String = "livedelivery.events"
        package var prefetch: Int = 500
        package var deliveryLimit: Int = 5
        package var batchSize: Int = 250

        /// Members of the quorum queues when they are declared (`x-quorum-initial-group-size`): three
        /// survive the loss of one node. RabbitMQ places fewer where the cluster has fewer nodes.
        package var quorumGroupSize: Int = 3

        package init(endpoints: AMQPEndpoints) { self.endpoints = endpoints }
        /// The cell this worker belongs to (docs/scaling.md, Cells): its queue takes the orders the hash
        /// exchange gives it, and every user's reports. nil: one deployment, the queue bound to every event.
        package var cell: String?
        /// The weight of the cell's queue on the hash exchange (its share of the orders).
        package var cellWeight: Int = 1
        /// Every cell of the deployment (`cell.all`, `cells.<name>.queue`, `cells.<name>.weight`): the hash that
        /// gives each order its cell, and where to forward an event that reached another. nil: the hash exchange
        /// alone places orders (one deployment, or cells configured without the list).
        package var cells: CellAssignment?
        /// The consistent-hash exchange that routes each order to one cell by its `order_id` header.
        package var cellsExchange: String { exchange + ".cells" }
        package var deadLetterExchange: String { exchange + ".dlx" }
        package var deadLetterQueue: String { queue + ".dead-letter" }
    }

    package struct Postgres: Sendable {
        /// `postgres.url`, as libpq parsed it.
        package var connection: PostgresConfiguration
        package var poolSize: Int = 8
        package var statementCacheSize: Int = 256
        package var stateCacheSize: Int = 4096
        /// `postgres.reportingUrl`: where `livedelivery report` reads (a hot standby), if not `connection`.
        package var reporting: PostgresConfiguration?
        package init(connection: PostgresConfiguration) { self.connection = connection }

        /// The worker's pool: `connection` with the pool's size, cache and name set.
        package func client(applicationName: String) -> PostgresConfiguration {
            var configuration = connection
            configuration.poolSize = poolSize
            configuration.statementCacheSize = statementCacheSize
            configuration.applicationName = applicationName
            return configuration
        }
    }

    /// One entry of apns-apps.json: `{"bundleID","teamID","keyID","keyFile","environment"}`.
    package struct App: Sendable, Hashable, Codable {
        package var bundleID: String
        package var teamID: String
        package var keyID: String
        package var keyFile: String
        package var environment: String
        package init(bundleID: String, teamID: String, keyID: String, keyFile: String, environment: String) {
            self.bundleID = bundleID
            self.teamID = teamID
            self.keyID = keyID
            self.keyFile = keyFile
            self.environment = environment
        }
    }

    package struct APNs: Sendable {
        package var apps: [App] = []
        package var appsFile: String
        package var baseURL: String?
        /// Where broadcasts go (default: the base URL).
        package var broadcastURL: String?
        /// Where broadcast channels are created and deleted (default: `baseURL` when set, else Apple's
        /// channel management host of each app's environment).
        package var channelsURL: String?
        package var caFile: String?
        package var requestTimeout: Duration = .seconds(15)
        /// libcurl threads per host; nil: one per core, at most one per connection.
        package var eventLoops: Int? = 1
        /// `apns.eventLoops` as written: 0 for one per core.
        var eventLoopsSetting: Int {
            get { eventLoops ?? 0 }
            set { eventLoops = newValue == 0 ? nil : newValue }
        }
        package init(appsFile: String) { self.appsFile = appsFile }
    }

    package struct HTTP: Sendable {
        package var host: String = "127.0.0.1"
        package var port: Int = 9090
        package var portFile: String?
        package init() {}
    }

    package struct Dispatcher: Sendable {
        package var batchSize: Int = 250
        /// Room for the pushes of two full consumer batches (`amqp.batchSize`, 250 by default): one
        /// batch's while the previous batch's are sent and recorded.
        package var concurrency: Int = 512
        /// How long the consumer waits, at most, for the dispatcher to have room for a batch's pushes
        /// (``PushCapacity/waitForRoom(_:)``); 0: it never waits.
        package var handoffWait: Duration = .milliseconds(100)
        package var lease: Duration = .seconds(60)
        package var poll: Duration = .seconds(1)
        package var maxAttempts: Int = 8
        package var backoffBase: Duration = .seconds(1)
        package var backoffMax: Duration = .seconds(300)
        package var pause: Duration = .seconds(300)
        package init() {}
    }

    /// The per-device push-to-start limit, counted from the starts APNs accepted in the window
    /// plus the starts waiting in the outbox.
    package struct PushToStart: Sendable, Hashable {
        package var maxStartsPerDevice: Int = 5
        package var window: Duration = .seconds(600)
        package init() {}
    }

    package struct Retention: Sendable {
        /// The least `days` other than 0: the upkeep functions refuse a worker's login less (sql/122), so that a
        /// worker's credentials cannot wipe the history, the inbox that de-duplicates events included.
        package static let minimumDays = 7
        package var days: Int = 30
        package var interval: Duration = .seconds(300)
        package init() {}
    }

    package struct Sweeper: Sendable {
        package var interval: Duration = .seconds(5)
        package var batchSize: Int = 200
        package init() {}
    }

    package var configDirectory: String
    package var amqp: AMQP
    /// For a cell added to a deployment (`cell.takeOverFrom`): the cells it was added to and their databases,
    /// where the orders it now holds were (``CellHandover``). nil: nothing to take over.
    var cellHandover: CellHandover.Sources?
    package var postgres: Postgres
    package var apns: APNs
    package var http = HTTP()
    package var workerID: String
    package var logLevel: String = "info"
    package var logFormat: String = "logfmt"
    package var dispatcher = Dispatcher()
    package var sweeper = Sweeper()
    package var retention = Retention()
    package var pushToStart = PushToStart()
    package var migrationsDirectory: String = "sql"
    /// `metrics.sampleSeconds`.
    package var metricsSampleInterval: Duration = .seconds(15)
    package var tracking: TrackingConfiguration
    /// Where each secret key's value came from (`environment LIVEDELIVERY_POSTGRES_URL`, the file a
    /// `…_FILE` variable names, livedelivery.json), for `check-config`; never the value.
    package var secretSources: [String: String] = [:]

    package init(
        configDirectory: String, amqp: AMQP, postgres: Postgres, apns: APNs, workerID: String,
        tracking: TrackingConfiguration
    ) {
        self.configDirectory = configDirectory
        self.amqp = amqp
        self.postgres = postgres
        self.apns = apns
        self.workerID = workerID
        self.tracking = tracking
    }

    package static let environmentPrefix = "livedelivery"
    package static let fileName = "livedelivery.json"
    package static let appsFileName = "apns-apps.json"

    /// The reader: `overrides` > environment (`LIVEDELIVERY_…`) > `$CONFIG_DIR/livedelivery.json`.
    ///
    /// It reads the `…_FILE` secrets, so it first makes the process non-dumpable (``ProcessHardening``): every
    /// command that reads its configuration is hardened before its first secret, by construction.
    package static func makeReader(
        environment: [String: String] = ProcessInfo.processInfo.environment,
        overrides: [String: String] = [:]
    ) async throws(LiveDeliveryError) -> ConfigReader {
        ProcessHardening.makeNonDumpable()
        let directory =
            overrides["config.dir"] ?? environment["LIVEDELIVERY_CONFIG_DIR"].flatMap { $0.isEmpty ? nil : $0 }
            ?? DefaultConfiguration.directoryName
        let secretKeys = keys.filter(\.secret)
        var secrets = Set(secretKeys.map(\.environmentVariable))
        // Overrides are text (command-line flags): parsed like environment variables.
        var flags: [String: String] = [:]
        for (key, value) in overrides { flags[environmentName(key)] = value }
        var values: [AbsoluteConfigKey: ConfigValue] = [:]
        // A secret may come from a file that `…_FILE` names (Docker and Kubernetes secrets); where each came
        // from is kept for `check-config`, never its value.
        var environment = environment
        for key in secretKeys {
            let source = try SecretFiles.resolve(key, flags: flags, environment: &environment)
            if let source {
                values[AbsoluteConfigKey(ConfigKey(SecretFiles.sourcePrefix + key.name))] = ConfigValue(
                    .string(source), isSecret: false)
            }
        }
        secrets.formUnion(try SecretFiles.resolveCells(environment: &environment))
        values[AbsoluteConfigKey(ConfigKey("config.dir"))] = ConfigValue(.string(directory), isSecret: false)
        // As written (not resolved), so that problems name the file as the operator knows it.
        let file = directory.hasSuffix("/") ? directory + fileName : directory + "/" + fileName
        let reporter = ConversionProblems(file: file)
        values[AbsoluteConfigKey(ConfigKey(ConversionProblems.idKey))] = ConfigValue(
            .string(reporter.id), isSecret: false)
        ConversionProblems.register(reporter)
        let fileProvider: FileProvider<JSONSnapshot>
        do {
            fileProvider = try await FileProvider<JSONSnapshot>(
                config: ConfigReader(
                    provider: InMemoryProvider(values: [
                        "filePath": ConfigValue(.string(file), isSecret: false),
                        "allowMissing": ConfigValue(.bool(true), isSecret: false),
                    ])))
        } catch {
            throw LiveDeliveryError(.invalidConfiguration, "\(file) is not a valid JSON configuration file")
        }
        return ConfigReader(
            providers: [
                InMemoryProvider(name: "internal", values: values),
                EnvironmentVariablesProvider(
                    environmentVariables: flags, secretsSpecifier: .specific(secrets)
                ).prefixKeys(with: ConfigKey(environmentPrefix)),
                EnvironmentVariablesProvider(
                    environmentVariables: environment, secretsSpecifier: .specific(secrets)
                ).prefixKeys(with: ConfigKey(environmentPrefix)),
                fileProvider,
            ],
            accessReporter: reporter)
    }

    /// Reads and validates everything; every problem is reported at once.
    package static func load(config: ConfigReader) throws(LiveDeliveryError) -> WorkerConfiguration {
        let problems = ProblemList()
        let reporter = config.string(forKey: ConfigKey(ConversionProblems.idKey)).flatMap(ConversionProblems.lookup)
        reporter?.reset()
        let reader = KeyReader(config: config, problems: problems)
        var configuration = defaults
        for key in keys { key.read(&configuration, reader) }
        if (1..<Retention.minimumDays).contains(configuration.retention.days) {
            problems.add(
                "retention.days must be 0 (keep everything) or at least \(Retention.minimumDays) (is \(configuration.retention.days)): the database's upkeep functions keep at least that much history (sql/122)"
            )
        }
        for key in keys where key.secret {
            configuration.secretSources[key.name] = SecretFiles.source(of: key, in: config)
        }
        configuration.apns.apps = loadApps(file: configuration.apns.appsFile, problems: problems)
        let tracking = loadTracking(directory: configuration.configDirectory, problems: problems)
        problems.add(contentsOf: reporter?.problems ?? [])
        guard problems.items.isEmpty, let tracking else {
            throw LiveDeliveryError(
                .invalidConfiguration, "the configuration is not valid", problems: problems.items)
        }
        configuration.tracking = tracking
        return configuration
    }

    /// The `amqp.*` keys, each read and checked as ``load(config:)`` reads them; their problems go to
    /// `problems`.
    static func readAMQP(_ config: ConfigReader, problems: ProblemList) -> AMQP {
        let reader = KeyReader(config: config, problems: problems)
        var configuration = defaults
        for key in keys where key.name.hasPrefix("amqp.") { key.read(&configuration, reader) }
        return configuration.amqp
    }

    /// The `amqp.*` keys alone, for a command that needs nothing else (`migrate`'s topology).
    package static func loadAMQP(config: ConfigReader) throws(LiveDeliveryError) -> AMQP {
        let problems = ProblemList()
        let amqp = readAMQP(config, problems: problems)
        guard problems.items.isEmpty else {
            throw LiveDeliveryError(.invalidConfiguration, "the configuration is not valid", problems: problems.items)
        }
        return amqp
    }

    /// `amqp.urls` (a list) or, without it, `amqp.url`, parsed. Errors name the key and the URL's
    /// position, never the URL's text.
    package static func readEndpoints(_ config: ConfigReader) throws(LiveDeliveryError) -> AMQPEndpoints {
        let key: String
        let urls: [String]
        if let list = config.stringArray(forKey: "amqp.urls", isSecret: true), !list.isEmpty {
            (key, urls) = ("amqp.urls", list)
        } else if let url = config.string(forKey: "amqp.url", isSecret: true), !url.isEmpty {
            (key, urls) = ("amqp.url", [url])
        } else {
            throw LiveDeliveryError(
                .invalidConfiguration,
                "amqp.urls or amqp.url is required (environment \(environmentName("amqp.urls")) or \(environmentName("amqp.url")))"
            )
        }
        do {
            return try AMQPEndpoints(urls: urls)
        } catch {
            throw LiveDeliveryError(
                .invalidConfiguration,
                "\(key) (environment \(environmentName(key))): \(error.context ?? "not a valid AMQP URL")")
        }
    }

    /// `cell.all` and each listed cell's `cells.<name>.queue` and `cells.<name>.weight`, checked: names that may
    /// name a cell, none twice, this worker's `cell.name` among them; a queue for every other cell, none shared;
    /// this cell's queue `amqp.queue` and its weight `cell.weight` (a `cells.<name>.…` of its own must agree).
    /// nil without the list, or when it has problems (noted in `reader`).
    static func readCells(_ amqp: AMQP, _ reader: KeyReader) -> CellAssignment? {
        let names = (reader.config.stringArray(forKey: "cell.all") ?? [])
            .map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        guard !names.isEmpty else { return nil }
        let listKey = "cell.all (environment \(environmentName("cell.all")))"
        let problems = reader.problems
        let before = problems.items.count
        guard let own = amqp.cell else {
            problems.add("\(listKey) needs cell.name, the cell this worker belongs to")
            return nil
        }
        if !names.contains(own) {
            problems.add("\(listKey) must name this worker's own cell, \(own) (cell.name)")
        }
        var cells: [CellAssignment.Cell] = []
        for name in names {
            guard OrderRouting.isCellName(name) else {
                problems.add(
                    "\(listKey): \"\(EventDecoder.quoted(name))\" is not a cell name (1–32 of a–z, 0–9 and '-', not starting with '-')"
                )
                continue
            }
            guard !cells.contains(where: { $0.name == name }) else {
                problems.add("\(listKey): \(name) is listed twice")
                continue
            }
            let queueKey = "cells.\(name).queue"
            let weightKey = "cells.\(name).weight"
            let described = { (key: String) in
                "\(key) (environment \(environmentName(key.replacingOccurrences(of: "-", with: "_"))))"
            }
            var queue = reader.optional(queueKey)
            var weight = reader.config.int(forKey: ConfigKey(weightKey))
            if name == own {
                if let queue, queue != amqp.queue {
                    problems.add(
                        "\(described(queueKey)) is \(queue), but this cell's queue (amqp.queue) is \(amqp.queue): set one of them, or the same"
                    )
                }
                queue = amqp.queue
                let ownWeight = reader.config.int(forKey: "cell.weight")
                if let weight, let ownWeight, weight != ownWeight {
                    problems.add(
                        "\(described(weightKey)) is \(weight), but cell.weight is \(ownWeight): set one of them, or the same"
                    )
                }
                weight = weight ?? amqp.cellWeight
            }
            guard let queue else {
                problems.add(
                    "\(described(queueKey)) is required: cell \(name)'s events queue, where the events of its orders are forwarded"
                )
                continue
            }
            let value = weight ?? 1
            guard CellAssignment.weights.contains(value) else {
                problems.add(
                    "\(described(weightKey)) must be between \(CellAssignment.weights.lowerBound) and \(CellAssignment.weights.upperBound) (is \(value))"
                )
                continue
            }
            if let other = cells.first(where: { $0.queue == queue }) {
                problems.add(
                    "\(described(queueKey)) is \(queue), as cells.\(other.name).queue is: each cell has a queue of its own"
                )
                continue
            }
            cells.append(CellAssignment.Cell(name: name, weight: value, queue: queue))
        }
        guard problems.items.count == before else { return nil }
        return CellAssignment(cells)
    }

    /// `cell.takeOverFrom`, checked: cells of `cell.all` other than this one, each with its database at
    /// `cells.<name>.postgresUrl`. nil without it, or when it has problems (noted in `reader`).
    static func readHandover(_ amqp: AMQP, _ reader: KeyReader) -> CellHandover.Sources? {
        let names = (reader.config.stringArray(forKey: "cell.takeOverFrom") ?? [])
            .map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        guard !names.isEmpty else { return nil }
        let listKey = "cell.takeOverFrom (environment \(environmentName("cell.takeOverFrom")))"
        guard let cells = amqp.cells, let own = amqp.cell else {
            reader.problems.add("\(listKey) needs cell.all, the deployment's cells, and cell.name")
            return nil
        }
        let before = reader.problems.items.count
        var previous: [CellAssignment.Cell] = []
        var databases: [String: PostgresConfiguration] = [:]
        for name in names {
            guard let cell = cells.cell(named: name), name != own else {
                reader.problems.add("\(listKey): \"\(EventDecoder.quoted(name))\" is not another cell of cell.all")
                continue
            }
            guard !previous.contains(where: { $0.name == name }) else {
                reader.problems.add("\(listKey): \(name) is listed twice")
                continue
            }
            do throws(LiveDeliveryError) {
                databases[name] = try readPostgres(reader.config, key: "cells.\(name).postgresUrl")
                previous.append(cell)
            } catch {
                reader.problems.add("\(error.message): the database of cell \(name), whose orders this cell takes over")
            }
        }
        guard reader.problems.items.count == before, !previous.isEmpty else { return nil }
        return CellHandover.Sources(previous: CellAssignment(previous), databases: databases)
    }

    /// A libpq connection string at `key`, parsed by libpq. Errors name the key and libpq's reason,
    /// never the string's text.
    package static func readPostgres(
        _ config: ConfigReader, key: String = "postgres.url"
    ) throws(LiveDeliveryError) -> PostgresConfiguration {
        guard let text = config.string(forKey: ConfigKey(key), isSecret: true), !text.isEmpty else {
            throw LiveDeliveryError(.invalidConfiguration, "\(key) is required (environment \(environmentName(key)))")
        }
        do {
            return try PostgresConfiguration(text)
        } catch {
            throw LiveDeliveryError(
                .invalidConfiguration, "\(key) (environment \(environmentName(key))): \(error.message ?? "not valid")")
        }
    }

    static func environmentName(_ key: String) -> String {
        var name = "LIVEDELIVERY"
        for component in key.split(separator: ".") {
            var part = ""
            var previousLower = false
            for character in component {
                if previousLower && character.isUppercase { part.append("_") }
                previousLower = character.isLowercase
                part.append(character)
            }
            name += "_" + part.uppercased()
        }
        return name
    }

    static func defaultWorkerID() -> String {
        "\(ProcessInfo.processInfo.hostName)-\(ProcessInfo.processInfo.processIdentifier)"
    }

    package static func loadTracking(directory: String, problems: ProblemList) -> TrackingConfiguration? {
        let folder = URL(fileURLWithPath: directory, isDirectory: true)
        let policyURL = folder.appendingPathComponent(DefaultConfiguration.policyFileName)
        let mappingURL = folder.appendingPathComponent(DefaultConfiguration.mappingFileName)
        guard let mapping = try? Data(contentsOf: mappingURL) else {
            problems.add("\(mappingURL.path): cannot read it (set config.dir, environment LIVEDELIVERY_CONFIG_DIR)")
            return nil
        }
        let policy = try? Data(contentsOf: policyURL)
        do {
            return try DefaultConfiguration.load(policyJSON: policy.map { Array($0) }, mappingJSON: Array(mapping))
        } catch {
            // The core names the file only (`policy.json: statuses…`); the folder makes it findable.
            let prefix = directory.hasSuffix("/") ? directory : directory + "/"
            problems.add(
                contentsOf: error.problems.map { problem in
                    [DefaultConfiguration.policyFileName, DefaultConfiguration.mappingFileName]
                        .contains { problem.hasPrefix($0 + ":") } ? prefix + problem : problem
                })
            return nil
        }
    }

    /// Reads apns-apps.json. Every problem names the file and the entry's path in it (`[0].keyFile`).
    /// A value of the wrong type is never quoted: it may be key text pasted into the wrong field.
    static func loadApps(file: String, problems: ProblemList) -> [App] {
        guard let data = FileManager.default.contents(atPath: file) else {
            let reason = FileManager.default.fileExists(atPath: file) ? "cannot read it" : "no such file"
            problems.add(
                "\(file): \(reason): the APNs apps file (set apns.appsFile, environment LIVEDELIVERY_APNS_APPS_FILE)")
            return []
        }
        let apps: [App]
        do {
            apps = try JSONDecoder().decode([App].self, from: data)
        } catch let error as DecodingError {
            problems.add("\(file): \(appsDecodingProblem(error))")
            return []
        } catch {
            problems.add("\(file): not valid JSON")
            return []
        }
        // Relative key files are relative to the apps file's folder, kept as text for the messages.
        let folder = (file as NSString).deletingLastPathComponent
        var seen = Set<String>()
        var resolved: [App] = []
        for (index, var app) in apps.enumerated() {
            let path = "\(file): [\(index)]"
            if app.bundleID.isEmpty || app.teamID.isEmpty || app.keyID.isEmpty {
                problems.add("\(path): bundleID, teamID and keyID must not be empty")
            }
            if !["production", "sandbox"].contains(app.environment) {
                problems.add("\(path).environment: must be production or sandbox")
            }
            if !seen.insert("\(app.bundleID) \(app.environment)").inserted {
                problems.add("\(path): \(app.bundleID) (\(app.environment)) is listed twice")
            }
            let written = app.keyFile
            if !app.keyFile.hasPrefix("/") && !folder.isEmpty { app.keyFile = folder + "/" + app.keyFile }
            if written.isEmpty {
                problems.add("\(path).keyFile: must not be empty")
            } else if !FileManager.default.fileExists(atPath: app.keyFile) {
                // The shipped file on a fresh clone ends here: keys are never committed.
                problems.add(
                    "\(path).keyFile: no key at \(app.keyFile): put app \(app.bundleID)'s APNs key there "
                        + "(the AuthKey_\(app.keyID).p8 file Apple issued for key ID \(app.keyID), "
                        + "team \(app.teamID)), "
                        + "or point keyFile at it. A demo key, which only the APNs simulator accepts: "
                        + "apns-sim keygen --out \(app.keyFile) (scripts/demo creates "
                        + "Config/keys/AuthKey_SIMKEY0001.p8 this way)")
            } else if !FileManager.default.isReadableFile(atPath: app.keyFile) {
                problems.add("\(path).keyFile: cannot read \(app.keyFile) (permissions?)")
            }
            resolved.append(app)
        }
        return resolved
    }

    /// Where and why apns-apps.json does not have the expected shape, without any value from it.
    static func appsDecodingProblem(_ error: DecodingError) -> String {
        func path(_ codingPath: [any CodingKey]) -> String {
            var text = ""
            for key in codingPath {
                if let index = key.intValue {
                    text += "[\(index)]"
                } else {
                    text += (text.isEmpty ? "" : ".") + key.stringValue
                }
            }
            return text
        }
        let shape = "an array of {\"bundleID\",\"teamID\",\"keyID\",\"keyFile\",\"environment\"}"
        switch error {
        case .keyNotFound(let key, let context):
            let at = path(context.codingPath + [key])
            return "\(at): is missing (each entry is {\"bundleID\",\"teamID\",\"keyID\",\"keyFile\",\"environment\"})"
        case .typeMismatch(let type, let context), .valueNotFound(let type, let context):
            let at = path(context.codingPath)
            let expected = type == String.self ? "a string" : type is [Any].Type ? shape : "\(type)"
            return at.isEmpty ? "must be \(shape)" : "\(at): must be \(expected)"
        case .dataCorrupted(let context):
            return context.codingPath.isEmpty ? "not valid JSON" : "\(path(context.codingPath)): not valid"
        @unknown default:
            return "must be \(shape)"
        }
    }

    /// A summary without secrets (check-config prints it): every key's value in effect, then the apps
    /// and the policy.
    package var summary: [String] {
        var lines = Self.keys.compactMap { key in
            key.show.map { show in
                // `amqp.urls` shows the nodes whichever of it and `amqp.url` set them.
                var source = key.secret ? secretSources[key.name] : nil
                if key.name == "amqp.urls", source == nil { source = secretSources["amqp.url"] }
                return "\(key.name): \(show(self))" + (source.map { " (from \($0))" } ?? "")
            }
        }
        for app in apns.apps {
            lines.append("app \(app.bundleID) (\(app.environment)) team \(app.teamID) key \(app.keyID)")
        }
        lines.append("policy: \(tracking.policy.statuses.count) statuses; mapping: \(tracking.mapping.attributesType)")
        return lines
    }
}

/// Collects problems from several places.
package final class ProblemList: Sendable {
    private let storage = Mutex<[String]>([])
    package init() {}
    package func add(_ problem: String) { storage.withLock { $0.append(problem) } }
    package func add(contentsOf problems: [String]) { storage.withLock { $0 += problems } }
    package var items: [String] { storage.withLock { $0 } }
}

/// Records values that could not be converted (e.g. `LIVEDELIVERY_AMQP_PREFETCH=abc`), which
/// swift-configuration otherwise replaces by the default silently. One per reader, found again
/// through a marker key that ``WorkerConfiguration/makeReader(environment:overrides:)`` sets.
final class ConversionProblems: AccessReporter {
    static let idKey = "internal.readerID"
    private static let registry = Mutex<[String: ConversionProblems]>([:])

    static func register(_ reporter: ConversionProblems) { registry.withLock { $0[reporter.id] = reporter } }
    static func lookup(_ id: String) -> ConversionProblems? { registry.withLock { $0[id] } }

    init(file: String = WorkerConfiguration.fileName) { self.file = file }

    let id = UUID().uuidString
    /// The livedelivery.json this reader reads, named in its problems.
    let file: String
    private let collected = Mutex<[String]>([])

    var problems: [String] { collected.withLock { $0 } }
    func reset() { collected.withLock { $0 = [] } }

    func report(_ event: AccessEvent) {
        var message: String?
        if event.conversionError != nil {
            message = "\(event.metadata.key) has a value that is not a valid \(event.metadata.valueType)"
        } else {
            for result in event.providerResults {
                if case .failure = result.result {
                    let key = "\(event.metadata.key)"
                    let type = event.metadata.valueType
                    if result.providerName.contains("Environment") {
                        let variable = WorkerConfiguration.environmentName(key)
                        message =
                            "\(key): the value from the environment variable \(variable) (or the command line) "
                            + "is not a valid \(type)"
                    } else if result.providerName.contains("File") {
                        message = "\(file): \(key): not a valid \(type)"
                    } else {
                        message = "\(key): the value is not a valid \(type)"
                    }
                }
            }
        }
        guard let message else { return }
        collected.withLock { if !$0.contains(message) { $0.append(message) } }
    }
}
