import Foundation
import Logging
import Postgres
import RabbitMQ
import ServiceLifecycle

/// Samples what the whole deployment is waiting on, every `interval`, into gauges (see
/// ``WorkerMetrics``): pending pushes and the age of the oldest due one per app (one aggregate over
/// the outbox, which holds only pushes not yet settled), the apps paused now, and the broker's
/// queue depths and consumers (passive declarations on a connection of its own). After each sample it gives
/// the memory freed since back to the system (``MemoryUpkeep``).
///
/// Scrapes only read the gauges: no scrape runs a query. Every worker samples, so every worker
/// reports the same values; dashboards and alerts take the `max` over workers.
struct MetricsSampler: Service {
    let interval: Duration
    let amqp: WorkerConfiguration.AMQP
    let apps: [String]
    let client: PostgresClient
    let metrics: WorkerMetrics
    let health: WorkerHealth
    let logger: Logger

    func run() async throws {
        var broker: RabbitMQConnection?
        var node = 0
        while !Task.isShuttingDownGracefully && !Task.isCancelled {
            do {
                try await sampleDatabase()
            } catch {
                logger.debug(
                    "metrics: the database could not be sampled", metadata: [LiveDeliveryLoggingKeys.error: "\(error)"])
            }
            do {
                if broker == nil || broker?.isOpen == false {
                    let connected = try await RabbitMQConnection.connect(
                        to: amqp.endpoints, startingAt: node, logger: logger)
                    (broker, node) = (connected.connection, connected.node + 1)
                }
                if let broker { try await sampleBroker(broker) }
            } catch {
                logger.debug(
                    "metrics: the broker could not be sampled", metadata: [LiveDeliveryLoggingKeys.error: "\(error)"])
                await broker?.close()
                broker = nil
            }
            MemoryUpkeep.returnFreedMemory()
            await sleepUnlessShuttingDown(interval)
        }
        await broker?.close()
    }

    /// The label values are the configured apps and `unconfigured` (rows of an app since taken out of
    /// the apps file), never a value from the database alone.
    func sampleDatabase() async throws {
        func label(_ app: String) -> String { apps.contains(app) ? app : "unconfigured" }
        var pending = Dictionary(uniqueKeysWithValues: apps.map { ($0, 0.0) })
        var oldest = pending
        for app in try await Outbox.pendingByApp(client) {
            pending[label(app.bundleID), default: 0] += Double(app.pending)
            oldest[label(app.bundleID)] = max(oldest[label(app.bundleID)] ?? 0, app.oldestDueAge)
        }
        metrics.setSampled("livedelivery_pushes_pending", label: "app", pending)
        metrics.setSampled("livedelivery_push_oldest_due_age_seconds", label: "app", oldest)
        var paused = Dictionary(uniqueKeysWithValues: apps.map { ($0, 0.0) })
        for (app, isPaused) in try await AppPauses.current(client) where apps.contains(app) {
            paused[app] = isPaused ? 1 : 0
        }
        metrics.setSampled("livedelivery_apps_paused", label: "app", paused)
        // /health lists the apps paused now: a pause that ended leaves it.
        let pausedNow = paused.filter { $0.value > 0 }.keys.sorted()
        health.update { $0.pausedApps = pausedNow }
    }

    func sampleBroker(_ connection: RabbitMQConnection) async throws {
        var messages: [String: Double] = [:]
        var consumers: [String: Double] = [:]
        for queue in [amqp.queue, amqp.deadLetterQueue] {
            let info = try await connection.declareQueue(queue, passive: true)
            messages[queue] = Double(info.messageCount)
            consumers[queue] = Double(info.consumerCount)
        }
        // The role names the queue for the alerts and the dashboard, whatever amqp.queue calls it.
        let role = { (queue: String) in [("role", queue == amqp.queue ? "events" : "dead_letter")] }
        metrics.setSampled("livedelivery_queue_messages", label: "queue", messages, more: role)
        metrics.setSampled("livedelivery_queue_consumers", label: "queue", consumers, more: role)
    }
}
