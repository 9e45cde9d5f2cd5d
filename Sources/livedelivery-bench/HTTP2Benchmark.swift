import ArgumentParser
import Foundation
import HTTP2
import Logging
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// `livedelivery-bench http2`: requests/s through ``HTTP2Client`` beside `h2load` against the same
/// local `nghttpd` (HTTP/2 over TLS, `--echo-upload`), with the same connections, streams, request
/// count and POST body.
struct HTTP2Benchmark: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "http2",
        abstract: "HTTP2Client requests/s beside h2load against the same local nghttpd (h2 over TLS)."
    )

    @Option(help: "Requests for the client and for h2load, each (split over the rounds).") var requests = 100_000
    @Option(help: "Alternating client / h2load rounds.") var rounds = 4
    @Option(help: "Connections (client maxConnectionsPerHost, h2load -c).") var connections = 2
    @Option(help: "Concurrent streams per connection (h2load -m).") var streams = 100
    @Option(help: "POST body size in bytes.") var bodySize = 300
    @Flag(
        help: """
            Serve an empty file instead of echoing the body. nghttpd's --echo-upload writes each body \
            to a new file in /tmp, which makes nghttpd the bottleneck; this shows the client's own limit.
            """
    )
    var emptyResponse = false

    func run() async throws {
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("livedelivery-bench-http2-\(getpid())")
        try FileManager.default.createDirectory(
            at: directory.appendingPathComponent("htdocs"),
            withIntermediateDirectories: true
        )
        defer { try? FileManager.default.removeItem(at: directory) }
        let key = directory.appendingPathComponent("key.pem").path
        let certificate = directory.appendingPathComponent("cert.pem").path
        let bodyFile = directory.appendingPathComponent("body.json").path
        let body = Self.body(size: bodySize)
        try Data(body).write(to: URL(fileURLWithPath: bodyFile))
        try Data().write(to: directory.appendingPathComponent("htdocs/empty"))
        _ = try await runProgram(
            "/usr/bin/openssl",
            [
                "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                "-keyout", key, "-out", certificate, "-days", "1", "-subj", "/CN=localhost",
                "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
            ]
        )

        let (server, port) = try await Self.startNGHTTPD(
            documentRoot: directory.appendingPathComponent("htdocs").path,
            key: key,
            certificate: certificate,
            echo: !emptyResponse
        )
        defer { kill(server.processIdentifier, SIGKILL) }
        let url = "https://localhost:\(port)" + (emptyResponse ? "/empty" : "/echo")
        print(
            "nghttpd (\(emptyResponse ? "empty response" : "--echo-upload")) on 127.0.0.1:\(port);",
            "\(requests) POSTs of \(body.count) bytes, -c \(connections) -m \(streams)"
        )

        // Alternate client and h2load rounds so that drift (machine load, nghttpd's /tmp churn)
        // hits both alike; the totals compare overall rates.
        let client = try await makeClient(certificate: certificate)
        let request = HTTP2Request(url: url, body: body)
        let expectedBody = emptyResponse ? 0 : body.count
        let workers = connections * streams
        try await Self.drive(
            client: client,
            request: request,
            expectedBody: expectedBody,
            total: workers,
            workers: workers
        )
        let perRound = max(1, requests / rounds)
        var clientSeconds = 0.0
        var clientFailures = 0
        var h2loadSeconds = 0.0
        var h2loadFailures = 0
        for round in 1...rounds {
            let started = ContinuousClock.now
            clientFailures += try await Self.drive(
                client: client,
                request: request,
                expectedBody: expectedBody,
                total: perRound,
                workers: workers
            )
            let elapsed = (ContinuousClock.now - started).seconds
            clientSeconds += elapsed
            let h2load = try await runH2Load(url: url, bodyFile: bodyFile, count: perRound)
            h2loadSeconds += Double(perRound) / h2load.rate
            h2loadFailures += perRound - h2load.succeeded
            print(
                String(
                    format: "round %d: HTTP2Client %8.0f req/s   h2load %8.0f req/s",
                    round,
                    Double(perRound) / elapsed,
                    h2load.rate
                )
            )
        }
        let statistics = client.statistics
        await client.shutdown()
        let total = Double(perRound * rounds)
        let clientRate = total / clientSeconds
        let h2loadRate = total / h2loadSeconds
        print(
            String(
                format: "HTTP2Client: %9.0f req/s  (%d failed or unexpected, %d connections opened)",
                clientRate,
                clientFailures,
                statistics.connectionsOpened
            )
        )
        print(String(format: "h2load:      %9.0f req/s  (%d not succeeded)", h2loadRate, h2loadFailures))
        print(String(format: "ratio:       %9.1f %%  (HTTP2Client / h2load)", clientRate / h2loadRate * 100))
    }

    private func makeClient(certificate: String) async throws -> HTTP2Client {
        var configuration = HTTP2Client.Configuration()
        configuration.caFile = certificate
        configuration.maxConnectionsPerHost = connections
        configuration.maxConcurrentStreamsPerConnection = streams
        configuration.maxRequestsInFlight = connections * streams
        var logger = Logger(label: "livedelivery-bench.http2")
        logger.logLevel = .warning
        return try HTTP2Client(configuration: configuration, logger: logger)
    }

    /// Runs `total` requests on `workers` concurrent tasks; returns how many failed or were not 200.
    @discardableResult
    private static func drive(
        client: HTTP2Client,
        request: HTTP2Request,
        expectedBody: Int,
        total: Int,
        workers: Int
    ) async throws -> Int {
        let next = Counter()
        return try await withThrowingTaskGroup(of: Int.self) { group in
            for _ in 0..<workers {
                group.addTask {
                    var failures = 0
                    while next.take() < total {
                        do {
                            let response = try await client.execute(request)
                            if response.status != 200 || response.body.count != expectedBody {
                                failures += 1
                                print("unexpected response: status \(response.status), \(response.body.count) bytes")
                            }
                        } catch {
                            failures += 1
                            print("failed: \(error)")
                        }
                    }
                    return failures
                }
            }
            return try await group.reduce(0, +)
        }
    }

    private func runH2Load(url: String, bodyFile: String, count: Int) async throws -> (rate: Double, succeeded: Int) {
        let output = try await runProgram(
            "/usr/bin/h2load",
            ["-c", "\(connections)", "-m", "\(streams)", "-n", "\(count)", "-d", bodyFile, url]
        )
        // "finished in 6.41s, 15594.38 req/s, 4.87MB/s"
        // "requests: 30000 total, 30000 started, 30000 done, 30000 succeeded, 0 failed, …"
        let lines = output.split(separator: "\n")
        guard let finished = lines.first(where: { $0.hasPrefix("finished in") }),
            let summary = lines.first(where: { $0.hasPrefix("requests:") })
        else { throw BenchmarkError(description: "unexpected h2load output:\n\(output)") }
        let fields = finished.split(separator: " ")
        let counts = summary.split(separator: " ")
        guard let rateIndex = fields.firstIndex(where: { $0.hasPrefix("req/s") }), rateIndex > 0,
            let rate = Double(fields[rateIndex - 1]),
            let succeededIndex = counts.firstIndex(where: { $0.hasPrefix("succeeded") }), succeededIndex > 0,
            let succeeded = Int(counts[succeededIndex - 1])
        else { throw BenchmarkError(description: "cannot parse h2load output:\n\(output)") }
        return (rate, succeeded)
    }

    // MARK: Helpers

    private static func body(size: Int) -> [UInt8] {
        let prefix = Array(#"{"aps":{"event":"update","timestamp":1700000000,"content-state":{"note":""#.utf8)
        let suffix = Array(#""}}}"#.utf8)
        let filler = max(0, size - prefix.count - suffix.count)
        return prefix + [UInt8](repeating: UInt8(ascii: "x"), count: filler) + suffix
    }

    private static func startNGHTTPD(
        documentRoot: String,
        key: String,
        certificate: String,
        echo: Bool
    ) async throws -> (Process, Int) {
        for _ in 0..<10 {
            let port = try freeLoopbackPort()
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/sbin/nghttpd")
            process.arguments =
                (echo ? ["--echo-upload"] : []) + ["-a", "127.0.0.1", "-d", documentRoot, "\(port)", key, certificate]
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            try process.run()
            for _ in 0..<500 where process.isRunning {
                if canConnect(port: port) { return (process, port) }
                try await Task.sleep(for: .milliseconds(10))
            }
            if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        }
        throw BenchmarkError(description: "nghttpd did not start")
    }

    private static func freeLoopbackPort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw BenchmarkError(description: "socket() failed") }
        defer { close(fd) }
        var address = loopback(port: 0)
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
                bind(fd, pointer, length) == 0 && getsockname(fd, pointer, &length) == 0
            }
        }
        guard bound else { throw BenchmarkError(description: "bind() failed") }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    private static func canConnect(port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = loopback(port: port)
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
    }

    private static func loopback(port: Int) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
        return address
    }
}

/// Hands out request numbers to the benchmark's worker tasks.
private final class Counter: Sendable {
    private let value = Atomic(0)

    func take() -> Int { value.wrappingAdd(1, ordering: .relaxed).oldValue }
}
