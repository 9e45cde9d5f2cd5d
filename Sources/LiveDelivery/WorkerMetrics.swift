import CoreMetrics
import Foundation
public import Prometheus
import Synchronization

/// The worker's metrics, created on one factory (a Prometheus registry served on /metrics).
///
/// - `livedelivery_events_total{type,outcome}`: applied, duplicate, rejected.
/// - `livedelivery_pushes_total{app,kind,outcome,reason}`: every APNs attempt.
/// - `livedelivery_push_latency_seconds{app}`: histogram of APNs round trips.
/// - `livedelivery_dead_letters_total{reason}`.
/// - `livedelivery_sweeps_total{reason}`: sweeper decisions.
/// - `livedelivery_batch_seconds`: histogram of batch transactions.
/// - `livedelivery_paused_apps_total{app,reason}`: configuration faults that paused an app.
/// - `livedelivery_outbox_unreadable_total`: claimed outbox rows whose push could not be read (not
///   sent; tried again after their lease).
/// - `livedelivery_state_reads_total{source}`: order states read under their row lock, from the
///   worker's cache (`cache`) or sent by the database (`database`).
public final class WorkerMetrics: Sendable {
    public let registry: PrometheusCollectorRegistry
    let factory: PrometheusMetricsFactory
    private let batchTimer: CoreMetrics.Timer

    public init(registry: PrometheusCollectorRegistry = PrometheusCollectorRegistry()) {
        self.registry = registry
        var factory = PrometheusMetricsFactory(registry: registry)
        factory.defaultDurationHistogramBuckets = [
            .milliseconds(1), .milliseconds(2), .milliseconds(5), .milliseconds(10), .milliseconds(25),
            .milliseconds(50), .milliseconds(100), .milliseconds(250), .milliseconds(500), .seconds(1),
            .milliseconds(2500), .seconds(5), .seconds(10),
        ]
        self.factory = factory
        self.batchTimer = CoreMetrics.Timer(label: "livedelivery_batch_seconds", dimensions: [], factory: factory)
    }

    func event(type: String, outcome: String) {
        let type =
            ["order.status", "activity.token", "activity.push_to_start_token", "activity.ended"].contains(type)
            ? type : "other"
        Counter(
            label: "livedelivery_events_total", dimensions: [("type", type), ("outcome", outcome)], factory: factory
        )
        .increment()
    }

    func push(app: String, kind: String, outcome: String, reason: String, latency: Duration) {
        Counter(
            label: "livedelivery_pushes_total",
            dimensions: [("app", app), ("kind", kind), ("outcome", outcome), ("reason", reason)], factory: factory
        ).increment()
        CoreMetrics.Timer(label: "livedelivery_push_latency_seconds", dimensions: [("app", app)], factory: factory)
            .recordNanoseconds(latency.nanoseconds)
    }

    func deadLetter(reason: String) {
        Counter(label: "livedelivery_dead_letters_total", dimensions: [("reason", reason)], factory: factory)
            .increment()
    }

    func sweep(reason: String) {
        Counter(label: "livedelivery_sweeps_total", dimensions: [("reason", reason)], factory: factory).increment()
    }

    func paused(app: String, reason: String) {
        Counter(
            label: "livedelivery_paused_apps_total", dimensions: [("app", app), ("reason", reason)], factory: factory
        )
        .increment()
    }

    func unreadableOutboxRow() {
        Counter(label: "livedelivery_outbox_unreadable_total", dimensions: [], factory: factory).increment()
    }

    func stateReads(cached: Int, fetched: Int) {
        if cached > 0 {
            Counter(label: "livedelivery_state_reads_total", dimensions: [("source", "cache")], factory: factory)
                .increment(by: Int64(cached))
        }
        if fetched > 0 {
            Counter(label: "livedelivery_state_reads_total", dimensions: [("source", "database")], factory: factory)
                .increment(by: Int64(fetched))
        }
    }

    func batch(duration: Duration) { batchTimer.recordNanoseconds(duration.nanoseconds) }

    /// The Prometheus text exposition.
    public func exposition() -> [UInt8] { registry.emitToBuffer() }
}

extension Duration {
    var nanoseconds: Int64 {
        components.seconds * 1_000_000_000 + components.attoseconds / 1_000_000_000
    }
    var seconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
}

/// What /healthz and /readyz report: each dependency's state, set by the services.
public final class WorkerHealth: Sendable {
    public struct Snapshot: Sendable, Hashable {
        public var database = false
        public var broker = false
        public var consuming = false
        public var shuttingDown = false
        public var pausedApps: [String] = []
        public var ready: Bool { database && broker && consuming && !shuttingDown }
    }

    private let state = Mutex(Snapshot())
    public init() {}

    public var snapshot: Snapshot { state.withLock { $0 } }
    func update(_ body: (inout Snapshot) -> Void) { state.withLock { body(&$0) } }
}
