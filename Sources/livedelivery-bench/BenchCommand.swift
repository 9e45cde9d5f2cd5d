import ArgumentParser

/// `livedelivery-bench`: prints throughput figures. Benchmarks are measurements, never tests.
@main
struct BenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "livedelivery-bench",
        abstract: "Prints throughput and latency figures for the LiveDelivery building blocks.",
        subcommands: [
            FoundationBenchmark.self, RabbitMQBenchmark.self, PostgresBenchmark.self, HTTP2Benchmark.self,
            APNsBenchmark.self,
        ]
    )
}
