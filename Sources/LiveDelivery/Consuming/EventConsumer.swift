import Foundation
import LiveDeliveryCore
package import Logging
package import Postgres
import RabbitMQ
import ServiceLifecycle
import Synchronization

/// Consumes the events queue and applies deliveries in batches (``EventProcessor``); acks a batch
/// only after its transaction committed.
///
/// It connects to the first of the broker's nodes that accepts (`amqp.urls`), and after losing a
/// connection starts with the next node: in a cluster, the quorum queues live on every node, and
/// the deliveries the lost connection held come back to the queue (redelivered), where the inbox
/// makes them change nothing twice.
///
/// At start (and after every reconnect) it declares its topology: the topic exchange, the quorum
/// queue bound with `#` (`x-delivery-limit`, dead-lettering to `<exchange>.dlx`; in a cell, bound to the
/// hash exchange `<exchange>.cells` instead), the fanout DLX and
/// the quorum queue `<queue>.dead-letter`, whose messages (the broker gave up on them) it moves into
/// `dead_letters`. In a cell, every cell's dead-letter queue gets each dead letter of the shared DLX, and
/// stores only those its own queue dead-lettered (`x-first-death-queue`): one cell stores each. With the
/// deployment's list of cells (`cell.all`), an order's event whose order the hash gives another cell is
/// forwarded there (``CellForwarder``) and acked once the broker confirmed the copy; it is never applied here. A lost
/// broker or database is retried with backoff while health reports it. On graceful shutdown it cancels its consumers, finishes and acks what it holds, and returns.
package final class EventConsumer: Service {
    let configuration: WorkerConfiguration.AMQP
    let processor: EventProcessor
    let client: PostgresClient
    let health: WorkerHealth
    let metrics: WorkerMetrics
    let logger: Logger
    /// Consuming waits for it: the database's schema is checked first (``SchemaGuard``).
    let schemaChecked: SchemaGate?
    /// With the deployment's list of cells: forwards the events of other cells' orders.
    let forwarder: CellForwarder?

    package convenience init(
        configuration: WorkerConfiguration.AMQP, processor: EventProcessor, client: PostgresClient,
        health: WorkerHealth, metrics: WorkerMetrics, logger: Logger
    ) throws(LiveDeliveryError) {
        try self.init(
            configuration: configuration, processor: processor, client: client, health: health, metrics: metrics,
            logger: logger, schemaChecked: nil)
    }

    init(
        configuration: WorkerConfiguration.AMQP, processor: EventProcessor, client: PostgresClient,
        health: WorkerHealth, metrics: WorkerMetrics, logger: Logger, schemaChecked: SchemaGate?
    ) throws(LiveDeliveryError) {
        self.schemaChecked = schemaChecked
        self.configuration = configuration
        self.processor = processor
        self.client = client
        self.health = health
        self.metrics = metrics
        var logger = logger
        logger[metadataKey: LiveDeliveryLoggingKeys.queue] = "\(configuration.queue)"
        self.logger = logger
        self.forwarder =
            configuration.cells != nil && configuration.cell != nil
            ? CellForwarder(endpoints: configuration.endpoints, logger: logger) : nil
    }

    package func run() async throws {
        var backoff = Backoff(base: .milliseconds(200), maximum: .seconds(10))
        var nextNode = 0
        while !Task.isShuttingDownGracefully && !Task.isCancelled {
            let connection: RabbitMQConnection
            let node: AMQPConfiguration
            do {
                let connected = try await RabbitMQConnection.connect(
                    to: configuration.endpoints, startingAt: nextNode, logger: logger)
                connection = connected.connection
                node = configuration.endpoints.nodes[connected.node]
                nextNode = connected.node + 1
            } catch {
                health.update { $0.broker = false }
                logger.warning(
                    "cannot connect to RabbitMQ; retrying",
                    metadata: [
                        LiveDeliveryLoggingKeys.error: "\(error.code)",
                        LiveDeliveryLoggingKeys.reason: "\(error.context ?? "")",
                    ])
                await sleepUnlessShuttingDown(backoff.next())
                continue
            }
            var logger = logger
            logger[metadataKey: LiveDeliveryLoggingKeys.broker] = "\(node.host):\(node.port)"
            do {
                try await Self.declareTopology(configuration, on: connection, logger: logger)
                health.update { $0.broker = true }
                backoff.reset()
                if let schemaChecked, !(await schemaChecked.waitUntilOpen()) {
                    await connection.close()
                    break
                }
                try await consume(on: connection, logger: logger)
            } catch {
                logger.warning(
                    "RabbitMQ connection lost; reconnecting", metadata: [LiveDeliveryLoggingKeys.error: "\(error)"])
            }
            health.update {
                $0.broker = false
                $0.consuming = false
            }
            await connection.close()
            if !Task.isShuttingDownGracefully { await sleepUnlessShuttingDown(backoff.next()) }
        }
        await forwarder?.close()
        logger.info("consumer stopped")
    }

    /// The dead-letter queue's own `x-delivery-limit`: a message the worker cannot record in `dead_letters`
    /// (for a reason other than the database being away, which it waits out holding the message) is
    /// returned to the queue at most this many times; then the broker drops it.
    static let deadLetterDeliveryLimit = 20

    /// Declares the exchange, queues, bindings and the dead-letter path (idempotent). A dead-letter queue
    /// an earlier release declared without a delivery limit is kept as it is (its arguments cannot change),
    /// with a warning.
    static func declareTopology(
        _ configuration: WorkerConfiguration.AMQP, on connection: RabbitMQConnection, logger: Logger? = nil
    )
        async throws
    {
        try await connection.declareExchange(configuration.exchange, type: .topic, durable: true)
        try await connection.declareExchange(configuration.deadLetterExchange, type: .fanout, durable: true)
        let limited = try await declareQuorumQueue(
            configuration.deadLetterQueue, arguments: [:],
            optional: ["x-delivery-limit": .int64(Int64(deadLetterDeliveryLimit))],
            groupSize: configuration.quorumGroupSize, on: connection)
        if !limited {
            logger?.warning(
                "the dead-letter queue has no delivery limit (declared so by an earlier release): a message the worker cannot record is redelivered until it can; set one with a policy (docs/operations.md)",
                metadata: [LiveDeliveryLoggingKeys.queue: "\(configuration.deadLetterQueue)"])
        }
        try await connection.bindQueue(
            configuration.deadLetterQueue, exchange: configuration.deadLetterExchange, routingKey: "")
        try await declareQuorumQueue(
            configuration.queue,
            arguments: [
                "x-delivery-limit": .int64(Int64(configuration.deliveryLimit)),
                "x-dead-letter-exchange": .string(configuration.deadLetterExchange),
            ],
            groupSize: configuration.quorumGroupSize, on: connection)
        guard configuration.cell != nil else {
            try await connection.bindQueue(configuration.queue, exchange: configuration.exchange, routingKey: "#")
            return
        }
        // A cell (docs/scaling.md): every event goes through the hash exchange, which gives each order to one
        // cell by its `order_id` header; every user's events also come straight to every cell. A queue that
        // was one deployment's loses its binding to everything.
        try await connection.declareExchange(
            configuration.cellsExchange, type: .consistentHash, durable: true,
            arguments: ["hash-header": .string(OrderRouting.header)])
        try await connection.bindExchange(configuration.cellsExchange, to: configuration.exchange, routingKey: "#")
        // With the list of cells, the queue's weight on the ring is its weight in the hash, so each cell's share
        // is the same in both. The two choose independently, though: they agree on about half the orders of two
        // equal cells (docs/scaling.md), and the workers forward the rest.
        let weight =
            configuration.cell.flatMap { configuration.cells?.cell(named: $0)?.weight } ?? configuration.cellWeight
        try await connection.bindQueue(
            configuration.queue, exchange: configuration.cellsExchange, routingKey: String(weight))
        for type in OrderRouting.everyCell {
            try await connection.bindQueue(
                configuration.queue, exchange: configuration.exchange, routingKey: type.rawValue)
        }
        try await connection.unbindQueue(configuration.queue, exchange: configuration.exchange, routingKey: "#")
    }

    /// Declares a durable quorum queue with `groupSize` members. RabbitMQ reads the member count only
    /// when it creates the queue, yet refuses (406) a declaration that adds it to a queue created
    /// without it (by an earlier release): such a queue is declared again as it is. The same holds for
    /// `optional` arguments this release adds to a queue; returns whether the queue has them.
    @discardableResult
    static func declareQuorumQueue(
        _ name: String, arguments: [String: AMQPValue], optional: [String: AMQPValue] = [:], groupSize: Int,
        on connection: RabbitMQConnection
    ) async throws -> Bool {
        var arguments = arguments
        arguments["x-queue-type"] = .string("quorum")
        let withOptional = arguments.merging(optional) { $1 }
        let sized = ["x-quorum-initial-group-size": AMQPValue.int64(Int64(groupSize))]
        // As this release declares it, then as earlier ones did: each refusal (406) closes the channel only.
        var variants = [(withOptional.merging(sized) { $1 }, true), (withOptional, true)]
        if !optional.isEmpty { variants += [(arguments.merging(sized) { $1 }, false), (arguments, false)] }
        for (index, (declared, hasOptional)) in variants.enumerated() {
            do {
                try await connection.declareQueue(name, durable: true, arguments: declared)
                return hasOptional
            } catch {
                guard error.code == .channelClosed, error.replyCode == 406, index < variants.count - 1 else {
                    throw error
                }
            }
        }
        return false
    }

    private func consume(on connection: RabbitMQConnection, logger: Logger) async throws {
        let deliveries = try await connection.consume(
            queue: configuration.queue, prefetch: UInt16(configuration.prefetch))
        let deadLetters = try await connection.consume(queue: configuration.deadLetterQueue, prefetch: 20)
        health.update { $0.consuming = true }
        logger.info("consuming")
        try await withGracefulShutdownHandler {
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await self.moveDeadLetters(deadLetters) }
                // Each batch is what the broker's stream holds (up to batchSize), taken straight from it.
                while let batch = try await deliveries.nextBatch(max: configuration.batchSize) {
                    try await handle(batch)
                }
                group.cancelAll()
                try? await group.waitForAll()
            }
        } onGracefulShutdown: {
            // Stop the flow; what was received is still processed and acked.
            self.health.update { $0.shuttingDown = true }
            Task {
                try? await deliveries.cancel()
                try? await deadLetters.cancel()
            }
        }
    }

    /// Settles one batch: with the deployment's list of cells, first forwards the events of other cells'
    /// orders (each acked once its copy is confirmed), then applies the rest (``apply(_:)``).
    private func handle(_ batch: [RabbitMQDelivery]) async throws {
        guard let forwarder, let cells = configuration.cells, let own = configuration.cell else {
            return try await apply(batch)
        }
        var local: [RabbitMQDelivery] = []
        var foreign: [(delivery: RabbitMQDelivery, cell: CellAssignment.Cell)] = []
        for delivery in batch {
            if let cell = CellForwarder.destination(delivery, cells: cells, own: own) {
                foreign.append((delivery, cell))
            } else {
                local.append(delivery)
            }
        }
        if !foreign.isEmpty { try await forward(foreign, with: forwarder) }
        if !local.isEmpty { try await apply(local) }
    }

    /// Forwards each delivery to its cell and acks it once the broker confirmed the copy. What could not be
    /// forwarded is held and tried again with backoff (never acked before its copy is confirmed); at shutdown
    /// it goes back to the queue. A duplicate copy (a forward repeated after a lost connection) is absorbed by
    /// the other cell's inbox.
    private func forward(
        _ items: [(delivery: RabbitMQDelivery, cell: CellAssignment.Cell)], with forwarder: CellForwarder
    ) async throws {
        var pending = items
        var backoff = Backoff(base: .milliseconds(100), maximum: .seconds(5))
        while true {
            let confirmed = await forwarder.forward(pending)
            var failed: [(delivery: RabbitMQDelivery, cell: CellAssignment.Cell)] = []
            for (item, ok) in zip(pending, confirmed) {
                guard ok else {
                    failed.append(item)
                    continue
                }
                try await item.delivery.ack()
                metrics.forwarded(to: item.cell.name)
                logger.debug(
                    "event forwarded to its order's cell",
                    metadata: [
                        LiveDeliveryLoggingKeys.eventID: "\(item.delivery.messageID ?? "")",
                        LiveDeliveryLoggingKeys.orderID:
                            "\(item.delivery.headers[OrderRouting.header]?.stringValue ?? "")",
                        LiveDeliveryLoggingKeys.forwardedTo: "\(item.cell.name)",
                    ])
            }
            if failed.isEmpty { return }
            pending = failed
            if Task.isShuttingDownGracefully || Task.isCancelled {
                for item in pending { try await item.delivery.nack(requeue: true) }
                return
            }
            logger.warning(
                "events of other cells' orders cannot be forwarded; they wait",
                metadata: [
                    LiveDeliveryLoggingKeys.count: "\(pending.count)",
                    LiveDeliveryLoggingKeys.forwardedTo: "\(pending[0].cell.name)",
                    LiveDeliveryLoggingKeys.queue: "\(pending[0].cell.queue)",
                ])
            await sleepUnlessShuttingDown(backoff.next())
        }
    }

    /// Applies one batch and settles it. A retriable database failure is retried with backoff
    /// (the messages stay unacknowledged); anything else is retried one message at a time, and a
    /// message that still fails is returned to the queue, where the delivery limit bounds it.
    private func apply(_ batch: [RabbitMQDelivery]) async throws {
        var backoff = Backoff(base: .milliseconds(100), maximum: .seconds(5))
        while true {
            do {
                let outcome = try await processor.process(batch.map(Self.message))
                health.update { $0.database = true }
                try await batch.last?.ack(multiple: true)
                logger.debug(
                    "batch applied",
                    metadata: [
                        LiveDeliveryLoggingKeys.batchSize: "\(batch.count)",
                        LiveDeliveryLoggingKeys.count: "\(outcome.applied)",
                    ])
                return
            } catch let error as PostgresError where error.isRetriable {
                health.update { $0.database = false }
                metrics.databaseUnavailable(component: "consumer")
                logger.warning(
                    "database unavailable; the batch waits",
                    metadata: [LiveDeliveryLoggingKeys.error: "\(error.code)"])
            } catch let waiting as CellHandover.Waiting {
                // An order this cell takes over is not ready to move yet (docs/scaling.md, Adding a cell).
                logger.info(
                    "an order is being taken over from another cell; the batch waits",
                    metadata: [LiveDeliveryLoggingKeys.error: "\(waiting)"])
            } catch let error as RabbitMQError {
                throw error
            } catch {
                guard batch.count > 1 else {
                    logger.error(
                        "event failed; returned to the queue",
                        metadata: [
                            LiveDeliveryLoggingKeys.error: "\(error)",
                            LiveDeliveryLoggingKeys.eventID: "\(batch[0].messageID ?? "")",
                        ])
                    try await batch[0].nack(requeue: true)
                    return
                }
                for delivery in batch { try await apply([delivery]) }
                return
            }
            // The batch waits, unacknowledged, and is tried again; at shutdown it goes back to the queue.
            if Task.isShuttingDownGracefully || Task.isCancelled {
                try await batch.last?.nack(requeue: true, multiple: true)
                return
            }
            await sleepUnlessShuttingDown(backoff.next())
        }
    }

    static func message(_ delivery: RabbitMQDelivery) -> InboundMessage {
        InboundMessage(
            body: delivery.body, routingKey: CellForwarder.routingKey(of: delivery), messageID: delivery.messageID,
            headers: delivery.headers.isEmpty ? [:] : delivery.headers.compactMapValues(\.stringValue))
    }

    /// Whether this worker stores a dead letter that the broker dead-lettered from `queue`. The DLX is one
    /// fanout, so in cells every cell's dead-letter queue receives every cell's dead letters: each cell
    /// stores those of its own queue, and a dead letter is stored, and replayed, once. A message with no
    /// such header (published straight to the DLX) is stored as ever. One deployment stores them all.
    static func isOwnDeadLetter(_ queue: String?, _ configuration: WorkerConfiguration.AMQP) -> Bool {
        guard configuration.cell != nil, let queue else { return true }
        return queue == configuration.queue
    }

    /// Why RabbitMQ dead-letters a message (`x-first-death-reason`).
    static let brokerReasons: Set<String> = ["delivery_limit", "rejected", "expired", "maxlen"]

    /// Moves messages the broker dead-lettered (delivery limit) into `dead_letters`.
    private func moveDeadLetters(_ deliveries: RabbitMQDeliveries) async throws {
        for try await delivery in deliveries {
            guard Self.isOwnDeadLetter(delivery.firstDeathQueue, configuration) else {
                try await delivery.ack()  // another cell's: that cell stores it
                continue
            }
            // The broker's reasons, or one word for anything else: the headers are a publisher's to write
            // (a message published straight to the dead-letter exchange), and the reason is a metric label.
            let reason =
                delivery.firstDeathReason.flatMap { Self.brokerReasons.contains($0) ? $0 : nil } ?? "dead_lettered"
            // A forwarded copy (a cell's) names its routing key; the broker's is the queue's name.
            let routingKey: String
            if let forwarded = delivery.headers[CellForwarder.routingKeyHeader]?.stringValue {
                routingKey = forwarded
            } else if delivery.headers["x-first-death-exchange"] != nil {
                routingKey =
                    delivery.headers["x-death"]?.arrayValue?.first?.tableValue?["routing-keys"]?.arrayValue?.first?
                    .stringValue ?? delivery.routingKey
            } else {
                routingKey = delivery.routingKey
            }
            let insert = DeadLetterRows.insertQuery(
                eventID: delivery.messageID, routingKey: routingKey, reason: reason, field: nil,
                message: "the broker dead-lettered the message (\(reason))", body: delivery.body)
            do {
                let rows = try await recordDeadLetter(insert, delivery: delivery)
                if !rows.isEmpty {
                    metrics.deadLetter(reason: reason)
                    logger.warning(
                        "message dead-lettered by the broker",
                        metadata: [
                            LiveDeliveryLoggingKeys.reason: "\(reason)",
                            LiveDeliveryLoggingKeys.eventID: "\(delivery.messageID ?? "")",
                        ])
                }
                try await delivery.ack()
            } catch let error as RabbitMQError {
                throw error
            } catch {
                // Not recorded: back to the dead-letter queue, whose delivery limit ends the returns.
                logger.warning(
                    "a dead-lettered message cannot be recorded; returned to the dead-letter queue",
                    metadata: [
                        LiveDeliveryLoggingKeys.error: "\(error)",
                        LiveDeliveryLoggingKeys.eventID: "\(delivery.messageID ?? "")",
                        LiveDeliveryLoggingKeys.attempt: "\(delivery.deliveryCount + 1)",
                    ])
                try await delivery.nack(requeue: true)
                await sleepUnlessShuttingDown(.seconds(1))
            }
        }
    }

    /// Writes a dead-lettered message's row, holding the message while the database is away (which does
    /// not count against the dead-letter queue's delivery limit); throws any other failure, and a
    /// database still away at shutdown.
    private func recordDeadLetter(_ insert: PostgresQuery, delivery: RabbitMQDelivery) async throws -> PostgresRows {
        var backoff = Backoff(base: .milliseconds(200), maximum: .seconds(10))
        while true {
            do {
                return try await client.query(insert)
            } catch let error as PostgresError where error.isRetriable && !Task.isShuttingDownGracefully {
                logger.warning(
                    "a dead-lettered message waits for the database",
                    metadata: [
                        LiveDeliveryLoggingKeys.error: "\(error)",
                        LiveDeliveryLoggingKeys.eventID: "\(delivery.messageID ?? "")",
                    ])
                await sleepUnlessShuttingDown(backoff.next())
            }
        }
    }
}
