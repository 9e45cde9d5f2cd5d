import ArgumentParser

struct RabbitMQBenchmark: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "rabbitmq", abstract: "RabbitMQ module throughput.")

    func run() async throws {
        print("rabbitmq: not implemented yet")
    }
}
