import Foundation

/// A single broker of `scripts/services` (the main one, or the fault one of `LIVEDELIVERY_INSTANCE=fault`), for
/// tests that ask the broker itself what it holds (`rabbitmqctl list_queues`, `list_connections`).
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

    private var nodeName: String { instance == "fault" ? "livedelivery-fault@localhost" : "livedelivery@localhost" }

    /// The broker's environment, as `scripts/services` gives it.
    private var environment: [String: String] {
        let offset = instance == "fault" ? 10 : 0
        let directory = LocalServers.stateDirectory + (instance == "fault" ? "/fault" : "") + "/rabbitmq"
        return LocalServers.rabbitMQEnvironment(
            home: directory, directory: directory, nodeName: nodeName, port: 56720 + offset,
            distributionPort: 56721 + offset)
    }
}
