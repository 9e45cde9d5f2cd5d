import Foundation
import LiveDelivery
import LiveDeliveryAdmin
import Logging
import Postgres
import RabbitMQ
import ServiceLifecycle
import TestSupport
import Testing

@Suite("Dead letters: replay through the real broker and consumer, purge", .timeLimit(.minutes(6)))
struct DeadLetterReplayTests {
    @Test("a dead-lettered event replayed twice is applied once; replayed_at is set")
    func replayTwiceAppliesOnce() async throws {
        try await TestDatabase.with { database in
            let pipeline = try Pipeline(database: database)
            var amqp = WorkerConfiguration.AMQP(endpoints: try AMQPEndpoints(urls: TestEnvironment.amqpURL))
            amqp.exchange = TestEnvironment.uniqueName("ld.rep.events")
            amqp.queue = TestEnvironment.uniqueName("ld.rep.queue")
            amqp.batchSize = 10
            let health = WorkerHealth()
            let consumer = try EventConsumer(
                configuration: amqp, processor: pipeline.processor, client: database.client, health: health,
                metrics: pipeline.metrics, logger: quietLogger)
            let group = ServiceGroup(services: [consumer], logger: quietLogger)
            let running = Task { try await group.run() }
            let publisher = try await RabbitMQPublisher.connect(
                try AMQPConfiguration(url: TestEnvironment.amqpURL), logger: quietLogger)
            do {
                try await eventually("the consumer is consuming") { health.snapshot.consuming }
                let order = TestEnvironment.uniqueName("DL")
                let event = Events.status(order, "confirmed", sequence: 1)
                let eventID = try #require(event.messageID)

                // The broker gives up on the event (as after the delivery limit): it reaches the DLX,
                // and the worker moves it into dead_letters.
                try await publisher.publish(
                    exchange: amqp.deadLetterExchange, routingKey: event.routingKey, body: event.body,
                    properties: RabbitMQMessageProperties(contentType: "application/json", messageID: eventID))
                try await eventually("the event is a dead letter") {
                    try await database.count("SELECT count(*) FROM dead_letters") == 1
                }
                #expect(try await database.count("SELECT count(*) FROM inbox") == 0)
                let store = DeadLetterStore(client: database.client)
                let id = try #require(try await store.pendingIDs().first)
                #expect(try await store.list().rows.count == 1)

                // "After the fix": replay twice.
                let replayer = try await DeadLetterReplayer.connect(
                    store: store, endpoints: amqp.endpoints, exchange: amqp.exchange, logger: quietLogger)
                #expect(try await replayer.replay([id]) == [.replayed(id: id, routingKey: "order.status")])
                try await eventually("the replayed event is applied") {
                    try await database.count("SELECT count(*) FROM inbox WHERE event_id = \(eventID)") == 1
                }
                #expect(try await store.get(id)?.replayedAt != nil)
                #expect(try await store.pendingIDs().isEmpty)
                #expect(try await store.list().rows.isEmpty, "replayed rows are hidden by default")
                #expect(try await store.list(includeReplayed: true).rows.count == 1)

                #expect(
                    try await replayer.replay([id, 987_654]) == [
                        .replayed(id: id, routingKey: "order.status"), .notFound(id: 987_654),
                    ])
                // A body kept in part (over 8 KiB) is not replayed: there is nothing whole to send.
                let partial = try #require(
                    try await database.client.query(
                        """
                        INSERT INTO dead_letters (routing_key, reason, message, body, body_length, body_sha256)
                        VALUES ('order.status', 'body_too_large', 'm', '\\x7b'::bytea, 100000, '\\x01'::bytea)
                        RETURNING id
                        """
                    ).first
                ).decode(Int64.self, "id")
                #expect(try await replayer.replay([partial]) == [.notWhole(id: partial, bytes: 100_000)])
                #expect(try await store.get(partial)?.replayedAt == nil)
                try await database.client.query("DELETE FROM dead_letters WHERE id = \(partial)")
                // A later event on the same queue: once it is applied, the second replay was handled.
                let sentinel = Events.status(TestEnvironment.uniqueName("S"), "confirmed", sequence: 1)
                PublishedEvents.record([sentinel])
                try await publisher.publish(
                    exchange: amqp.exchange, routingKey: sentinel.routingKey, body: sentinel.body,
                    properties: RabbitMQMessageProperties(
                        contentType: "application/json", messageID: sentinel.messageID))
                try await eventually("the sentinel is applied") {
                    try await database.count("SELECT count(*) FROM inbox WHERE event_id = \(sentinel.messageID ?? "")")
                        == 1
                }
                await replayer.close()

                #expect(try await database.count("SELECT count(*) FROM inbox WHERE event_id = \(eventID)") == 1)
                #expect(
                    try await database.count(
                        "SELECT count(*) FROM timeline_decisions WHERE order_id = \(order) AND code = 'order_created'")
                        == 1)
                #expect(try await database.count("SELECT count(*) FROM dead_letters") == 1)
                let byReason = try await Report.named("dead-letters-by-reason")!.run(
                    ReportQuery(), client: database.client)
                #expect(byReason.values("replayed") == ["1"] && byReason.values("pending") == ["0"])
            } catch {
                await publisher.close()
                await group.triggerGracefulShutdown()
                _ = try? await running.value
                try? await deleteTopology(amqp)
                throw error
            }
            await publisher.close()
            await group.triggerGracefulShutdown()
            try await running.value
            try await deleteTopology(amqp)
        }
    }

    @Test("purge deletes dead letters older than the retention age (optionally only replayed ones)")
    func purge() async throws {
        try await TestDatabase.with { database in
            for (index, age) in [40, 40, 1].enumerated() {
                let body = Array("old \(index)".utf8)
                try await database.client.query(
                    """
                    INSERT INTO dead_letters (routing_key, reason, message, body, body_sha256, received_at, replayed_at)
                    VALUES ('order.status', 'malformed_json', 'm', \(body), sha256(\(body)),
                            now() - \(age) * interval '1 day', CASE WHEN \(index) = 0 THEN now() END)
                    """)
            }
            let store = DeadLetterStore(client: database.client)
            #expect(try await store.purge(olderThan: 30 * 86_400, replayedOnly: true) == 1)
            #expect(try await store.purge(olderThan: 30 * 86_400) == 1)
            #expect(try await database.count("SELECT count(*) FROM dead_letters") == 1)
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
