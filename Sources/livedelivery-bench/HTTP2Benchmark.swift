import ArgumentParser

struct HTTP2Benchmark: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "http2", abstract: "HTTP2 module throughput.")

    func run() async throws {
        print("http2: not implemented yet")
    }
}
