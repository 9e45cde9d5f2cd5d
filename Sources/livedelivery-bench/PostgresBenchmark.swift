import ArgumentParser

struct PostgresBenchmark: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "postgres", abstract: "Postgres module throughput.")

    func run() async throws {
        print("postgres: not implemented yet")
    }
}
