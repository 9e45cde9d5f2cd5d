import Foundation
import ServerFixtures

/// A single broker of `scripts/services` (the main one, or the fault one of `LIVEDELIVERY_INSTANCE=fault`), for
/// tests that ask the broker itself what it holds (`rabbitmqctl list_queues`, `list_connections`) or restart it.
package struct RabbitMQBroker: Sendable {
    /// `main` or `fault`: where its state is, and its node name and ports.
    let instance: String

    /// The broker `scripts/services start` runs (`LIVEDELIVERY_AMQP_URL`).
    package static let main = RabbitMQBroker(instance: "main")
    /// The broker `LIVEDELIVERY_INSTANCE=fault scripts/services start` runs (`LIVEDELIVERY_FAULT_AMQP_URL`).
    package static let fault = RabbitMQBroker(instance: "fault")

    /// `rabbitmqctl ARGS` against this broker, with its environment (its cookie); what it printed.
    @discardableResult
    package func rabbitmqctl(_ arguments: [String]) async throws -> String {
        try await LocalServers.run(
            try LocalServers.rabbitMQSbin() + "/rabbitmqctl", ["-n", nodeName] + arguments, environment: environment)
    }

    /// `rabbitmqctl ARGS --formatter json` (with `--silent`): the rows of the JSON list it printed.
    package func rows(_ arguments: [String]) async throws -> [[String: Any]] {
        let output = try await rabbitmqctl(arguments + ["--silent", "--formatter", "json"])
        guard let start = output.firstIndex(of: "["),
            let rows = try JSONSerialization.jsonObject(with: Data(output[start...].utf8)) as? [[String: Any]]
        else {
            throw ServerFixtureError("rabbitmqctl \(arguments.joined(separator: " ")) printed no JSON list: \(output)")
        }
        return rows
    }

    /// Stops the broker (`rabbitmqctl stop` with its pid file, which waits until its VM has exited) and starts it
    /// again with the configuration `scripts/services start` wrote; returns once it has booted (`await_startup`).
    package func restart() async throws {
        LocalServers.log("stopping RabbitMQ (node \(nodeName))")
        do {
            try await rabbitmqctl(["-q", "stop", "\(directory)/rabbitmq.pid"])
        } catch {
            // Not running is what a stop wants; anything still serving is not.
            if LocalServers.portListening(port) { throw error }
        }
        LocalServers.log("starting RabbitMQ on 127.0.0.1:\(port) (node \(nodeName))")
        _ = try await LocalServers.daemon(
            "rabbitmq-\(instance)", try LocalServers.rabbitMQSbin() + "/rabbitmq-server", [], environment: environment,
            log: "\(directory)/log/stdout.log", truncateLog: true)
        _ = try await LocalServers.poll("RabbitMQ node \(nodeName) to boot", timeout: .seconds(180), every: .seconds(1))
        {
            () -> Bool? in
            (try? await rabbitmqctl(["-q", "await_startup", "--timeout", "5"])) != nil ? true : nil
        }
    }

    private var nodeName: String { instance == "fault" ? "livedelivery-fault@localhost" : "livedelivery@localhost" }

    private var port: Int { instance == "fault" ? 56730 : 56720 }
    private var directory: String { LocalServers.stateDirectory + (instance == "fault" ? "/fault" : "") + "/rabbitmq" }

    /// The broker's environment, as `scripts/services` gives it.
    private var environment: [String: String] {
        LocalServers.rabbitMQEnvironment(
            home: directory, directory: directory, nodeName: nodeName, port: port, distributionPort: port + 1)
    }
}
