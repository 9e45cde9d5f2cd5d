import ArgumentParser

/// The foundation's figures in one run: RabbitMQ consume+ack, PostgreSQL INSERTs beside pgbench,
/// HTTP/2 requests beside h2load. Each part is its own subcommand with the same defaults.
struct FoundationBenchmark: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "foundation",
        abstract: "Runs the rabbitmq, postgres and http2 benchmarks one after the other, with their defaults."
    )

    @Option(help: "Seconds per PostgreSQL measurement.") var postgresSeconds = 10
    @Option(help: "Requests for the HTTP/2 client and for h2load, each.") var http2Requests = 100_000

    func run() async throws {
        print("══ RabbitMQ: publish with confirms, then consume+ack ══")
        let rabbit = try RabbitMQBenchmark.parse(["--ack-every", "100"])
        try await rabbit.run()
        print("\n══ PostgreSQL: parameterised single-row INSERTs beside pgbench ══")
        let postgres = try PostgresBenchmark.parse(["--seconds", String(postgresSeconds)])
        try await postgres.run()
        print("\n══ HTTP/2 over TLS: the libcurl client beside h2load ══")
        let http2 = try HTTP2Benchmark.parse(["--requests", String(http2Requests)])
        try await http2.run()
    }
}
