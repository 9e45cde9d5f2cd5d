import CoreMetrics
import Foundation
import LiveDeliveryCore
package import Prometheus
import Synchronization

/// The worker's metrics, created on one factory (a Prometheus registry served on /metrics).
///
/// - `livedelivery_events_total{type,outcome}`: applied, duplicate, rejected.
/// - `livedelivery_events_forwarded_total{to}`: events forwarded to the cell their order belongs to.
/// - `livedelivery_pushes_total{app,kind,outcome,reason}`: every APNs attempt.
/// - `livedelivery_push_latency_seconds{app}`: histogram of APNs round trips.
/// - `livedelivery_dead_letters_total{reason}`.
/// - `livedelivery_sweeps_total{reason}`: sweeper decisions.
/// - `livedelivery_limits_total{limit}`: decisions that refused what a publisher asked at a bound
///   (`activity_limit`, `push_to_start_device_limit`; docs/events.md, Limits).
/// - `livedelivery_batch_seconds`: histogram of batch transactions.
/// - `livedelivery_database_unavailable_total{component}`: times a batch (`consumer`) or a claim of due
///   pushes (`dispatcher`) found the database unavailable and waited to try again (a failover, a restart).
/// - `livedelivery_trace_headers_refused_total`: messages whose `traceparent` header was malformed (not
///   traced; the header is not stored).
/// - `livedelivery_paused_apps_total{app,reason}`: configuration faults that paused an app.
/// - `livedelivery_outbox_unreadable_total`: claimed outbox rows whose push could not be read (not
///   sent; tried again after their lease).
/// - `livedelivery_state_reads_total{source}`: order states read under their row lock, from the
///   worker's cache (`cache`) or sent by the database (`database`).
/// - `livedelivery_event_age_at_push_seconds{app}`: histogram, from the newest event of the order a
///   push carries (`occurred_at`) to APNs accepting the push.
///
/// Gauges of this process, set when scraped (``collect()``): `livedelivery_pushes_in_flight`,
/// `livedelivery_db_pool_connections{state}` (`in_use`, `idle`), `livedelivery_db_pool_waiters`,
/// `livedelivery_build_info{version,revision}`, and `process_cpu_seconds_total`,
/// `process_resident_memory_bytes`, `process_open_fds`, `process_start_time_seconds`.
///
/// A worker of a cell (`cell.name`) adds the label `cell` to every series, so that one Prometheus and one
/// dashboard serve every cell.
///
/// Gauges of the whole deployment, sampled by every worker (``MetricsSampler``): the same value on each
/// worker, so aggregate them with `max`, never `sum`: `livedelivery_pushes_pending{app}`,
/// `livedelivery_push_oldest_due_age_seconds{app}`, `livedelivery_apps_paused{app}`,
/// `livedelivery_queue_messages{queue,role}`, `livedelivery_queue_consumers{queue,role}`.
package final class WorkerMetrics: Sendable {
    package let registry: PrometheusCollectorRegistry
    let factory: any MetricsFactory
    /// Labels every series carries: the worker's cell, if any.
    let constantLabels: [(String, String)]
    private let batchTimer: CoreMetrics.Timer
    /// Read on every scrape, to set this process's gauges.
    private let collectors = Mutex<[@Sendable (WorkerMetrics) -> Void]>([])
    /// Label values a sampled gauge was last set for, by gauge: a value that disappeared is set to 0.
    private let sampledLabels = Mutex<[String: Set<String>]>([:])
    private let process: ProcessGauges

    package init(registry: PrometheusCollectorRegistry = PrometheusCollectorRegistry(), cell: String? = nil) {
        self.registry = registry
        constantLabels = cell.map { [("cell", $0)] } ?? []
        var factory = PrometheusMetricsFactory(registry: registry)
        factory.defaultDurationHistogramBuckets = [
            .milliseconds(1), .milliseconds(2), .milliseconds(5), .milliseconds(10), .milliseconds(25),
            .milliseconds(50), .milliseconds(100), .milliseconds(250), .milliseconds(500), .seconds(1),
            .milliseconds(2500), .seconds(5), .seconds(10),
        ]
        self.factory = constantLabels.isEmpty ? factory : LabelingMetricsFactory(base: factory, labels: constantLabels)
        self.batchTimer = CoreMetrics.Timer(label: "livedelivery_batch_seconds", dimensions: [], factory: self.factory)
        self.process = ProcessGauges(registry: registry, labels: constantLabels)
        gauge(
            "livedelivery_build_info",
            [("version", LiveDeliveryVersion.version), ("revision", LiveDeliveryVersion.revision)]
        ).set(to: 1)
    }

    /// Runs `collector` on every scrape, before the exposition (it sets gauges from in-memory state).
    func addCollector(_ collector: @escaping @Sendable (WorkerMetrics) -> Void) {
        collectors.withLock { $0.append(collector) }
    }

    func gauge(_ name: String, _ labels: [(String, String)] = []) -> Prometheus.Gauge {
        registry.makeGauge(descriptor: Self.descriptor(name), labels: labels + constantLabels)
    }

    /// A series' name with its `# HELP` text.
    static func descriptor(_ name: String) -> MetricNameDescriptor {
        MetricNameDescriptor(metricName: name, unitName: "", helpText: help[name] ?? "")
    }

    static let help: [String: String] = [
        "livedelivery_build_info": "The worker's version and source revision (always 1).",
        "livedelivery_pushes_in_flight": "Pushes this worker has sent or is recording.",
        "livedelivery_db_pool_connections": "This worker's database connections, in use or idle.",
        "livedelivery_db_pool_waiters": "Tasks of this worker waiting for a database connection.",
        "livedelivery_pushes_pending":
            "Activities with a push waiting to be sent or retried (deployment-wide: take max).",
        "livedelivery_push_oldest_due_age_seconds":
            "Age of the oldest push that is due and not being sent (deployment-wide: take max).",
        "livedelivery_apps_paused":
            "1 while an app is paused after an APNs configuration fault (deployment-wide: take max).",
        "livedelivery_queue_messages": "Messages ready in a broker queue (deployment-wide: take max).",
        "livedelivery_queue_consumers": "Consumers of a broker queue (deployment-wide: take max).",
        "livedelivery_event_age_at_push_seconds":
            "From the newest event of the order a push carries to APNs accepting the push.",
        "process_cpu_seconds_total": "CPU time of this process, user and system.",
        "process_resident_memory_bytes": "Resident memory of this process.",
        "process_open_fds": "Open file descriptors of this process.",
        "process_start_time_seconds": "When this process started, in seconds since the epoch.",
    ]

    /// Sets one value per label (`label` = key) of a sampled gauge; keys seen before and absent now go to 0.
    func setSampled(
        _ name: String, label: String, _ values: [String: Double],
        more: (String) -> [(String, String)] = { _ in [] }
    ) {
        let gone = sampledLabels.withLock { known in
            let gone = (known[name] ?? []).subtracting(values.keys)
            known[name, default: []].formUnion(values.keys)
            return gone
        }
        for (key, value) in values { gauge(name, [(label, key)] + more(key)).set(to: value) }
        for key in gone { gauge(name, [(label, key)] + more(key)).set(to: 0) }
    }

    func eventAgeAtPush(app: String, seconds: Double) {
        registry.makeValueHistogram(
            descriptor: Self.descriptor("livedelivery_event_age_at_push_seconds"),
            labels: [("app", app)] + constantLabels,
            buckets: [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600]
        ).record(max(0, seconds))
    }

    func event(type: String, outcome: String) {
        let type =
            EventType.known.contains(EventType(rawValue: type))
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

    func limit(_ code: Decision.Code) {
        Counter(label: "livedelivery_limits_total", dimensions: [("limit", code.rawValue)], factory: factory)
            .increment()
    }

    /// An event forwarded to the cell its order belongs to (`to`).
    func forwarded(to cell: String) {
        Counter(label: "livedelivery_events_forwarded_total", dimensions: [("to", cell)], factory: factory).increment()
    }

    func databaseUnavailable(component: String) {
        Counter(
            label: "livedelivery_database_unavailable_total", dimensions: [("component", component)], factory: factory
        ).increment()
    }

    func traceHeaderRefused() {
        Counter(label: "livedelivery_trace_headers_refused_total", dimensions: [], factory: factory).increment()
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

    /// Sets the gauges read on a scrape.
    package func collect() {
        process.update()
        for collector in collectors.withLock({ $0 }) { collector(self) }
    }

    /// The Prometheus text exposition, after ``collect()``.
    package func exposition() -> [UInt8] {
        collect()
        return registry.emitToBuffer()
    }
}

/// The standard `process_*` series, read from `/proc/self` when scraped (Linux; absent elsewhere).
struct ProcessGauges: Sendable {
    let cpu: Prometheus.Gauge
    let resident: Prometheus.Gauge
    let openFDs: Prometheus.Gauge
    let startTime: Prometheus.Gauge

    init(registry: PrometheusCollectorRegistry, labels: [(String, String)]) {
        func gauge(_ name: String) -> Prometheus.Gauge {
            labels.isEmpty
                ? registry.makeGauge(descriptor: WorkerMetrics.descriptor(name))
                : registry.makeGauge(descriptor: WorkerMetrics.descriptor(name), labels: labels)
        }
        cpu = gauge("process_cpu_seconds_total")
        resident = gauge("process_resident_memory_bytes")
        openFDs = gauge("process_open_fds")
        startTime = gauge("process_start_time_seconds")
        if let start = Self.startTime() { startTime.set(to: start) }
    }

    func update() {
        guard let fields = Self.statFields() else { return }
        let ticks = Double(sysconf(Int32(_SC_CLK_TCK)))
        // Fields after the command name: utime is the 14th of the whole line, stime the 15th, rss the 24th.
        if fields.count > 21, let user = Double(fields[11]), let system = Double(fields[12]), ticks > 0 {
            cpu.set(to: (user + system) / ticks)
            if let pages = Double(fields[21]) { resident.set(to: pages * Double(sysconf(Int32(_SC_PAGESIZE)))) }
        }
        if let descriptors = try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd") {
            openFDs.set(to: Double(descriptors.count))
        }
    }

    /// `/proc/self/stat` after the command name (which may hold spaces): field 3 (state) onwards.
    private static func statFields() -> [Substring]? {
        guard let stat = try? String(contentsOfFile: "/proc/self/stat", encoding: .utf8),
            let end = stat.lastIndex(of: ")")
        else { return nil }
        return stat[stat.index(after: end)...].split(separator: " ")
    }

    /// Seconds since the epoch at which this process started: boot time plus its start in ticks.
    private static func startTime() -> Double? {
        guard let fields = statFields(), fields.count > 19, let startTicks = Double(fields[19]),
            let boot = try? String(contentsOfFile: "/proc/stat", encoding: .utf8)
                .split(separator: "\n").first(where: { $0.hasPrefix("btime ") })?.split(separator: " ").last
                .flatMap({ Double($0) })
        else { return nil }
        return boot + startTicks / Double(sysconf(Int32(_SC_CLK_TCK)))
    }
}

extension Duration {
    var nanoseconds: Int64 {
        components.seconds * 1_000_000_000 + components.attoseconds / 1_000_000_000
    }
    var seconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
}

/// What /healthz and /readyz report: each dependency's state, set by the services.
package final class WorkerHealth: Sendable {
    package struct Snapshot: Sendable, Hashable {
        package var database = false
        package var broker = false
        package var consuming = false
        package var shuttingDown = false
        package var pausedApps: [String] = []
        package var ready: Bool { database && broker && consuming && !shuttingDown }
    }

    private let state = Mutex(Snapshot())
    package init() {}

    package var snapshot: Snapshot { state.withLock { $0 } }
    func update(_ body: (inout Snapshot) -> Void) { state.withLock { body(&$0) } }
}

/// A factory that adds the same labels to every metric it makes (a cell's `cell`).
struct LabelingMetricsFactory: MetricsFactory {
    let base: any MetricsFactory
    let labels: [(String, String)]

    func makeCounter(label: String, dimensions: [(String, String)]) -> any CounterHandler {
        base.makeCounter(label: label, dimensions: dimensions + labels)
    }

    func makeFloatingPointCounter(label: String, dimensions: [(String, String)]) -> any FloatingPointCounterHandler {
        base.makeFloatingPointCounter(label: label, dimensions: dimensions + labels)
    }

    func makeMeter(label: String, dimensions: [(String, String)]) -> any MeterHandler {
        base.makeMeter(label: label, dimensions: dimensions + labels)
    }

    func makeRecorder(label: String, dimensions: [(String, String)], aggregate: Bool) -> any RecorderHandler {
        base.makeRecorder(label: label, dimensions: dimensions + labels, aggregate: aggregate)
    }

    func makeTimer(label: String, dimensions: [(String, String)]) -> any TimerHandler {
        base.makeTimer(label: label, dimensions: dimensions + labels)
    }

    func destroyCounter(_ handler: any CounterHandler) { base.destroyCounter(handler) }
    func destroyFloatingPointCounter(_ handler: any FloatingPointCounterHandler) {
        base.destroyFloatingPointCounter(handler)
    }
    func destroyMeter(_ handler: any MeterHandler) { base.destroyMeter(handler) }
    func destroyRecorder(_ handler: any RecorderHandler) { base.destroyRecorder(handler) }
    func destroyTimer(_ handler: any TimerHandler) { base.destroyTimer(handler) }
}
