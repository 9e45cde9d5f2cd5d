import ArgumentParser
import LiveDeliveryCore

/// `livedelivery-bench`: prints throughput figures. Benchmarks are measurements, never tests.
@main
struct BenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "livedelivery-bench",
        abstract: "Prints throughput and latency figures for the LiveDelivery building blocks.",
        version: LiveDeliveryVersion.description,
        subcommands: [
            FoundationBenchmark.self, RabbitMQBenchmark.self, PostgresBenchmark.self, HTTP2Benchmark.self,
            APNsBenchmark.self, WorkerBenchmark.self, SoakBenchmark.self, ReportsBenchmark.self, EventsBenchmark.self,
            EventStream.self, CellsBenchmark.self,
        ]
    )

    /// Runs the command; a synchronous one (``EventStream``) without ever starting Swift's concurrency
    /// threads, which valgrind 3.19 cannot follow (it stops at the first thread libdispatch creates).
    static func main() async {
        do {
            var command = try parseAsRoot()
            if var asynchronous = command as? any AsyncParsableCommand {
                try await asynchronous.run()
            } else {
                try command.run()
            }
        } catch {
            exit(withError: error)
        }
    }
}

extension Duration {
    /// The duration in seconds, for rates and printed figures.
    var seconds: Double {
        Double(components.seconds) + Double(components.attoseconds) / 1e18
    }
}
