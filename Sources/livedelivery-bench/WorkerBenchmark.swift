import APNsSimulator
import ArgumentParser
import ChildProcesses
import Crypto
import Foundation
import LiveDeliveryCore
import LiveDeliveryJSON
import LiveDeliveryTime
import Logging
import Postgres
import RabbitMQ
import TestSupport
import WorkerHarness

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `livedelivery-bench worker`: the whole pipeline on this machine. RabbitMQ → N `livedelivery run` processes →
/// PostgreSQL → the in-process APNs simulator, with programmatically generated events.
///
/// 1. Backlog rounds: events are published while the workers are stopped, then the workers start and the
///    clock runs until every event is in the inbox and every push has reached the simulator (outbox empty):
///    end-to-end events/s. One round per `--scales` size (the number of tracked orders), with the same
///    number of update events each time, so the cost per event can be compared across sizes.
/// 2. Latency: status updates at a fixed offered rate (`--rate`) to orders whose last push is older than a
///    second; for each, publish call → the simulator receiving the push (p50/p99).
/// 3. Worker RSS (VmRSS and peak VmHWM from /proc), and `pgbench` running the worker's per-event SQL (an
///    event's transaction and its push's transaction) on the same database in the same run.
///
/// `--topologies` runs all of it once per topology, in the same command, and closes with a table that
/// sets each beside the first: `single` (the broker and database of `scripts/services`), `cluster` (the
/// three-node RabbitMQ cluster of `livedelivery-servers cluster`), `replica` and `replica-sync` (the
/// primary/standby pair of `livedelivery-servers replica`, asynchronous and synchronous), `managed` and
/// `managed-default` (the pair pg_auto_failover runs, `livedelivery-servers managed`, its monitor's health checks
/// tightened or as shipped). With
/// `--failover`, each non-single topology then loses a server under a steady stream of events, and the
/// bench prints how long processing stopped: from `kill -9` of the broker node the worker is attached
/// to, to the first event published after it being processed; from the standby's promotion (after the
/// primary's immediate stop), to the first event processed on the new primary; from `kill -9` of a managed
/// primary to the first event processed on the node its monitor promoted.
struct WorkerBenchmark: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "worker",
        abstract: "End-to-end events/s, publish-to-push latency, worker RSS and pgbench on the same SQL."
    )

    /// One: each worker is already concurrent (a consumer batch, a claim loop with 200 pushes in flight, a
    /// recorder, libcurl's and the broker's threads). On this 2-core machine a second process measured the
    /// same throughput at two to four times the p99 (contention for the cores and for the same orders' rows).
    @Option(help: "Worker processes (2 or more measures scaling out on one machine).")
    var workers = 1

    @Option(help: "Tracked-order counts, one backlog round each (comma-separated, increasing).")
    var scales = "10000,100000"

    @Option(help: "Update events per backlog round (one per order, on distinct orders).")
    var updates = 10000

    @Option(help: "Offered rate of the latency phase, events/s.")
    var rate = 1000

    @Option(help: "Seconds of the latency phase.")
    var latencySeconds = 10

    /// The workers start just before the latency phase (they are stopped between rounds), and their
    /// first second is spent opening connections and preparing statements: a steady-state p99 leaves
    /// it out. The per-second p99s still show every second.
    @Option(help: "Leading seconds of the latency phase published at the rate but left out of p50/p99.")
    var warmupSeconds = 2

    @Option(help: "Seconds of the pgbench run (0 skips it).")
    var pgbenchSeconds = 10

    @Option(
        help: """
            Comma-separated, each measured in turn: single, cluster (livedelivery-servers cluster), replica, \
            replica-sync (livedelivery-servers replica, asynchronous or synchronous standby), managed, \
            managed-default (livedelivery-servers managed: pg_auto_failover, its monitor's health checks tightened \
            or as shipped).
            """)
    var topologies = "single"

    @Flag(
        help: "After each cluster or replica topology, kill a broker node or fail the database over; print the pause.")
    var failover = false

    @Flag(
        help: """
            Count the workers' malloc calls per event in each measured backlog round, every thread, with a uprobe on \
            libc's malloc (root and perf): a count, and the round's times are slowed by it.
            """)
    var countMallocs = false

    @OptionGroup var deployment: DeploymentOptions

    func run() async throws {
        let sizes = scales.split(separator: ",").compactMap { Int($0.trimmingCharacters(in: .whitespaces)) }
        guard !sizes.isEmpty, sizes == sizes.sorted(), sizes.allSatisfy({ $0 >= updates }) else {
            throw ValidationError("--scales: increasing sizes, each at least --updates")
        }
        guard warmupSeconds >= 0, warmupSeconds < latencySeconds else {
            throw ValidationError("--warmup-seconds: at least 0 and less than --latency-seconds")
        }
        // Each latency event goes to an order of its own (its push is told apart by the device token).
        guard rate > 0, rate * latencySeconds <= sizes.last! else {
            throw ValidationError(
                "--rate × --latency-seconds (\(rate * latencySeconds) events) must not exceed the tracked orders "
                    + "(\(sizes.last!), the last of --scales): each latency event goes to an order of its own")
        }
        let chosen = try topologies.split(separator: ",").map { name in
            guard let topology = Topology(rawValue: name.trimmingCharacters(in: .whitespaces)) else {
                throw ValidationError(
                    "--topologies: single, cluster, replica, replica-sync, managed or managed-default (not \(name))")
            }
            return topology
        }
        var logger = Logger(label: "livedelivery-bench.worker")
        logger.logLevel = .warning
        var results: [(Topology, Figures)] = []
        for topology in chosen {
            let servers = try await topology.prepare(
                amqpURL: deployment.amqpURL, postgresURL: deployment.postgresURL)
            let bench = try await BenchEnvironment.start(
                workers: workers, amqpURL: servers.amqp, postgresURL: servers.postgres,
                workerPostgresURL: servers.workerPostgres,
                executable: deployment.executable,
                logger: logger)
            print("══ \(topology.title) ══")
            print("worker: \(workers) processes, database \(bench.databaseName), logs in \(bench.directory.path)")
            print(try await Durability.describe(bench.database))
            do {
                var figures = try await measure(bench, sizes: sizes)
                if failover, topology != .single {
                    figures.resume = try await bench.failoverRound(topology, orders: sizes.last!)
                }
                results.append((topology, figures))
            } catch {
                print("benchmark failed: \(error); logs in \(bench.directory.path)")
                await bench.shutdown(keep: true)
                throw error
            }
            await bench.shutdown(keep: deployment.keep)
        }
        if results.count > 1, let base = results.first?.1 {
            print("══ topologies beside \(results[0].0.rawValue) ══")
            for (topology, figures) in results {
                let name = topology.rawValue.padding(toLength: 12, withPad: " ", startingAt: 0)
                let resumed =
                    figures.resume.map { String(format: ", processing resumed %.2f s after the fault", $0) } ?? ""
                print(
                    name
                        + String(
                            format:
                                " backlog %6.0f events/s (%3.0f %% of the first), latency p50 %5.1f ms, p99 %6.1f ms",
                            figures.backlog, figures.backlog / base.backlog * 100, figures.p50 * 1000,
                            figures.p99 * 1000)
                        + resumed)
            }
        }
    }

    /// What the closing table compares.
    struct Figures {
        var backlog = 0.0
        var p50 = 0.0
        var p99 = 0.0
        var resume: Double?
    }

    private func measure(_ bench: BenchEnvironment, sizes: [Int]) async throws -> Figures {
        var figures = Figures()
        var tracked = 0
        var perEvent: [(Int, Double)] = []
        var splits: [CPUSplit] = []
        for size in sizes {
            // Grow to `size` tracked orders (token + confirmed each), then a round of `updates` status updates.
            if size > tracked {
                let grow = (tracked..<size).flatMap { bench.newOrder($0) }
                let (rate, _, _) = try await bench.backlogRound(grow)
                print(
                    String(
                        format: "populate %7d → %7d orders: %7d events, %7.0f events/s end to end", tracked, size,
                        grow.count, rate))
                tracked = size
                let settled = try await bench.settle()
                print(
                    String(
                        format:
                            "         (the populated database settled before the measured round: VACUUM (ANALYZE), CHECKPOINT and sync, %.1f s, not counted)",
                        settled))
            }
            let picked = (0..<tracked).shuffled().prefix(updates)
            let round = picked.map { bench.statusUpdate(order: $0) }
            let (rate, cost, split) = try await bench.backlogRound(round, countMallocs: countMallocs)
            figures.backlog = rate
            perEvent.append((size, cost * 1e6))
            splits.append(split)
            print(
                String(
                    format: "backlog  %7d updates at %7d tracked orders: %7.0f events/s end to end (%.0f µs/event)",
                    round.count, size, rate, cost * 1e6))
        }
        if let first = perEvent.first, let last = perEvent.last, perEvent.count > 1 {
            print(
                String(
                    format: "cost per event: %.0f µs at %d orders, %.0f µs at %d orders (×%.2f)", first.1, first.0,
                    last.1, last.0, last.1 / first.1))
            // The machine's speed moves every process's CPU per event alike; a process whose figure grows
            // beyond the others' is one whose work grows with the number of orders.
            if let a = splits.first, let b = splits.last {
                print(
                    String(
                        format:
                            "         (CPU per event by process, %d → %d orders: workers ×%.2f, PostgreSQL ×%.2f, RabbitMQ ×%.2f, this bench (the APNs simulator) ×%.2f)",
                        first.0, last.0, b.workers / a.workers, b.postgres / a.postgres, b.rabbitmq / a.rabbitmq,
                        b.bench / a.bench))
            }
        }

        let settled = try await bench.settle()
        print(
            String(
                format:
                    "         (settled before the latency phase: VACUUM (ANALYZE), CHECKPOINT and sync, %.1f s, not counted)",
                settled))
        let all = try await bench.latencyRound(orders: tracked, rate: rate, seconds: latencySeconds)
        let samples = all.filter { $0.offset >= Double(warmupSeconds) }
        if samples.isEmpty {
            print("latency: no samples")
        } else {
            let sorted = samples.map(\.latency).sorted()
            figures.p50 = percentile(sorted, 0.5)
            figures.p99 = percentile(sorted, 0.99)
            print(
                String(
                    format:
                        "latency  publish → push at %d events/s offered, %d s after %d s of warm-up: p50 %.1f ms, p99 %.1f ms, max %.1f ms (%d samples)",
                    rate, latencySeconds - warmupSeconds, warmupSeconds, percentile(sorted, 0.5) * 1000,
                    percentile(sorted, 0.99) * 1000,
                    sorted.last! * 1000, sorted.count))
            // Each second on its own, warm-up included: the workers start just before the first.
            print("         (p99 per second of publishing, ms: \(p99PerSecond(all)))")
        }
        for worker in bench.workers {
            let (rss, peak) = worker.memoryKilobytes ?? (0, 0)
            print("RSS      \(worker.name): \(rss / 1024) MB now, peak \(peak / 1024) MB (VmRSS / VmHWM)")
        }
        if pgbenchSeconds > 0 {
            let tps = try await bench.pgbench(seconds: pgbenchSeconds, orders: tracked)
            print(
                String(
                    format:
                        "pgbench  the worker's per-event SQL (event + push transactions), prepared, 4 clients, %d s: %.0f events/s",
                    pgbenchSeconds, tps))
        }
        return figures
    }
}

/// The servers a deployment benchmark (`worker`, `soak`) runs against, and its workers' executable.
struct DeploymentOptions: ParsableArguments {
    @Option(help: "AMQP URL (default: $LIVEDELIVERY_AMQP_URL or the local services broker).")
    var amqpURL =
        ProcessInfo.processInfo.environment["LIVEDELIVERY_AMQP_URL"]
        ?? "amqp://livedelivery:livedelivery@127.0.0.1:56720/%2F"

    @Option(help: "PostgreSQL server URL; a fresh database is created on it (default: $LIVEDELIVERY_POSTGRES_URL).")
    var postgresURL =
        ProcessInfo.processInfo.environment["LIVEDELIVERY_POSTGRES_URL"]
        ?? "postgresql://livedelivery:livedelivery@127.0.0.1:55432/livedelivery"

    @Option(help: "The livedelivery executable (default: next to this one).")
    var livedelivery: String?

    @Flag(help: "Keep the database, queues and logs afterwards.")
    var keep = false

    /// `--livedelivery`, else the `livedelivery` next to this executable.
    var executable: String {
        livedelivery
            ?? URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent()
            .appendingPathComponent("livedelivery").path
    }
}

/// One benchmark's deployment (the harness the end-to-end tests use too: database, simulator, key, worker
/// processes), and what the benchmark measures through it.
final class BenchEnvironment: @unchecked Sendable {
    // Mutated only from the benchmark's single sequential flow.
    let deployment: WorkerDeployment
    /// The superuser's client on the benchmark's database (CHECKPOINT, the statistics views).
    let database: PostgresClient
    let logger: Logger
    let workerCount: Int
    /// The running workers.
    private(set) var running: [RunningWorker] = []
    private var sequences: [Int: Int] = [:]

    var databaseName: String { deployment.databaseName }
    var directory: URL { deployment.directory }
    var simulator: RunningSimulator { deployment.simulator }
    /// The workers' login on the benchmark's database.
    var databaseURL: String { deployment.postgresURL }
    /// One AMQP URL, or a cluster's nodes, comma-separated.
    var amqpURL: String { deployment.amqpURL }
    var exchange: String { deployment.exchange }
    var queue: String { deployment.queue }
    var workers: [ChildProcess] { running.map(\.process) }

    private init(deployment: WorkerDeployment, database: PostgresClient, logger: Logger, workerCount: Int) {
        self.deployment = deployment
        self.database = database
        self.logger = logger
        self.workerCount = workerCount
    }

    /// Creates the database on `postgresURL`'s server; the workers reach it through `workerPostgresURL`'s
    /// (a failover URL naming the primary and its standby), or the same server.
    static func start(
        workers: Int, amqpURL: String, postgresURL: String, workerPostgresURL: String? = nil, executable: String,
        logger: Logger
    ) async throws -> BenchEnvironment {
        let deployment = try await WorkerDeployment.start(
            name: "bench_worker_\(UInt32.random(in: 0...UInt32.max))", amqpURL: amqpURL, serverURL: postgresURL,
            workerServerURL: workerPostgresURL, bundleID: "com.example.pizza", keyID: "BENCHKEY01",
            teamID: "BENCHTEAM1", executable: executable, workerLogLevel: "warning", logger: logger
        ) { simulator in
            simulator.recordLimit = 200_000
        }
        var configuration = try PostgresConfiguration(PostgresLogin.superuser.url(deployment.postgresURL))
        configuration.poolSize = 2
        let bench = BenchEnvironment(
            deployment: deployment, database: PostgresClient(configuration: configuration, logger: logger),
            logger: logger, workerCount: workers)
        // Let the workers declare the topology once, so that backlogs can be published while none runs.
        try await bench.startWorkers()
        try await bench.stopWorkers()
        return bench
    }

    func startWorkers() async throws {
        for index in 1...workerCount {
            running.append(try await deployment.startWorker("worker-\(index)"))
        }
    }

    /// The sum over the running workers of one Prometheus series (name and labels as exposed).
    /// Whether every push is answered: none in the outbox, none in a worker's memory (pushes handed over without a
    /// row, `sql/126`, which `livedelivery_pushes_in_flight` counts from their reservation to their recording).
    func allAnswered() async throws -> Bool {
        guard try await count("SELECT count(*) FROM (SELECT 1 FROM outbox LIMIT 1) AS any_row") == 0 else {
            return false
        }
        return await Self.pushesInFlight(ports: running.map(\.metricsPort)) == 0
    }

    /// The pushes the workers on these metrics ports hold in memory (`livedelivery_pushes_in_flight`); nil when
    /// one cannot be asked.
    static func pushesInFlight(ports: [Int]) async -> Double? {
        var total = 0.0
        for port in ports {
            guard
                let (data, _) = try? await URLSession.shared.data(
                    from: URL(string: "http://127.0.0.1:\(port)/metrics")!)
            else { return nil }
            let lines = String(decoding: data, as: UTF8.self).split(separator: "\n")
            total += sum(lines) { $0.hasPrefix("livedelivery_pushes_in_flight ") }
        }
        return total
    }

    func metric(_ series: String) async -> Double {
        Self.sum(await metricLines()) { $0.hasPrefix(series + " ") }
    }

    /// Every running worker's `/metrics` lines, one scrape each.
    private func metricLines() async -> [Substring] {
        var lines: [Substring] = []
        for port in running.map(\.metricsPort) {
            guard
                let (data, _) = try? await URLSession.shared.data(
                    from: URL(string: "http://127.0.0.1:\(port)/metrics")!)
            else { continue }
            lines += String(decoding: data, as: UTF8.self).split(separator: "\n")
        }
        return lines
    }

    /// The sum of the values of the lines chosen.
    private static func sum(_ lines: [Substring], where chosen: (Substring) -> Bool) -> Double {
        lines.filter(chosen).reduce(0) { $0 + (Double($1.split(separator: " ").last ?? "") ?? 0) }
    }

    /// Count and total seconds of the workers' consumer batches and APNs requests, for the latency phase's
    /// breakdown.
    struct StageTimes {
        var batches = 0.0
        var batchSeconds = 0.0
        var requests = 0.0
        var requestSeconds = 0.0

        static func - (a: StageTimes, b: StageTimes) -> StageTimes {
            StageTimes(
                batches: a.batches - b.batches, batchSeconds: a.batchSeconds - b.batchSeconds,
                requests: a.requests - b.requests, requestSeconds: a.requestSeconds - b.requestSeconds)
        }
    }

    /// The four figures from one scrape of each worker; each metric summed over its labels.
    func stageTimes() async -> StageTimes {
        let lines = await metricLines()
        func total(_ name: String) -> Double {
            Self.sum(lines) { $0.hasPrefix(name + " ") || $0.hasPrefix(name + "{") }
        }
        return StageTimes(
            batches: total("livedelivery_batch_seconds_count"), batchSeconds: total("livedelivery_batch_seconds_sum"),
            requests: total("livedelivery_push_latency_seconds_count"),
            requestSeconds: total("livedelivery_push_latency_seconds_sum"))
    }

    func stopWorkers() async throws {
        for worker in workers { worker.signal(SIGTERM) }
        for worker in workers {
            let status = try await worker.waitForExit(timeout: .seconds(120))
            if status != 0 { print("note: \(worker.name) exited \(status) on SIGTERM") }
        }
        running = []
        deployment.forgetWorkers()
    }

    // MARK: Events

    private static let appleEpoch = 978_307_200.0

    func token(_ order: Int) -> String {
        var generator = SplitMix64(seed: UInt64(order) &* 0x9E37_79B9 &+ 17)
        return (0..<32).map { _ in String(format: "%02x", UInt8.random(in: 0...255, using: &generator)) }.joined()
    }

    /// A new order: its activity token and `confirmed` (an app-started activity, one update push).
    func newOrder(_ order: Int) -> [(String, [UInt8], String)] {
        sequences[order] = 1
        let now = Date()
        return [
            message(
                "activity.token",
                [
                    "type": "activity.token", "version": 1, "event_id": "o\(order)-tok",
                    "occurred_at": rfc3339(now.addingTimeInterval(-600)),
                    "order_id": "o\(order)", "activity_id": "act-\(order)", "device_id": "dev-\(order)",
                    "token": token(order),
                    "bundle_id": "com.example.pizza", "environment": "production",
                ]),
            statusMessage(order: order, sequence: 1, status: "confirmed", at: now.addingTimeInterval(-600)),
        ]
    }

    /// The next status update of an order, with a new ETA (so a push follows).
    func statusUpdate(order: Int, at date: Date = Date()) -> (String, [UInt8], String) {
        let sequence = (sequences[order] ?? 1) + 1
        sequences[order] = sequence
        return statusMessage(
            order: order, sequence: sequence, status: sequence.isMultiple(of: 2) ? "preparing" : "picked_up", at: date)
    }

    private func statusMessage(order: Int, sequence: Int, status: String, at date: Date) -> (String, [UInt8], String) {
        let eta = date.addingTimeInterval(Double(1200 + sequence * 60))
        return message(
            "order.status",
            [
                "type": "order.status", "version": 1, "event_id": "o\(order)-s\(sequence)",
                "occurred_at": rfc3339(date),
                "order_id": "o\(order)", "user_id": "u\(order)", "sequence": sequence, "status": status,
                "order_number": order, "merchant": ["name": "Merchant \(order % 97)"],
                "courier": ["name": "Courier \(order % 13)"],
                "eta": ["earliest": rfc3339(eta), "latest": rfc3339(eta.addingTimeInterval(600))],
            ])
    }

    private func message(_ type: String, _ body: [String: Any]) -> (String, [UInt8], String) {
        let data = try! JSONSerialization.data(withJSONObject: body, options: [.sortedKeys])
        return (type, Array(data), body["event_id"] as! String)
    }

    // MARK: Rounds

    func publish(_ messages: [(String, [UInt8], String)]) async throws {
        try await publishConfirmed(
            messages.map { ($0.0, $0.1, $0.2, nil) }, exchange: exchange, amqpURL: amqpURL, logger: logger)
    }

    /// Publishes the messages with no worker running, then starts the workers and, from the moment they are
    /// ready, times them until every event is in the inbox and the outbox is empty (every push answered).
    /// Events already processed while the workers were starting are not counted. Returns events/s, the
    /// seconds per event and each process's CPU per event.
    func backlogRound(
        _ messages: [(String, [UInt8], String)], countMallocs: Bool = false
    ) async throws -> (rate: Double, perEvent: Double, split: CPUSplit) {
        simulator.reset()
        // This round's events are those processed from now on (`processed_at` is the time the worker's
        // transaction began). Counting them through the `processed_at` index reads this round's rows
        // only; `count(*)` of the whole inbox read 2M rows at 1M orders, twice within the timed part
        // (0.13 s of PostgreSQL's CPU each, 26 µs per event of a 10k round), a cost of the bench that
        // grew with the size of the database it measures.
        guard let since = try await database.query("SELECT clock_timestamp()").first?.decode(Date.self, at: 0) else {
            throw ValidationError("PostgreSQL returned no clock_timestamp()")
        }
        let processed: PostgresQuery = "SELECT count(*) FROM inbox WHERE processed_at >= \(since)"
        let walBefore = try await walPosition()
        let rowsBefore = try await rowsWritten()
        try await publish(messages)
        try await startWorkers()
        let mallocs = countMallocs ? try await MallocCounter.start(pids: workers.map(\.pid)) : nil
        let clock = ContinuousClock()
        let start = clock.now
        let workersCPU = workers.compactMap(\.cpuSeconds).reduce(0, +)
        let machineCPU = ChildProcess.machineBusySeconds ?? 0
        let serversCPU = ServersCPU.now()
        let already = try await count(processed)
        // Polling `count(*)` of the inbox every 50 ms cost the database 20-95 ms a time at 160k-240k
        // rows: a good part of one core, taken from the workers, and more the larger the inbox. The
        // poll looks up the last events published instead (primary-key probes), then counts until all
        // are in, normally once.
        let last = messages.suffix(64).map(\.2)
        _ = try await poll("the backlog to be processed", timeout: 1800, interval: 0.05) { () -> Bool? in
            // Planned every run: a plan cached while the inbox was small scanned it whole later on.
            let query: PostgresQuery = "SELECT count(*) FROM inbox WHERE event_id = ANY (\(last)::text[])"
            return try await self.database.query(query.planned(.everyRun)).first?.decode(Int.self, at: 0) == last.count
                ? true : nil
        }
        _ = try await poll("the backlog in the inbox", timeout: 600, interval: 0.05) { () -> Bool? in
            try await self.count(processed) >= messages.count ? true : nil
        }
        let consumed = clock.now - start
        _ = try await poll("every push answered", timeout: 600, interval: 0.05) { () -> Bool? in
            try await self.allAnswered() ? true : nil
        }
        let elapsed = clock.now - start
        let walBytes = try await walBytes(since: walBefore)
        let seconds = elapsed.seconds
        let consumedSeconds = consumed.seconds
        let workersUsed = workers.compactMap(\.cpuSeconds).reduce(0, +) - workersCPU
        let machineUsed = (ChildProcess.machineBusySeconds ?? 0) - machineCPU
        let serversUsed = ServersCPU.now() - serversCPU
        let cachedReads = await metric(#"livedelivery_state_reads_total{source="cache"}"#)
        let fetchedReads = await metric(#"livedelivery_state_reads_total{source="database"}"#)
        let mallocCalls = try await mallocs?.stop()
        try await stopWorkers()
        let rows = try await rowsWritten(after: rowsBefore)
        let counted = Double(messages.count - already)
        if let mallocCalls {
            print(
                String(
                    format:
                        "         (malloc calls per event: workers %.1f, every thread, counted by a uprobe on libc's malloc from the workers' readiness to the outbox drained; the uprobe slows each call, so this round's times are not comparable)",
                    Double(mallocCalls) / counted))
        }
        // The whole server's WAL: the events that were processed before the clock started count here too.
        print(
            String(
                format:
                    "         (WAL: %.1f kB per event, %.1f MB in all: what a standby receives and an archive keeps)",
                walBytes / Double(messages.count) / 1000, walBytes / 1e6))
        // Row versions: every insert, update (HOT or not) and delete, by table (partitions under their parent).
        let perTable = rows.filter { $0.value > 0 }.sorted { $0.key < $1.key }
            .map { "\($0.key) " + String(format: "%.2f", $0.value / Double(messages.count)) }
        print(
            "         (rows written: "
                + String(format: "%.2f", rows.values.reduce(0, +) / Double(messages.count))
                + " per event: \(perTable.joined(separator: ", ")))")
        print(
            String(
                format:
                    "         (%d events before the clock started; all in the inbox after %.2f s, outbox empty after %.2f s)",
                already, consumedSeconds, seconds))
        // CPU time per event varies far less than elapsed time on a shared machine: the figure for A/B runs.
        print(
            String(
                format:
                    "         (CPU per event: workers %.0f µs, whole machine %.0f µs of %.0f µs × %d cores elapsed; order states read from the workers' cache %.0f, from the database %.0f)",
                workersUsed / counted * 1e6, machineUsed / counted * 1e6, seconds / counted * 1e6,
                ProcessInfo.processInfo.activeProcessorCount, cachedReads, fetchedReads))
        let split = CPUSplit(
            workers: workersUsed / counted, postgres: serversUsed.postgres / counted,
            rabbitmq: serversUsed.rabbitmq / counted, bench: serversUsed.bench / counted)
        let rest = machineUsed / counted - split.workers - split.postgres - split.rabbitmq - split.bench
        print(
            String(
                format:
                    "         (the machine's CPU per event by process: workers %.0f µs, PostgreSQL %.0f µs, RabbitMQ %.0f µs, this bench (the APNs simulator; the events were published before the clock started) %.0f µs, the rest (kernel work not charged to a process, other processes) %.0f µs)",
                split.workers * 1e6, split.postgres * 1e6, split.rabbitmq * 1e6, split.bench * 1e6, rest * 1e6))
        return (counted / seconds, seconds / counted, split)
    }

    /// Offered-rate status updates to distinct orders; for each, seconds from its publish call to the
    /// simulator receiving it, and when it was published (seconds after the first).
    func latencyRound(orders: Int, rate: Int, seconds: Int) async throws -> [(offset: Double, latency: Double)] {
        try await startWorkers()
        simulator.reset()
        let stagesBefore = await stageTimes()
        let total = rate * seconds
        let picked = Array((0..<orders).shuffled().prefix(total))
        let (publisher, _) = try await RabbitMQPublisher.connect(to: try AMQPEndpoints(urls: amqpURL), logger: logger)
        let exchange = self.exchange
        var published: [Int: Date] = [:]
        // The messages are built before the clock starts (each carries its planned publish time as
        // occurred_at), so that building them does not load the machine while latency is measured.
        let lead = 1.0
        let planned = Date().addingTimeInterval(lead)
        let messages = picked.enumerated().map { index, order in
            statusUpdate(order: order, at: planned.addingTimeInterval(Double(index) / Double(rate)))
        }
        let clock = ContinuousClock()
        let start = clock.now + .milliseconds(Int(max(0, planned.timeIntervalSinceNow) * 1000))
        let tick = 0.01
        let perTick = max(1, Int(Double(rate) * tick))
        var confirms: [(offset: Double, latency: Double)] = []
        let firstPublish = planned
        try await withThrowingTaskGroup(of: (Double, Double).self) { group in
            var index = 0
            var tickNumber = 0
            while index < picked.count {
                let due = start + .milliseconds(Int(Double(tickNumber) * tick * 1000))
                try await Task.sleep(until: due, clock: clock)  // pacing the offered rate, not synchronisation
                for position in index..<min(index + perTick, picked.count) {
                    let order = picked[position]
                    let message = messages[position]
                    let sent = Date()
                    published[order] = sent
                    group.addTask {
                        try await publisher.publish(
                            exchange: exchange, routingKey: message.0, body: message.1,
                            properties: RabbitMQMessageProperties(contentType: "application/json", messageID: message.2)
                        )
                        return (sent.timeIntervalSince(firstPublish), Date().timeIntervalSince(sent))
                    }
                }
                index += perTick
                tickNumber += 1
            }
            for try await confirm in group { confirms.append(confirm) }
        }
        if !confirms.isEmpty {
            let sorted = confirms.map(\.latency).sorted()
            print(
                String(
                    format: "         (publish → broker confirm: p50 %.1f ms, p99 %.1f ms; p99 per second, ms: ",
                    percentile(sorted, 0.5) * 1000, percentile(sorted, 0.99) * 1000) + p99PerSecond(confirms) + ")")
        }
        await publisher.close()
        let tokens = Dictionary(uniqueKeysWithValues: picked.map { (token($0), $0) })
        _ = try await poll("every latency push at the simulator", timeout: 300, interval: 0.1) { () -> Bool? in
            let seen = Set(self.simulator.pushes().compactMap { tokens[$0.deviceToken] })
            return seen.count >= picked.count ? true : nil
        }
        // Where an event's time goes, on average over the phase (warm-up included): the consumer's batch
        // (decode, transaction, commit) and the APNs request (sent to answered).
        let stages = await stageTimes() - stagesBefore
        if stages.batches > 0, stages.requests > 0 {
            print(
                String(
                    format:
                        "         (in the workers: %.0f batches of %.1f events, %.1f ms each on average; APNs requests %.1f ms on average)",
                    stages.batches, Double(total) / stages.batches, stages.batchSeconds / stages.batches * 1000,
                    stages.requestSeconds / stages.requests * 1000))
        }
        let first = published.values.min() ?? Date()
        var latencies: [(offset: Double, latency: Double)] = []
        for record in simulator.pushes() {
            guard let order = tokens[record.deviceToken], let sent = published[order], record.receivedAt >= sent else {
                continue
            }
            latencies.append((sent.timeIntervalSince(first), record.receivedAt.timeIntervalSince(sent)))
            published[order] = nil  // the first push after the publish
        }
        return latencies
    }

    /// pgbench running the worker's per-event statements (order lock + state, activity, timeline listing the push
    /// handed over, inbox; then the push's attempt and the activity's row with the delivered update's id, `sql/116`;
    /// then the sweepers' look-up of the push's answer, `sql/126`) on the same tables. The push goes to the
    /// dispatcher without an outbox row, as when the consumer hands it to its own dispatcher (every push at the
    /// latency phase's rate, about half in a backlog, where the rest are claimed).
    func pgbench(seconds: Int, orders: Int) async throws -> Double {
        // A real order state of this run, kept aside so that the script stays free of its text; pgbench runs
        // as the workers' login, which may read it.
        try await database.query(
            "CREATE TABLE bench_state AS SELECT state FROM orders WHERE state IS NOT NULL LIMIT 1")
        try await database.query("GRANT SELECT ON bench_state TO livedelivery_worker")
        let state = "(SELECT state FROM bench_state)"
        let script = directory.appendingPathComponent("per-event.sql")
        try """
        \\set n random(1, \(orders))
        BEGIN;
        INSERT INTO inbox (event_id, event_type, order_id, user_id, occurred_at) VALUES (gen_random_uuid()::text, 'order.status', 'pgb-' || (:n)::text, 'u', now()) ON CONFLICT DO NOTHING;
        INSERT INTO orders (order_id) VALUES ('pgb-' || (:n)::text) ON CONFLICT (order_id) DO NOTHING;
        SELECT o.state, array_to_string(ARRAY(SELECT a.delivered_apns_id FROM activities AS a WHERE a.order_id = o.order_id AND a.delivered_apns_id IS NOT NULL), ',') FROM orders AS o WHERE o.order_id = 'pgb-' || (:n)::text FOR UPDATE;
        UPDATE orders SET state = \(state), user_id = 'u', status = 'preparing', terminal = false, settled = false, last_sequence = :n, last_occurred_at = now(), last_event_id = 'e', next_sweep_at = CASE WHEN now() + interval '1 hour' >= next_sweep_at THEN next_sweep_at ELSE now() + interval '1 hour' END, updated_at = now() WHERE order_id = 'pgb-' || (:n)::text;
        INSERT INTO activities (order_id, activity_key, activity_id, bundle_id, environment, state, alert_count) VALUES ('pgb-' || (:n)::text, 'pgb-activity', 'a', 'com.example.pizza', 'production', 'active', 0) ON CONFLICT (order_id, activity_key) DO UPDATE SET state = EXCLUDED.state, updated_at = now();
        SELECT NOT EXISTS (SELECT 1 FROM outbox AS o WHERE o.order_id = 'pgb-' || (:n)::text AND o.activity_key = 'pgb-activity') AS handed;
        INSERT INTO timeline (order_id, kind, activity_keys, codes, messages, handed) VALUES ('pgb-' || (:n)::text, 'event', '{NULL,pgb-activity,pgb-activity,pgb-activity}', '{status_changed,update_planned,no_alert,priority}', '{preparing,update,no alert,priority 5}', ARRAY[gen_random_uuid()]);
        COMMIT;
        BEGIN;
        SELECT o.state, array_to_string(ARRAY(SELECT a.delivered_apns_id FROM activities AS a WHERE a.order_id = o.order_id AND a.delivered_apns_id IS NOT NULL), ',') FROM orders AS o WHERE o.order_id = 'pgb-' || (:n)::text FOR UPDATE;
        INSERT INTO push_attempts (order_id, activity_key, kind, bundle_id, priority, generation, apns_id, status, outcome, latency_ms, worker_id) VALUES ('pgb-' || (:n)::text, 'pgb-activity', 'update', 'com.example.pizza', 5, 1, gen_random_uuid(), 200, 'delivered', 3.0, 'pgbench');
        UPDATE activities SET last_sent_content = '{"currentStep":"preparing"}', last_sent_step = 'preparing', pending_kind = NULL, delivered_apns_id = gen_random_uuid(), updated_at = now() WHERE order_id = 'pgb-' || (:n)::text AND activity_key = 'pgb-activity';
        COMMIT;
        SELECT EXISTS (SELECT 1 FROM push_attempts AS a WHERE a.order_id = 'pgb-' || (:n)::text AND a.apns_id = gen_random_uuid() AND a.attempted_at >= now() - interval '1 minute');

        """.write(to: script, atomically: true, encoding: .utf8)
        let configuration = try PostgresConfiguration(databaseURL)
        let environment = ProcessInfo.processInfo.environment.merging(configuration.environment) { $1 }
        let child = try ChildProcess(
            name: "pgbench", executable: "/usr/bin/pgbench",
            arguments: [
                "-n", "-c", "4", "-j", "2", "-T", String(seconds), "-M", "prepared", "-f", script.path,
            ],
            environment: environment, outputPath: directory.appendingPathComponent("pgbench.log").path)
        let status = try await child.waitForExit(timeout: .seconds(seconds + 120))
        guard status == 0,
            let line = child.output.split(separator: "\n").first(where: { $0.hasPrefix("tps = ") }),
            let tps = line.dropFirst("tps = ".count).split(separator: " ").first.flatMap({ Double($0) })
        else { throw ValidationError("pgbench failed (\(status)):\n\(child.tail())") }
        return tps
    }

    /// Vacuums and analyzes the bench database, writes a checkpoint and has the kernel write every
    /// dirty page to disk; returns the seconds it took.
    ///
    /// A populate round leaves cleanup behind in proportion to its size (dead row versions for
    /// autovacuum, dirty pages for the next checkpoint): 180k events before the 100k round, 20k before
    /// the 10k one. Left to run during the measured round, that work was charged to the larger table,
    /// which is the variable the rounds compare. Settling first makes the rounds start alike.
    ///
    /// The `sync`: with `fsync = off` (`LIVEDELIVERY_PG_DURABILITY=off`), and for the data files between
    /// checkpoints in any case, what a round writes stays in the page cache until the kernel writes pages
    /// older than 30 s (`vm.dirty_expire_centisecs`) in one burst.
    /// The burst left by a populate round landed in the latency phase that followed it (177 MB in half a
    /// second), and the broker's own `fdatasync` waited behind it: the phase's worst second, every time.
    func settle() async throws -> Double {
        let clock = ContinuousClock()
        let start = clock.now
        try await database.withConnection { connection in
            try await connection.execute(unsafeSQL: "VACUUM (ANALYZE)")
            // Superuser or pg_checkpoint only (the local services' user is one); without it, vacuuming is all.
            try? await connection.execute(unsafeSQL: "CHECKPOINT")
        }
        // `sync` blocks until the disk has everything: on a thread of its own, not the cooperative pool.
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            Thread {
                sync()
                continuation.resume()
            }.start()
        }
        return (clock.now - start).seconds
    }

    /// Rows inserted, updated and deleted so far in the bench's database, by table (a partition
    /// counts under its parent), from PostgreSQL's statistics.
    func rowsWritten() async throws -> [String: Double] {
        let query: PostgresQuery = """
            SELECT coalesce(parent.relname, s.relname)::text,
                   sum(s.n_tup_ins + s.n_tup_upd + s.n_tup_del)::float8
            FROM pg_stat_user_tables AS s
            LEFT JOIN pg_inherits AS i ON i.inhrelid = s.relid
            LEFT JOIN pg_class AS parent ON parent.oid = i.inhparent
            GROUP BY 1
            """
        var rows: [String: Double] = [:]
        for row in try await database.query(query) {
            rows[try row.decode(String.self, at: 0)] = try row.decode(Double.self, at: 1)
        }
        return rows
    }

    /// The rows written since `before`, once the stopped workers' statistics have reached the
    /// server: a backend reports its counts as it exits, moments after its client has gone, so the
    /// counts are read until two readings 100 ms apart agree (at most 5 s).
    func rowsWritten(after before: [String: Double]) async throws -> [String: Double] {
        var previous = try await rowsWritten()
        for _ in 0..<50 {
            try await Task.sleep(for: .milliseconds(100))
            let current = try await rowsWritten()
            if current == previous { break }
            previous = current
        }
        return Dictionary(uniqueKeysWithValues: previous.map { ($0.key, $0.value - (before[$0.key] ?? 0)) })
    }

    /// The server's current WAL position.
    func walPosition() async throws -> String {
        try await database.query("SELECT pg_current_wal_lsn()::text").first?.decode(String.self, at: 0) ?? "0/0"
    }

    /// WAL bytes written by the whole server since `position`.
    func walBytes(since position: String) async throws -> Double {
        try await database.query("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), \(position)::pg_lsn)::float8").first?
            .decode(Double.self, at: 0) ?? 0
    }

    func count(_ sql: String) async throws -> Int {
        try await count(PostgresQuery(unsafeSQL: sql))
    }

    func count(_ query: PostgresQuery) async throws -> Int {
        try await database.query(query).first?.decode(Int.self, at: 0) ?? 0
    }

    /// Stops everything; with `keep`, the database, the queues and the logs stay for a look.
    func shutdown(keep: Bool) async {
        await database.shutdown()
        if keep {
            for worker in deployment.startedWorkers { await worker.stop() }
            try? await simulator.shutdown()
        } else {
            await deployment.shutdown(logger: logger)
        }
    }
}

/// Polls until `produce` returns a value (nil or an error: not yet), or fails after `timeout` seconds.
func poll<Value>(
    _ what: String, timeout: Double, interval: Double = 0.1, _ produce: () async throws -> Value?
) async throws -> Value {
    try await eventuallyValue(
        what, timeout: .milliseconds(Int64(timeout * 1000)), every: .milliseconds(Int64(interval * 1000)), produce)
}

/// The `p` quantile (0…1) of sorted, non-empty samples.
func percentile(_ sorted: [Double], _ p: Double) -> Double {
    sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))]
}

/// The p99 of each whole second of the samples (by their offset in seconds), in ms, in order.
func p99PerSecond(_ samples: [(offset: Double, latency: Double)]) -> String {
    Dictionary(grouping: samples, by: { Int($0.offset) }).sorted { $0.key < $1.key }
        .map { String(format: "%.0f", percentile($0.value.map(\.latency).sorted(), 0.99) * 1000) }
        .joined(separator: " ")
}

func rfc3339(_ date: Date) -> String {
    RFC3339.format(date, fractional: true)
}

/// CPU seconds per event of a backlog round, by process.
struct CPUSplit {
    var workers: Double
    var postgres: Double
    var rabbitmq: Double
    /// This process: the in-process APNs simulator.
    var bench: Double
}

/// CPU seconds so far of every process named `postgres` and of RabbitMQ's (the local services'; zero for
/// servers on other hosts), and of this process (the in-process APNs simulator and the publisher).
private struct ServersCPU {
    var postgres: Double
    var rabbitmq: Double
    var bench: Double

    static func now() -> ServersCPU {
        let servers = ProcessCPU.seconds(
            ofGroups: [["postgres"], ["beam.smp", "erl_child_setup", "inet_gethost", "epmd"]])
        return ServersCPU(postgres: servers[0], rabbitmq: servers[1], bench: ProcessCPU.ownSeconds)
    }

    static func - (now: ServersCPU, before: ServersCPU) -> ServersCPU {
        ServersCPU(
            postgres: now.postgres - before.postgres, rabbitmq: now.rabbitmq - before.rabbitmq,
            bench: now.bench - before.bench)
    }
}

/// Publishes every message with confirms, 2,000 in flight at most; a message with an order id carries it as the
/// `order_id` header (the cells' hash exchange routes by it).
func publishConfirmed(
    _ messages: [(routingKey: String, body: [UInt8], id: String, orderID: String?)], exchange: String,
    amqpURL: String, logger: Logger
) async throws {
    let (publisher, _) = try await RabbitMQPublisher.connect(to: try AMQPEndpoints(urls: amqpURL), logger: logger)
    try await withThrowingTaskGroup(of: Void.self) { group in
        var inFlight = 0
        for (routingKey, body, id, orderID) in messages {
            if inFlight >= 2000 {
                try await group.next()
                inFlight -= 1
            }
            group.addTask {
                try await publisher.publish(
                    exchange: exchange, routingKey: routingKey, body: body,
                    properties: RabbitMQMessageProperties(
                        contentType: "application/json", headers: orderID.map { ["order_id": .string($0)] } ?? [:],
                        messageID: id))
            }
            inFlight += 1
        }
        try await group.waitForAll()
    }
    await publisher.close()
}
