import APNsSimulator
import ArgumentParser
import ChildProcesses
import Foundation
import LiveDeliveryCore
import Logging
import Postgres
import RabbitMQ
import TestSupport
import WorkerHarness

/// `livedelivery-bench cells`: what routing orders to cells costs (docs/scaling.md, Cells). The same backlog
/// (new orders, then status updates, each event carrying its `order_id` header) goes through the hash
/// exchange to one cell of two workers, then to two cells of one worker each (a database each), on the same
/// broker and PostgreSQL server, in the order one, two, two, one. It prints the workers' CPU per event (the
/// figure for A/B: it varies far less than elapsed time on a shared machine), the whole machine's, and the
/// events per second.
struct CellsBenchmark: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "cells",
        abstract: "Workers' CPU per event with the orders in two cells against one, on the same machine."
    )

    @Option(help: "New orders per round (an activity token and `confirmed` each).")
    var orders = 2000

    @Option(help: "Status updates per order after that.")
    var updates = 4

    @Flag(
        name: .customLong("cell-list"),
        help:
            "Two-cell rounds with the list of cells (cell.all): orders go where the hash names, and the workers forward what the exchange's ring sent elsewhere."
    )
    var cellList = false

    @OptionGroup var deployment: DeploymentOptions

    func run() async throws {
        var logger = Logger(label: "livedelivery-bench.cells")
        logger.logLevel = .warning
        let first = try await WorkerDeployment.start(
            name: "bench_cells_a_\(UInt32.random(in: 0...UInt32.max))", amqpURL: deployment.amqpURL,
            serverURL: deployment.postgresURL, bundleID: "com.example.pizza", keyID: "BENCHKEY01",
            teamID: "BENCHTEAM1", executable: deployment.executable, workerLogLevel: "warning", logger: logger
        ) { $0.recordLimit = 200_000 }
        let second = try await WorkerDeployment.start(
            name: "bench_cells_b_\(UInt32.random(in: 0...UInt32.max))", amqpURL: deployment.amqpURL,
            serverURL: deployment.postgresURL, bundleID: "com.example.pizza", keyID: "BENCHKEY01",
            teamID: "BENCHTEAM1", executable: deployment.executable, workerLogLevel: "warning", logger: logger)
        let bench = CellsRounds(first: first, second: second, cellList: cellList, logger: logger)
        print(
            "══ cells: the orders behind <exchange>.cells, one cell of two workers against two cells of one"
                + (cellList ? " (with the list of cells: forwarding)" : "") + " ══")
        print(
            "\(orders) new orders and \(orders * updates) updates a round; databases \(first.databaseName), "
                + "\(second.databaseName); logs in \(first.directory.path)")
        var figures: [Int: [CellsRounds.Figures]] = [:]
        do {
            for (round, cells) in [1, 2, 2, 1].enumerated() {
                let result = try await bench.round(cells: cells, orders: orders, updates: updates, label: "r\(round)")
                figures[cells, default: []].append(result)
                print(
                    String(
                        format:
                            "round %d, %d cell%@: %6d events, %6.0f events/s; CPU per event: workers %4.0f µs, whole machine %4.0f µs",
                        round + 1, cells, cells == 1 ? "" : "s", result.events, result.rate, result.workersCPU * 1e6,
                        result.machineCPU * 1e6))
            }
        } catch {
            print("benchmark failed: \(error); logs in \(first.directory.path)")
            await bench.shutdown(keep: true)
            throw error
        }
        await bench.shutdown(keep: deployment.keep)
        func mean(_ cells: Int, _ value: (CellsRounds.Figures) -> Double) -> Double {
            let list = figures[cells] ?? []
            return list.map(value).reduce(0, +) / Double(max(list.count, 1))
        }
        let one = mean(1, \.workersCPU)
        let two = mean(2, \.workersCPU)
        print(
            String(
                format:
                    "══ two cells beside one: workers' CPU per event %.0f µs against %.0f µs (%+.1f %%); whole machine %.0f against %.0f µs; %.0f against %.0f events/s (aim: routing at most +10 %% per event)",
                two * 1e6, one * 1e6, (two / one - 1) * 100, mean(2, \.machineCPU) * 1e6, mean(1, \.machineCPU) * 1e6,
                mean(2, \.rate), mean(1, \.rate)))
    }
}

/// The rounds of ``CellsBenchmark``: cell a is `first`'s database and queue (its exchange, simulator and apps
/// serve both cells); cell b is `second`'s database and a queue of its own.
final class CellsRounds: @unchecked Sendable {
    // Used only from the benchmark's single sequential flow.
    let first: WorkerDeployment
    let second: WorkerDeployment
    /// Two-cell rounds with `cell.all`: the workers forward the events of the other cell's orders.
    let cellList: Bool
    let logger: Logger
    private let databases: [PostgresClient]
    var queueB: String { "\(first.queue).cell-b" }

    struct Figures {
        var events: Int
        var rate: Double
        var workersCPU: Double
        var machineCPU: Double
    }

    init(first: WorkerDeployment, second: WorkerDeployment, cellList: Bool, logger: Logger) {
        self.first = first
        self.second = second
        self.cellList = cellList
        self.logger = logger
        databases = [first, second].map { deployment in
            var configuration = try! PostgresConfiguration(PostgresLogin.superuser.url(deployment.postgresURL))
            configuration.poolSize = 1
            return PostgresClient(configuration: configuration, logger: logger)
        }
    }

    /// Starts the workers of `cells` cells (two workers in all), publishes the round's events, and measures
    /// until every event is in an inbox and every outbox is empty.
    func round(cells: Int, orders: Int, updates: Int, label: String) async throws -> Figures {
        // With the list, both cells of a two-cell round know every cell's queue (docs/scaling.md, cell.all).
        let list =
            cells == 2 && cellList
            ? [
                "LIVEDELIVERY_CELL_ALL": "a,b", "LIVEDELIVERY_CELLS_A_QUEUE": first.queue,
                "LIVEDELIVERY_CELLS_B_QUEUE": queueB,
            ] : [:]
        let cellA = ["LIVEDELIVERY_CELL_NAME": "a", "LIVEDELIVERY_POSTGRES_URL": first.postgresURL]
            .merging(list) { $1 }
        let cellB = [
            "LIVEDELIVERY_CELL_NAME": "b", "LIVEDELIVERY_POSTGRES_URL": second.postgresURL,
            "LIVEDELIVERY_AMQP_QUEUE": queueB,
        ].merging(list) { $1 }
        var workers: [RunningWorker] = []
        workers.append(try await first.startWorker("\(label)-a1", extraEnvironment: cellA))
        workers.append(
            try await first.startWorker(
                "\(label)-\(cells == 1 ? "a2" : "b1")", extraEnvironment: cells == 1 ? cellA : cellB))
        if cells == 1 { try await unbind(queueB) }  // a one-cell round: cell b's queue takes no share
        let messages = self.messages(label: label, orders: orders, updates: updates)
        let before = try await inboxCount()
        let workersCPU = workers.compactMap(\.process.cpuSeconds).reduce(0, +)
        let machineCPU = ChildProcess.machineBusySeconds ?? 0
        let clock = ContinuousClock()
        let start = clock.now
        try await publish(messages)
        _ = try await poll("the round's events in the inboxes", timeout: 1800, interval: 0.05) { () -> Bool? in
            try await self.inboxCount() - before >= messages.count ? true : nil
        }
        // Every push answered: none in an outbox, none in a worker's memory (handed over without a row).
        _ = try await poll("every push answered", timeout: 600, interval: 0.05) { () -> Bool? in
            for database in self.databases {
                let rows = try await database.query("SELECT count(*) FROM (SELECT 1 FROM outbox LIMIT 1) AS any_row")
                if try rows.first?.decode(Int.self, at: 0) != 0 { return nil }
            }
            return await BenchEnvironment.pushesInFlight(ports: workers.map(\.metricsPort)) == 0 ? true : nil
        }
        let seconds = (clock.now - start).seconds
        let workersUsed = workers.compactMap(\.process.cpuSeconds).reduce(0, +) - workersCPU
        let machineUsed = (ChildProcess.machineBusySeconds ?? 0) - machineCPU
        for worker in workers { worker.process.signal(SIGTERM) }
        for worker in workers { _ = try await worker.process.waitForExit(timeout: .seconds(120)) }
        first.forgetWorkers()
        let count = Double(messages.count)
        return Figures(
            events: messages.count, rate: count / seconds, workersCPU: workersUsed / count,
            machineCPU: machineUsed / count)
    }

    /// Events processed so far, over both cells.
    private func inboxCount() async throws -> Int {
        var total = 0
        for database in databases {
            total += try await database.query("SELECT count(*) FROM inbox").first?.decode(Int.self, at: 0) ?? 0
        }
        return total
    }

    /// Takes cell b's queue off the hash exchange (a worker of cell b binds it again when it starts).
    private func unbind(_ queue: String) async throws {
        let (connection, _) = try await RabbitMQConnection.connect(
            to: try AMQPEndpoints(urls: first.amqpURL), logger: logger)
        try? await connection.unbindQueue(queue, exchange: "\(first.exchange).cells", routingKey: "1")
        await connection.close()
    }

    /// The round's events, in publishing order: each order's token and `confirmed`, then `updates` rounds of a
    /// status update to every order.
    private func messages(label: String, orders: Int, updates: Int) -> [(String, [UInt8], String, String)] {
        func message(_ body: [String: Any]) -> (String, [UInt8], String, String) {
            let data = try! JSONSerialization.data(withJSONObject: body, options: [.sortedKeys])
            return (body["type"] as! String, Array(data), body["event_id"] as! String, body["order_id"] as! String)
        }
        let now = Date()
        func time(_ offset: Double) -> String { rfc3339(now.addingTimeInterval(offset)) }
        var messages: [(String, [UInt8], String, String)] = []
        for order in 0..<orders {
            let id = "\(label)-o\(order)"
            var token = ""
            var generator = SplitMix64(seed: UInt64(order) &* 0x9E37_79B9 &+ UInt64(label.utf8.count))
            for _ in 0..<32 { token += String(format: "%02x", UInt8.random(in: 0...255, using: &generator)) }
            messages.append(
                message([
                    "type": "activity.token", "version": 1, "event_id": "\(id)-tok", "occurred_at": time(-600),
                    "order_id": id, "activity_id": "act-\(id)", "device_id": "dev-\(id)", "token": token,
                    "bundle_id": "com.example.pizza", "environment": "production",
                ]))
            messages.append(status(id, sequence: 1, "confirmed", at: time(-600), message))
        }
        for sequence in 2..<(2 + updates) {
            for order in 0..<orders {
                messages.append(
                    status(
                        "\(label)-o\(order)", sequence: sequence,
                        sequence.isMultiple(of: 2) ? "preparing" : "picked_up",
                        at: time(Double(sequence)), message))
            }
        }
        return messages
    }

    private func status(
        _ id: String, sequence: Int, _ status: String, at time: String,
        _ message: ([String: Any]) -> (String, [UInt8], String, String)
    ) -> (String, [UInt8], String, String) {
        message([
            "type": "order.status", "version": 1, "event_id": "\(id)-s\(sequence)", "occurred_at": time,
            "order_id": id, "user_id": "u-\(id)", "sequence": sequence, "status": status, "order_number": sequence,
            "merchant": ["name": "Merchant"], "courier": ["name": "Courier"],
            "eta": ["earliest": time, "latest": time],
        ])
    }

    private func publish(_ messages: [(String, [UInt8], String, String)]) async throws {
        try await publishConfirmed(
            messages.map { ($0.0, $0.1, $0.2, $0.3) }, exchange: first.exchange, amqpURL: first.amqpURL, logger: logger)
    }

    func shutdown(keep: Bool) async {
        for database in databases { await database.shutdown() }
        if let (connection, _) = try? await RabbitMQConnection.connect(
            to: try AMQPEndpoints(urls: first.amqpURL), logger: logger)
        {
            for queue in [queueB, "\(queueB).dead-letter"] { _ = try? await connection.deleteQueue(queue) }
            await connection.close()
        }
        await second.shutdown(keepLogs: keep, logger: logger)
        await first.shutdown(keepLogs: keep, logger: logger)
    }
}
