import APNsSimulator
import Foundation
import LiveDelivery
import Logging
import RabbitMQ
import ServiceLifecycle
import TestSupport
import Testing

/// Publishes events with confirms, retrying while the broker is away.
func publish(_ messages: [InboundMessage], exchange: String, url: String) async throws {
    PublishedEvents.record(messages)
    let deadline = ContinuousClock.now + .seconds(60)
    while true {
        do {
            let publisher = try await RabbitMQPublisher.connect(try AMQPConfiguration(url: url), logger: quietLogger)
            for message in messages {
                var properties = RabbitMQMessageProperties()
                properties.messageID = message.messageID
                properties.contentType = "application/json"
                properties.deliveryMode = .persistent
                try await publisher.publish(
                    exchange: exchange, routingKey: message.routingKey, body: message.body, properties: properties)
            }
            await publisher.close()
            return
        } catch {
            if ContinuousClock.now > deadline { throw error }
            try await Task.sleep(for: .milliseconds(200))
        }
    }
}

/// Restarts the fault servers: the worker reconnects with backoff while health reports it, and
/// nothing is lost.
@Suite("Server restarts", .serialized, .exclusiveFaultServers, .timeLimit(.minutes(5)))
struct RestartTests {
    @Test("the broker restarts: the consumer reconnects and carries on")
    func brokerRestart() async throws {
        let fault = try AMQPEndpoints(urls: TestEnvironment.faultAMQPURL)
        try await withWorker(adjust: { $0.amqp.endpoints = fault }) { harness, worker in
            try await whileRunning(worker) {
                try await eventually("the worker is ready") { worker.health.snapshot.ready }
                let order = TestEnvironment.uniqueName("BR")
                let token = Events.token()
                try await publish(
                    [
                        Events.status(order, "confirmed", sequence: 1),
                        Events.activityToken(order, activity: "a", token: token),
                    ],
                    exchange: harness.configuration.amqp.exchange, url: TestEnvironment.faultAMQPURL)
                try await eventually("the first push") { !harness.simulator.pushes(token: token).isEmpty }

                try await RabbitMQBroker.fault.restart()
                try await eventually("the worker is ready again", limit: .seconds(90)) { worker.health.snapshot.ready }
                try await publish(
                    [Events.status(order, "out_for_delivery", sequence: 2, courier: "Sam")],
                    exchange: harness.configuration.amqp.exchange, url: TestEnvironment.faultAMQPURL)
                try await eventually("the newest state is shown", limit: .seconds(60)) {
                    try harness.simulator.pushes(token: token).contains {
                        try contentState($0)["currentStep"] as? String == "delivering"
                    }
                }
            }
            try? await deleteTopology(harness.configuration.amqp)
        }
    }

    @Test("the database restarts: health reports it, then the work goes on")
    func databaseRestart() async throws {
        try await withWorker(postgresServer: TestEnvironment.faultPostgresURL) { harness, worker in
            try await whileRunning(worker) {
                try await eventually("the worker is ready") { worker.health.snapshot.ready }
                try await PostgresServer.fault.stop()
                // Health says so while the database is away (the dispatcher's claims fail; /readyz is 503).
                try await eventually("health reports the database down", limit: .seconds(60)) {
                    !worker.health.snapshot.database && !worker.health.snapshot.ready
                }
                try await PostgresServer.fault.start()
                let order = TestEnvironment.uniqueName("DR")
                let token = Events.token()
                try await publish(
                    [
                        Events.status(order, "confirmed", sequence: 1),
                        Events.activityToken(order, activity: "a", token: token),
                    ],
                    exchange: harness.configuration.amqp.exchange, url: TestEnvironment.amqpURL)
                try await eventually("the push after the restart", limit: .seconds(90)) {
                    !harness.simulator.pushes(token: token).isEmpty
                }
                try await eventually("ready again") { worker.health.snapshot.ready }
            }
            try? await deleteTopology(harness.configuration.amqp)
        }
    }
}
