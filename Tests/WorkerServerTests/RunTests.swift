import APNsSimulator
import Foundation
import LiveDelivery
import Logging
import Postgres
import RabbitMQ
import ServiceLifecycle
import TestSupport
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

@Suite("Worker service group", .timeLimit(.minutes(6)))
struct RunTests {
    func get(_ port: Int, _ path: String) async throws -> (status: Int, body: String) {
        let (data, response) = try await URLSession.shared.data(from: URL(string: "http://127.0.0.1:\(port)\(path)")!)
        return ((response as? HTTPURLResponse)?.statusCode ?? 0, String(decoding: data, as: UTF8.self))
    }

    @Test("events published to the broker become pushes; /readyz, /metrics; graceful shutdown returns cleanly")
    func endToEnd() async throws {
        try await withWorker { harness, worker in
            try await whileRunning(worker) {
                let port = try #require(await worker.http.waitUntilListening())
                try await eventually("the worker is ready") { worker.health.snapshot.ready }
                #expect(try await get(port, "/readyz").status == 200)
                #expect(try await get(port, "/healthz").body.contains("\"database\""))

                let publisher = try await RabbitMQPublisher.connect(
                    try AMQPConfiguration(url: TestEnvironment.amqpURL), logger: quietLogger)
                let order = TestEnvironment.uniqueName("R")
                let token = Events.token()
                let messages = [
                    Events.status(order, "confirmed", sequence: 1),
                    Events.activityToken(order, activity: "act-run", token: token),
                    Events.status(order, "out_for_delivery", sequence: 2, courier: "Sam"),
                    InboundMessage(body: Array("[]".utf8), routingKey: "order.status", messageID: "bad-run"),
                ]
                PublishedEvents.record(messages + [messages[2]])
                for message in messages + [messages[2]] {
                    var properties = RabbitMQMessageProperties()
                    properties.messageID = message.messageID
                    properties.contentType = "application/json"
                    properties.deliveryMode = .persistent
                    try await publisher.publish(
                        exchange: harness.configuration.amqp.exchange, routingKey: message.routingKey,
                        body: message.body, properties: properties)
                }
                await publisher.close()

                try await eventually("the newest state is shown on the device") {
                    let shown = harness.simulator.pushes(token: token).filter { $0.status == 200 }
                    return try shown.contains { try contentState($0)["currentStep"] as? String == "delivering" }
                }
                try await eventually("the malformed message is dead-lettered") {
                    try await harness.database.strings("SELECT reason FROM dead_letters") == ["malformed_json"]
                }
                #expect(try await harness.database.count("SELECT count(*) FROM inbox") == 3)
                // The simulator records a push before its answer reaches the worker, which counts it then.
                try await eventually("the push is counted") {
                    try await get(port, "/metrics").body.contains("livedelivery_pushes_total")
                }
                let metrics = try await get(port, "/metrics").body
                #expect(metrics.contains("livedelivery_pushes_total"))
                #expect(metrics.contains("livedelivery_push_latency_seconds_bucket"))
                #expect(metrics.contains("livedelivery_dead_letters_total{reason=\"malformed_json\"} 1"))
                // The gauges of this process, and those sampled from the database and the broker.
                for series in [
                    "livedelivery_pushes_in_flight ", "livedelivery_db_pool_connections{state=\"in_use\"} ",
                    "livedelivery_db_pool_waiters ", "livedelivery_build_info{version=", "process_cpu_seconds_total ",
                    "process_resident_memory_bytes ", "process_open_fds ", "process_start_time_seconds ",
                ] {
                    #expect(metrics.contains(series), "\(series)")
                }
                let queue = harness.configuration.amqp.queue
                try await eventually("the deployment's gauges are sampled") {
                    let text = try await get(port, "/metrics").body
                    // The age is recorded with the push's outcome, moments after APNs answered.
                    return text.contains("livedelivery_queue_consumers{queue=\"\(queue)\",role=\"events\"} 1")
                        && text.contains("livedelivery_event_age_at_push_seconds_count{app=\"com.example.delivery\"}")
                        && text.contains("livedelivery_pushes_pending{app=\"com.example.delivery\"} 0")
                        && text.contains("livedelivery_apps_paused{app=\"com.example.delivery\"} 0")
                        && text.contains("livedelivery_push_oldest_due_age_seconds{app=\"com.example.delivery\"} 0")
                }
            }
            #expect(worker.health.snapshot.consuming == false)
            #expect(worker.health.snapshot.ready == false)
            try await deleteTopology(harness.configuration.amqp)
        }
    }
}

/// Removes the test's exchanges and queues from the shared broker.
func deleteTopology(_ amqp: WorkerConfiguration.AMQP) async throws {
    let (connection, _) = try await RabbitMQConnection.connect(to: amqp.endpoints, logger: quietLogger)
    try await connection.deleteQueue(amqp.queue)
    try await connection.deleteQueue(amqp.deadLetterQueue)
    try await connection.deleteExchange(amqp.exchange)
    try await connection.deleteExchange(amqp.deadLetterExchange)
    await connection.close()
}
