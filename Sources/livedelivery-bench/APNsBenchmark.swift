import APNs
import APNsSimulator
import ArgumentParser
import ChildProcesses
import Crypto
import Foundation
import Logging

/// Pushes per second from ``APNsClient`` to an in-process apns-sim, beside h2load against the same simulator
/// with the same connections and streams, plus the client's p50/p99 request latency.
struct APNsBenchmark: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "apns",
        abstract: "APNs client vs h2load against apns-sim: pushes/s and latency.")

    @Option(help: "Pushes per run.")
    var requests: Int = 20_000

    @Option(help: "TLS connections (client and h2load).")
    var connections: Int = 2

    @Option(help: "Streams in flight per connection (client and h2load).")
    var streams: Int = 100

    @Option(
        name: .customLong("event-loops"),
        help: "Client libcurl threads (default: one per core, at most one per connection).")
    var eventLoops: Int?

    @Option(help: "Alternating client/h2load rounds; the medians are reported (the machine may be shared).")
    var rounds: Int = 3

    @Option(name: .customLong("sim-threads"), help: "apns-sim event-loop threads (default: one per core).")
    var simThreads: Int?

    @Option(help: "The h2load executable.")
    var h2load: String = "/usr/bin/h2load"

    func run() async throws {
        let logger = Logger(label: "apns-bench", factory: { _ in SwiftLogNoOpLogHandler() })
        let keyID = "BENCHKEY01"
        let teamID = "BENCHTEAM1"
        let privateKey = P256.Signing.PrivateKey()
        let key = APNsSigningKey(keyID: keyID, privateKey: privateKey)

        var simulatorConfiguration = SimulatorConfiguration()
        simulatorConfiguration.keys = [.init(keyID: keyID, teamID: teamID, publicKey: privateKey.publicKey)]
        simulatorConfiguration.threads = simThreads
        simulatorConfiguration.recordLimit = 1000
        let simulator = try await APNsSimulator.start(simulatorConfiguration, logger: logger)
        defer { Task { try? await simulator.shutdown() } }

        let bundleID = "com.example.bench"
        let topic = bundleID + ".push-type.liveactivity"
        let token = String(repeating: "ab", count: 32)
        let payload = Array(
            #"{"aps":{"event":"update","timestamp":\#(Int(Date().timeIntervalSince1970)),"content-state":{"driverName":"Sam","estimatedDeliveryTime":[800000000,800000600],"currentStep":"delivering"}}}"#
                .utf8)

        // The client.
        var configuration = APNsClientConfiguration(apps: [
            APNsApp(bundleID: bundleID, teamID: teamID, key: key, environment: .production, baseURL: simulator.baseURL)
        ])
        configuration.caFile = simulator.certificatePEMPath
        configuration.maxConnectionsPerHost = connections
        configuration.maxConcurrentStreamsPerConnection = streams
        configuration.maxRequestsInFlight = connections * streams
        configuration.eventLoops = eventLoops
        configuration.requestTimeout = .seconds(30)
        let client = try APNsClient(configuration: configuration, logger: logger)
        let notification = APNsNotification(
            deviceToken: token, topic: topic, priority: .consideringDevicePower, payload: payload)

        _ = try await push(client: client, notification: notification, bundleID: bundleID, count: 500)

        // h2load, same simulator, same connections and streams.
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "apns-bench-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let payloadFile = directory.appendingPathComponent("payload.json")
        try Data(payload).write(to: payloadFile)
        let jwt = try key.providerToken(teamID: teamID)
        let h2loadArguments = [
            "-n", String(requests), "-c", String(connections), "-m", String(streams), "-t", "1",
            "-H", "authorization: bearer \(jwt)", "-H", "apns-topic: \(topic)",
            "-H", "apns-push-type: liveactivity", "-H", "apns-priority: 5",
            "-d", payloadFile.path, simulator.baseURL + "/3/device/" + token,
        ]

        print("apns: \(requests) pushes, \(connections) connections × \(streams) streams, payload \(payload.count) B")
        var clientResults: [RunResult] = []
        var h2Results: [H2LoadResult] = []
        // Machine CPU per request (simulator included) varies less than the rates on a shared machine.
        var clientCPU: [Double] = []
        var h2CPU: [Double] = []
        // Microseconds of the machine's busy time per request since `busy` was read.
        func perRequest(since busy: Double) -> Double {
            ((ChildProcess.machineBusySeconds ?? 0) - busy) / Double(requests) * 1e6
        }
        func middle(_ values: [Double]) -> Double { values.sorted()[values.count / 2] }
        for round in 1...max(1, rounds) {
            var busy = ChildProcess.machineBusySeconds ?? 0
            let result = try await push(client: client, notification: notification, bundleID: bundleID, count: requests)
            clientResults.append(result)
            clientCPU.append(perRequest(since: busy))
            print(
                String(
                    format:
                        "  round %d APNsClient : %9.0f pushes/s   p50 %.2f ms   p99 %.2f ms   (%d delivered; machine CPU %.0f µs/push)",
                    round, result.rate, result.p50 * 1000, result.p99 * 1000, result.delivered, clientCPU.last!))
            busy = ChildProcess.machineBusySeconds ?? 0
            if let h2 = try runH2load(arguments: h2loadArguments) {
                h2Results.append(h2)
                h2CPU.append(perRequest(since: busy))
                print(
                    String(
                        format: "  round %d h2load     : %9.0f req/s      mean %@   (%@; machine CPU %.0f µs/request)",
                        round, h2.rate, h2.meanLatency, h2.statusLine, h2CPU.last!))
            }
        }
        await client.shutdown()
        let statistics = simulator.statistics

        let median = clientResults.sorted { $0.rate < $1.rate }[clientResults.count / 2]
        print(
            String(
                format: "  median APNsClient : %9.0f pushes/s   p50 %.2f ms   p99 %.2f ms", median.rate,
                median.p50 * 1000, median.p99 * 1000))
        if !h2Results.isEmpty {
            let h2 = middle(h2Results.map(\.rate))
            print(String(format: "  median h2load     : %9.0f req/s", h2))
            print(
                String(
                    format: "  client/h2load: %.0f%% (aim ≥ 50%%); apns-sim under h2load: %.0f req/s (aim ≥ 20000)",
                    median.rate / h2 * 100, h2))
            let clientMedian = middle(clientCPU)
            let h2Median = middle(h2CPU)
            print(
                String(
                    format:
                        "  machine CPU per request (simulator included): client %.0f µs, h2load %.0f µs (h2load/client %.0f%%)",
                    clientMedian, h2Median, h2Median / clientMedian * 100))
        } else {
            print("  h2load: not run (\(h2load) missing or failed)")
        }
        print("  apns-sim: \(statistics.connectionsAccepted) connections accepted, \(statistics.requests) requests")
    }

    private struct RunResult {
        var rate: Double
        var p50: Double
        var p99: Double
        var delivered: Int
    }

    private func push(
        client: APNsClient,
        notification: APNsNotification,
        bundleID: String,
        count: Int
    ) async throws -> RunResult {
        let window = connections * streams
        let clock = ContinuousClock()
        let start = clock.now
        var latencies: [Double] = []
        latencies.reserveCapacity(count)
        var delivered = 0
        try await withThrowingTaskGroup(of: (Double, Bool).self) { group in
            var started = 0
            // Distinct apns-ids from a counter, as the worker's deterministic ids are: `UUID()` reads
            // /dev/urandom on every call here and would be measured as client cost.
            let base = UInt64.random(in: 0...UInt64.max)
            func addOne() {
                var copy = notification
                copy.apnsID = Self.uuid(base, UInt64(started))
                let pushed = copy
                group.addTask {
                    let begin = clock.now
                    let outcome = await client.send(pushed, app: bundleID)
                    let elapsed = begin.duration(to: clock.now)
                    return (elapsed.seconds, outcome.status == 200)
                }
                started += 1
            }
            while started < min(window, count) { addOne() }
            while let (latency, ok) = try await group.next() {
                latencies.append(latency)
                if ok { delivered += 1 }
                if started < count { addOne() }
            }
        }
        let total = start.duration(to: clock.now)
        let seconds = total.seconds
        latencies.sort()
        return RunResult(
            rate: Double(count) / seconds, p50: percentile(latencies, 0.50), p99: percentile(latencies, 0.99),
            delivered: delivered)
    }

    /// A version 8 (RFC 9562 custom) UUID from two 64-bit halves.
    static func uuid(_ high: UInt64, _ low: UInt64) -> UUID {
        var bytes = [UInt8](repeating: 0, count: 16)
        for index in 0..<8 {
            bytes[index] = UInt8(truncatingIfNeeded: high >> (56 - 8 * index))
            bytes[8 + index] = UInt8(truncatingIfNeeded: low >> (56 - 8 * index))
        }
        bytes[6] = (bytes[6] & 0x0F) | 0x80
        bytes[8] = (bytes[8] & 0x3F) | 0x80
        return UUID(
            uuid: (
                bytes[0], bytes[1], bytes[2], bytes[3], bytes[4], bytes[5], bytes[6], bytes[7], bytes[8], bytes[9],
                bytes[10], bytes[11], bytes[12], bytes[13], bytes[14], bytes[15]
            ))
    }

    private struct H2LoadResult {
        var rate: Double
        var meanLatency: String
        var statusLine: String
    }

    private func runH2load(arguments: [String]) throws -> H2LoadResult? {
        guard FileManager.default.isExecutableFile(atPath: h2load) else { return nil }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: h2load)
        process.arguments = arguments
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = FileHandle.nullDevice
        try process.run()
        let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        // "finished in 1.02s, 19607.84 req/s, 1.23MB/s"
        guard let finished = output.split(separator: "\n").first(where: { $0.hasPrefix("finished in") }),
            let rateText = finished.split(separator: ",").dropFirst().first?.split(separator: " ").first,
            let rate = Double(rateText)
        else { return nil }
        let status = output.split(separator: "\n").first { $0.hasPrefix("status codes:") }.map(String.init) ?? ""
        let mean =
            output.split(separator: "\n").first { $0.hasPrefix("time for request:") }
            .map { $0.split(separator: " ", omittingEmptySubsequences: true) }
            .flatMap { $0.count > 5 ? String($0[5]) : nil } ?? "?"
        return H2LoadResult(rate: rate, meanLatency: mean, statusLine: status)
    }
}
