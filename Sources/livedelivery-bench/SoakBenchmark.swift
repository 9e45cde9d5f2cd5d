import APNsSimulator
import ArgumentParser
import ChildProcesses
import Foundation
import Logging
import Postgres
import RabbitMQ
import Synchronization
import TestSupport

/// `livedelivery-bench soak`: a long run at a steady offered rate through several workers, with an APNs
/// fault storm and a broker restart in the middle. Once a minute it prints each worker's resident memory,
/// open descriptors, threads and connections (read from `/proc`), and at the end, minute by minute, the
/// publish → push latency of the events due in that minute; then whether anything was lost.
///
/// Latency runs from when an event was due (its place in the offered schedule), not from when the publish
/// call was made: events that wait for the broker to come back count their wait.
struct SoakBenchmark: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "soak",
        abstract: "A long run with faults: per-minute RSS, descriptors, threads, connections and latency p99."
    )

    @Option(help: "Minutes of publishing.")
    var minutes = 30

    @Option(help: "Offered rate, events/s (status updates, round robin over the orders).")
    var rate = 1000

    @Option(help: "Worker processes.")
    var workers = 2

    @Option(help: "Tracked orders, each with an app-started activity; each gets an update every orders/rate seconds.")
    var orders = 20000

    @Option(help: "Minute at which the APNs fault storm starts (0: none).")
    var stormMinute = 10

    @Option(help: "Seconds the storm lasts.")
    var stormSeconds = 60

    @Option(help: "Minute at which the broker is restarted (0: never).")
    var restartMinute = 20

    @Option(help: "Leading minutes left out of the memory-growth figure (connections and caches fill first).")
    var warmupMinutes = 5

    /// The broker of `--amqp-url` is the one the soak restarts: `scripts/services`' main broker (``RabbitMQBroker/main``).
    @OptionGroup var deployment: DeploymentOptions

    func validate() throws {
        guard minutes > warmupMinutes, warmupMinutes >= 0 else {
            throw ValidationError("--minutes must exceed --warmup-minutes")
        }
        guard stormMinute == 0 || (stormMinute > warmupMinutes && stormMinute < minutes) else {
            throw ValidationError("--storm-minute: 0, or after the warm-up and before the end")
        }
        guard restartMinute == 0 || (restartMinute > warmupMinutes && restartMinute < minutes) else {
            throw ValidationError("--restart-minute: 0, or after the warm-up and before the end")
        }
        guard rate > 0, orders >= rate else { throw ValidationError("--orders must be at least --rate") }
    }

    func run() async throws {
        var logger = Logger(label: "livedelivery-bench.soak")
        logger.logLevel = .warning
        let bench = try await BenchEnvironment.start(
            workers: workers, amqpURL: deployment.amqpURL, postgresURL: deployment.postgresURL,
            executable: deployment.executable, logger: logger)
        print(
            "soak: \(minutes) min at \(rate) events/s through \(workers) workers, \(orders) orders; "
                + "database \(bench.databaseName), logs in \(bench.directory.path)")
        print(try await Durability.describe(bench.database))
        do {
            let populated = try await bench.backlogRound((0..<orders).flatMap { bench.newOrder($0) })
            print(String(format: "populated %d orders: %.0f events/s", orders, populated.rate))
            let plan = SoakRun.Plan(
                minutes: minutes, rate: rate, orders: orders, stormMinute: stormMinute, stormSeconds: stormSeconds,
                restartMinute: restartMinute, warmupMinutes: warmupMinutes)
            try await SoakRun(plan: plan, bench: bench).run()
        } catch {
            print("soak failed: \(error); logs in \(bench.directory.path)")
            await bench.shutdown(keep: true)
            throw error
        }
        await bench.shutdown(keep: deployment.keep)
    }
}

/// One soak: the schedule, the probes and the verdict.
private final class SoakRun: Sendable {
    let command: Plan
    let bench: BenchEnvironment
    let ledger = Mutex(Ledger())
    let stopped = Atomic<Bool>(false)
    let start = Date()
    let peers: [Int: String]

    struct Plan: Sendable {
        var minutes: Int
        var rate: Int
        var orders: Int
        var stormMinute: Int
        var stormSeconds: Int
        var restartMinute: Int
        var warmupMinutes: Int
    }

    /// What was published and what reached the simulator, in seconds after `start`.
    struct Ledger {
        /// Per order, its events not yet followed by an accepted push: when each was due, and when its
        /// publish began (a push received before that is not its push).
        var pending: [Int: [(due: Double, sent: Double)]] = [:]
        var latencies: [(due: Double, latency: Double)] = []
        var confirmed: [String] = []
        var publishFailures = 0
    }

    init(plan: Plan, bench: BenchEnvironment) {
        self.command = plan
        self.bench = bench
        var peers: [Int: String] = [bench.simulator.port: "apns"]
        for url in bench.amqpURL.split(separator: ",") {
            if let port = URLComponents(string: String(url))?.port { peers[port] = "broker" }
        }
        if let port = URLComponents(string: bench.databaseURL)?.port { peers[port] = "db" }
        self.peers = peers
    }

    func run() async throws {
        try await bench.startWorkers()
        let tokens = Dictionary(uniqueKeysWithValues: (0..<command.orders).map { (bench.token($0), $0) })
        let seconds = Double(command.minutes * 60)
        var samples: [[ProcessSample]] = []
        var faults: [(name: String, start: Double, end: Double)] = []
        print(
            "minute  "
                + bench.workers.map { "\($0.name): RSS MB, fds, threads, connections broker/db/apns +other" }.joined(
                    separator: "  |  "))
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await self.publish(until: seconds) }
            group.addTask { await self.matchPushes(tokens: tokens) }
            // The probes and the faults, minute by minute, on this task.
            for minute in 0...command.minutes {
                // The minute's probe, on the minute: pacing, not synchronisation.
                try await Task.sleep(
                    for: .seconds(max(0, start.addingTimeInterval(Double(minute * 60)).timeIntervalSinceNow)))
                let sample = bench.workers.map { ProcessSample(pid: $0.pid, peers: peers) }
                samples.append(sample)
                print(
                    String(format: "%6d  ", minute)
                        + sample.map {
                            String(
                                format: "%6.1f %5d %4d  ", Double($0.residentKilobytes) / 1024, $0.descriptors,
                                $0.threads) + $0.connectionText
                        }.joined(separator: "  |  "))
                fflush(nil)  // so that a run written to a file can be followed while it lasts
                if command.stormMinute > 0, minute == command.stormMinute {
                    let began = offsetNow
                    try await storm()
                    faults.append(("APNs fault storm", began, offsetNow))
                }
                if command.restartMinute > 0, minute == command.restartMinute {
                    let began = offsetNow
                    try await RabbitMQBroker.main.restart()
                    faults.append(("broker restart", began, offsetNow))
                    print(
                        String(format: "        (the broker restarted: %.1f s from stop to ready)", offsetNow - began))
                }
            }
            // Publishing has ended by now; wait for the last pushes, then stop matching.
            try await group.next()
            try await self.drain(tokens: tokens)
            stopped.store(true, ordering: .relaxed)
            try await group.waitForAll()
        }
        let names = bench.workers.map(\.name)
        try await bench.stopWorkers()
        report(samples: samples, faults: faults, workers: names)
        try await verify()
    }

    private var offsetNow: Double { Date().timeIntervalSince(start) }

    // MARK: Publishing

    /// Publishes the schedule: event `i` is due at `i / rate` seconds. A publish that fails (the broker is
    /// away) is retried on a new connection until it is confirmed; the events due meanwhile queue behind it.
    private func publish(until seconds: Double) async throws {
        let connection = SoakPublisher(amqpURL: bench.amqpURL, logger: bench.logger)
        let exchange = bench.exchange
        let order = Array((0..<command.orders).shuffled())
        let total = Int(seconds * Double(command.rate))
        let clock = ContinuousClock()
        let begin = clock.now - .seconds(offsetNow)
        try await withThrowingTaskGroup(of: Void.self) { group in
            var inFlight = 0
            for index in 0..<total {
                let due = Double(index) / Double(command.rate)
                if index % max(1, command.rate / 100) == 0 {
                    // Pacing the offered rate in 10 ms steps, not synchronisation.
                    try await Task.sleep(until: begin + .seconds(due), clock: clock)
                }
                if inFlight >= 4000 {
                    try await group.next()
                    inFlight -= 1
                }
                let orderNumber = order[index % order.count]
                let (routingKey, body, id) = bench.statusUpdate(
                    order: orderNumber, at: start.addingTimeInterval(due))
                let sent = offsetNow
                ledger.withLock { $0.pending[orderNumber, default: []].append((due, sent)) }
                group.addTask {
                    await connection.publish(exchange: exchange, routingKey: routingKey, body: body, id: id)
                    self.ledger.withLock { $0.confirmed.append(id) }
                }
                inFlight += 1
            }
            try await group.waitForAll()
        }
        ledger.withLock { $0.publishFailures = connection.failures }
        await connection.close()
    }

    /// Ten per cent of requests answered 500, five 503, two 429, and one in a hundred GOAWAY, for
    /// `--storm-seconds`: the errors APNs sends when it is in trouble, all retryable.
    private func storm() async throws {
        let simulator = bench.simulator
        simulator.injectFault(FaultRule(status: 500, reason: "InternalServerError", percent: 10))
        simulator.injectFault(FaultRule(status: 503, reason: "ServiceUnavailable", percent: 5))
        simulator.injectFault(FaultRule(status: 429, reason: "TooManyRequests", percent: 2))
        simulator.injectFault(FaultRule(reason: "ServiceUnavailable", percent: 1, goaway: true))
        print("        (APNs fault storm for \(command.stormSeconds) s: 500 10 %, 503 5 %, 429 2 %, GOAWAY 1 %)")
        try await Task.sleep(for: .seconds(command.stormSeconds))  // the storm's length, not synchronisation
        simulator.clearFaults()
    }

    // MARK: Matching pushes to events

    /// Once a second, reads the simulator's new records and settles each order's pending events with the
    /// first accepted push that follows their publish.
    private func matchPushes(tokens: [String: Int]) async {
        var seen = 0
        while !stopped.load(ordering: .relaxed) {
            seen = matchOnce(tokens: tokens, after: seen)
            try? await Task.sleep(for: .seconds(1))  // polling the simulator's records, not synchronisation
        }
    }

    private func matchOnce(tokens: [String: Int], after seen: Int) -> Int {
        let records = bench.simulator.pushes(after: seen)
        ledger.withLock { ledger in
            for record in records where record.status == 200 {
                guard let order = tokens[record.deviceToken], var waiting = ledger.pending[order] else { continue }
                let received = record.receivedAt.timeIntervalSince(start)
                waiting.removeAll { event in
                    guard event.sent <= received else { return false }
                    ledger.latencies.append((event.due, received - event.due))
                    return true
                }
                ledger.pending[order] = waiting.isEmpty ? nil : waiting
            }
        }
        return records.last?.sequence ?? seen
    }

    /// Waits until every event has its push and every push is answered.
    private func drain(tokens: [String: Int]) async throws {
        let finished = offsetNow
        _ = try await poll("every event's push and every push answered", timeout: 600, interval: 1) { () -> Bool? in
            let waiting = self.ledger.withLock { $0.pending.count }
            guard waiting == 0 else { return nil }
            return try await self.bench.allAnswered() ? true : nil
        }
        print(String(format: "        (drained %.1f s after the last publish)", offsetNow - finished))
    }

    // MARK: The verdict

    private func report(
        samples: [[ProcessSample]], faults: [(name: String, start: Double, end: Double)], workers: [String]
    ) {
        let latencies = ledger.withLock { $0.latencies }
        let byMinute = Dictionary(grouping: latencies) { Int($0.due / 60) }
        print("minute  events  publish → push p50, p99, max (ms)")
        for minute in byMinute.keys.sorted() {
            let sorted = byMinute[minute]!.map(\.latency).sorted()
            print(
                String(
                    format: "%6d  %6d  %8.1f %8.1f %8.1f", minute, sorted.count, percentile(sorted, 0.5) * 1000,
                    percentile(sorted, 0.99) * 1000, sorted.last! * 1000))
        }
        // The level p99 returns to: the minutes after the warm-up and before the first fault.
        let firstFault = faults.map(\.start).min() ?? Double(command.minutes * 60)
        let calm = latencies.filter { $0.due >= Double(command.warmupMinutes * 60) && $0.due < firstFault }
            .map(\.latency).sorted()
        if !calm.isEmpty {
            let level = percentile(calm, 0.99)
            print(String(format: "p99 before the first fault (after the warm-up): %.1f ms", level * 1000))
            let windows = Dictionary(grouping: latencies) { Int($0.due / 10) }
                .mapValues { percentile($0.map(\.latency).sorted(), 0.99) }
            for fault in faults {
                // Back to its level: from the fault's end, the first 10-second window after which no window of
                // the next two minutes has a p99 above 1.5 × the level.
                let from = Int(fault.start / 10)
                let lastHigh = (from...(Int(fault.end / 10) + 12)).last { (windows[$0] ?? 0) > level * 1.5 }
                let back = lastHigh.map { max(0, Double($0 + 1) * 10 - fault.end) } ?? 0
                let series = (from...(Int(fault.end / 10) + 9)).map {
                    String(format: "%.0f", (windows[$0] ?? 0) * 1000)
                }
                print(
                    fault.name
                        + String(
                            format: " at %.0f–%.0f s: p99 back within 1.5 × its level %.0f s after it ended",
                            fault.start, fault.end, back)
                        + " (p99 per 10 s from its start, ms: \(series.joined(separator: " ")))")
            }
        }
        guard let base = samples.dropFirst(command.warmupMinutes).first, let last = samples.last else { return }
        for (index, worker) in workers.enumerated() {
            let b = base[index]
            let l = last[index]
            // Threads by name, where the counts differ: which ones came or went.
            let names = Set(b.threadNames.keys).union(l.threadNames.keys).sorted()
                .filter { b.threadNames[$0] != l.threadNames[$0] }
                .map { "\($0) \(b.threadNames[$0] ?? 0) → \(l.threadNames[$0] ?? 0)" }
            print(
                worker
                    + String(
                        format:
                            ": from minute %d to %d RSS %.1f → %.1f MB (%+.1f %%), descriptors %d → %d, threads %d → %d",
                        command.warmupMinutes, samples.count - 1, Double(b.residentKilobytes) / 1024,
                        Double(l.residentKilobytes) / 1024,
                        (Double(l.residentKilobytes) / Double(max(1, b.residentKilobytes)) - 1) * 100, b.descriptors,
                        l.descriptors, b.threads, l.threads)
                    + ", connections (broker/db/apns) \(b.connectionText) → \(l.connectionText)"
                    + (names.isEmpty ? "" : "; threads by name: " + names.joined(separator: ", ")))
        }
    }

    /// Nothing lost: every confirmed event is in the inbox or a dead letter, and every order's activity was
    /// last sent the order's newest status.
    private func verify() async throws {
        let (confirmed, failures) = ledger.withLock { ($0.confirmed, $0.publishFailures) }
        let database = bench.database
        try await database.query("CREATE TABLE soak_published (event_id text PRIMARY KEY)")
        var index = 0
        while index < confirmed.count {
            let chunk = Array(confirmed[index..<min(index + 20000, confirmed.count)])
            try await database.query(
                "INSERT INTO soak_published SELECT unnest(\(chunk)::text[]) ON CONFLICT DO NOTHING")
            index += chunk.count
        }
        let missing = try await bench.count(
            """
            SELECT count(*) FROM soak_published AS p
            WHERE NOT EXISTS (SELECT 1 FROM inbox AS i WHERE i.event_id = p.event_id)
              AND NOT EXISTS (SELECT 1 FROM dead_letters AS d WHERE d.event_id = p.event_id)
            """)
        let deadLetters = try await bench.count("SELECT count(*) FROM dead_letters")
        let behind = try await bench.count(
            """
            SELECT count(*) FROM orders AS o JOIN activities AS a USING (order_id)
            WHERE a.last_sent_step IS DISTINCT FROM o.status OR a.pending_kind IS NOT NULL
            """)
        print(
            "lost: \(missing) of \(confirmed.count) confirmed events in neither the inbox nor a dead letter "
                + "(\(deadLetters) dead letters; \(failures) publishes retried on a new connection); "
                + "\(behind) activities not on their order's newest status")
    }
}

/// One publishing connection, replaced when a publish fails, shared by the concurrent publishes.
private actor SoakPublisher {
    let amqpURL: String
    let logger: Logger
    private var current: RabbitMQPublisher?
    private var connecting: Task<RabbitMQPublisher, any Error>?
    nonisolated let failureCount = Atomic<Int>(0)

    nonisolated var failures: Int { failureCount.load(ordering: .relaxed) }

    init(amqpURL: String, logger: Logger) {
        self.amqpURL = amqpURL
        self.logger = logger
    }

    /// Publishes until the broker confirms, on a new connection after each failure.
    func publish(exchange: String, routingKey: String, body: [UInt8], id: String) async {
        while true {
            do {
                let publisher = try await connection()
                do {
                    try await publisher.publish(
                        exchange: exchange, routingKey: routingKey, body: body,
                        properties: RabbitMQMessageProperties(contentType: "application/json", messageID: id))
                    return
                } catch {
                    failureCount.add(1, ordering: .relaxed)
                    if current === publisher {
                        current = nil
                        Task { await publisher.close() }
                    }
                }
            } catch {
                // The broker is still away: the next attempt in a quarter second.
                try? await Task.sleep(for: .milliseconds(250))
            }
        }
    }

    private func connection() async throws -> RabbitMQPublisher {
        if let current { return current }
        if let connecting { return try await connecting.value }
        let (amqpURL, logger) = (self.amqpURL, self.logger)
        let task = Task { try await RabbitMQPublisher.connect(to: try AMQPEndpoints(urls: amqpURL), logger: logger).0 }
        connecting = task
        defer { connecting = nil }
        let publisher = try await task.value
        current = publisher
        return publisher
    }

    func close() async {
        await current?.close()
        current = nil
    }
}

/// A process's resident memory, descriptors, threads and established TCP connections by peer, from `/proc`.
struct ProcessSample {
    var residentKilobytes = 0
    var threads = 0
    var descriptors = 0
    /// Threads by name (`/proc/PID/task/*/comm`).
    var threadNames: [String: Int] = [:]
    /// Established connections by the peer's name (by its port), and "other".
    var connections: [String: Int] = [:]

    init(pid: Int32, peers: [Int: String]) {
        let status = (try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)) ?? ""
        for line in status.split(separator: "\n") {
            let fields = line.split(whereSeparator: { $0 == " " || $0 == "\t" })
            guard fields.count >= 2, let value = Int(fields[1]) else { continue }
            if fields[0] == "VmRSS:" { residentKilobytes = value }
            if fields[0] == "Threads:" { threads = value }
        }
        for task in (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? [] {
            let name = (try? String(contentsOfFile: "/proc/\(pid)/task/\(task)/comm", encoding: .utf8)) ?? "?"
            threadNames[name.trimmingCharacters(in: .whitespacesAndNewlines), default: 0] += 1
        }
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd")) ?? []
        descriptors = entries.count
        var sockets = Set<Substring>()
        for entry in entries {
            guard let target = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/fd/\(entry)"),
                target.hasPrefix("socket:[")
            else { continue }
            sockets.insert(Substring(target.dropFirst("socket:[".count).dropLast()))
        }
        // /proc/PID/net/tcp{,6}: "sl local rem st … inode"; state 01 is ESTABLISHED.
        for table in ["tcp", "tcp6"] {
            // Read to the end: /proc files report no size, and a read sized by it stops at the first page.
            let data = FileHandle(forReadingAtPath: "/proc/\(pid)/net/\(table)")?.readDataToEndOfFile() ?? Data()
            let text = String(decoding: data, as: UTF8.self)
            for line in text.split(separator: "\n").dropFirst() {
                let fields = line.split(separator: " ")
                guard fields.count > 9, fields[3] == "01", sockets.contains(fields[9]),
                    let portText = fields[2].split(separator: ":").last, let port = Int(portText, radix: 16)
                else { continue }
                connections[peers[port] ?? "other", default: 0] += 1
            }
        }
    }

    var connectionText: String {
        "\(connections["broker", default: 0])/\(connections["db", default: 0])/\(connections["apns", default: 0])"
            + (connections["other"].map { " +\($0)" } ?? "")
    }
}
