import ArgumentParser
import ChildProcesses
import Foundation
import Logging
import Postgres

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `livedelivery-bench postgres`: parameterised single-row INSERTs per second through the `Postgres` module
/// with N connections, then `pgbench` running the same INSERT against the same table, and the ratio.
struct PostgresBenchmark: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "postgres",
        abstract: "Postgres module INSERT throughput, compared with pgbench on the same table."
    )

    @Option(help: "Concurrent connections (module pool size and pgbench -c).")
    var connections = 8

    @Option(help: "Seconds per measurement.")
    var seconds = 10

    @Option(help: "PostgreSQL URL (default: $LIVEDELIVERY_POSTGRES_URL or the local services database).")
    var url =
        ProcessInfo.processInfo.environment["LIVEDELIVERY_POSTGRES_URL"]
        ?? "postgresql://livedelivery:livedelivery@127.0.0.1:55432/livedelivery"

    @Option(
        help:
            "pgbench query mode matching the module: prepared (its statement cache; extended when the cache size is 0)."
    )
    var pgbenchMode = "prepared"

    @Option(help: "The module's statement cache size per connection (0 = unprepared, like pgbench -M extended).")
    var statementCacheSize = 256

    @Option(help: "Path of pgbench.")
    var pgbench = "/usr/bin/pgbench"

    func run() async throws {
        var configuration = try PostgresConfiguration(url)
        configuration.poolSize = connections
        configuration.statementCacheSize = statementCacheSize
        configuration.applicationName = "livedelivery-bench"
        let client = PostgresClient(configuration: configuration, logger: Logger(label: "livedelivery-bench"))
        let table = "bench_inserts_\(UInt32.random(in: 0...UInt32.max))"
        try await client.query(
            PostgresQuery(
                unsafeSQL: "CREATE TABLE \(table) (account bigint NOT NULL, amount double precision, note text)")
        )
        print("postgres: \(connections) connections, \(seconds) s each, table \(table), \(configuration)")
        print(try await Durability.describe(client))

        var selfBefore = cpuSeconds(RUSAGE_SELF)
        let queryRate = try await measureModule(client: client, table: table, leasePerStatement: true)
        let queryCPU = (cpuSeconds(RUSAGE_SELF) - selfBefore) / (queryRate * Double(seconds)) * 1e6
        print(
            String(format: "module client.query    : %8.0f INSERT/s  (client CPU %.1f µs/INSERT)", queryRate, queryCPU))
        selfBefore = cpuSeconds(RUSAGE_SELF)
        let loopRate = try await measureModule(client: client, table: table, leasePerStatement: false)
        let loopCPU = (cpuSeconds(RUSAGE_SELF) - selfBefore) / (loopRate * Double(seconds)) * 1e6
        print(String(format: "module withConnection  : %8.0f INSERT/s  (client CPU %.1f µs/INSERT)", loopRate, loopCPU))
        let childrenBefore = cpuSeconds(RUSAGE_CHILDREN)
        let pgbenchRate = try await measurePgbench(configuration: configuration, table: table)
        let pgbenchCPU = (cpuSeconds(RUSAGE_CHILDREN) - childrenBefore) / (pgbenchRate * Double(seconds)) * 1e6
        print(
            String(
                format: "pgbench                : %8.0f INSERT/s  (client CPU %.1f µs/INSERT; -M %@ -c %d -j 2)",
                pgbenchRate, pgbenchCPU, pgbenchMode, connections
            )
        )
        print(String(format: "ratio client.query     : %8.1f %% of pgbench", queryRate / pgbenchRate * 100))
        print(String(format: "ratio withConnection   : %8.1f %% of pgbench", loopRate / pgbenchRate * 100))

        try await client.query(PostgresQuery(unsafeSQL: "DROP TABLE \(table)"))
        await client.shutdown()
    }

    /// `leasePerStatement`: each INSERT is one `client.query` (lease, statement, release), as the worker does for
    /// single statements. Otherwise each task holds one connection and loops on it, as each pgbench client does.
    private func measureModule(client: PostgresClient, table: String, leasePerStatement: Bool) async throws -> Double {
        // Open every connection before timing, as pgbench excludes its connection time.
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<connections {
                group.addTask { try await client.withTransaction { _ in } }
            }
            try await group.waitForAll()
        }
        let clock = ContinuousClock()
        let start = clock.now
        let deadline = start + .seconds(seconds)
        let total = try await withThrowingTaskGroup(of: Int.self) { group in
            for _ in 0..<connections {
                group.addTask {
                    var count = 0
                    if leasePerStatement {
                        while clock.now < deadline {
                            try await client.query(Self.insert(into: table))
                            count += 1
                        }
                    } else {
                        try await client.withConnection { connection in
                            while clock.now < deadline {
                                try await connection.query(Self.insert(into: table))
                                count += 1
                            }
                        }
                    }
                    return count
                }
            }
            return try await group.reduce(0, +)
        }
        let elapsed = clock.now - start
        return Double(total) / elapsed.seconds
    }

    private static func insert(into table: String) -> PostgresQuery {
        let account = Int.random(in: 1...1_000_000)
        let amount = Double(Int.random(in: 1...1_000_000))
        return
            "INSERT INTO \(unsafeRaw: table) (account, amount, note) VALUES (\(account), \(amount), \(String(account)))"
    }

    private func measurePgbench(configuration: PostgresConfiguration, table: String) async throws -> Double {
        let script = FileManager.default.temporaryDirectory.appendingPathComponent("\(table).sql")
        try """
        \\set account random(1, 1000000)
        \\set amount random(1, 1000000)
        INSERT INTO \(table) (account, amount, note) VALUES (:account, :amount, :account);

        """.write(to: script, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: script) }

        let environment = ProcessInfo.processInfo.environment.merging(configuration.environment) { $1 }
        let outputPath = script.path + ".out"
        defer { try? FileManager.default.removeItem(atPath: outputPath) }
        let child = try ChildProcess(
            name: "pgbench", executable: pgbench,
            arguments: [
                "-n", "-c", String(connections), "-j", "2", "-T", String(seconds), "-M", pgbenchMode,
                "-f", script.path,
            ],
            environment: environment, outputPath: outputPath, truncateOutput: true)
        let status = try await child.waitForExit(timeout: .seconds(seconds + 120))
        let text = (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? ""
        guard status == 0,
            let line = text.split(separator: "\n").first(where: { $0.hasPrefix("tps = ") }),
            let tps = line.dropFirst("tps = ".count).split(separator: " ").first.flatMap({ Double($0) })
        else {
            throw ValidationError("pgbench failed (status \(status)):\n\(text)")
        }
        return tps
    }
}

/// User + system CPU time of this process or of its waited-for children.
private func cpuSeconds(_ who: __rusage_who) -> Double {
    var usage = rusage()
    getrusage(__rusage_who_t(who.rawValue), &usage)
    func seconds(_ time: timeval) -> Double { Double(time.tv_sec) + Double(time.tv_usec) / 1e6 }
    return seconds(usage.ru_utime) + seconds(usage.ru_stime)
}
