import LiveDelivery
import Logging
import ServiceLifecycle

#if OTLP
import OTel
import Tracing

/// The worker's spans over OTLP/HTTP (swift-otel), configured by OpenTelemetry's standard variables
/// (``TraceExportSettings`` says when). Off, no tracer is bootstrapped: the spans go to swift-distributed-tracing's
/// no-op tracer. Traces only: the metrics are Prometheus' (`/metrics`), and the logs go to stderr.
enum TraceExport {
    /// Bootstraps the tracer when the environment asks for the export; returns the exporter's service, to
    /// run in the worker's group, which stops it last, after the spans of the work it finished.
    /// `instanceID` (the worker's id) is the resource's `service.instance.id`, so that each worker's spans are
    /// told apart; `OTEL_RESOURCE_ATTRIBUTES` may set another.
    static func bootstrap(
        environment: [String: String], instanceID: String, logger: Logger
    ) throws -> (any Service)? {
        let settings = TraceExportSettings(environment: environment)
        guard settings.isOn else { return nil }
        try settings.validate()
        var configuration = OTel.Configuration.default
        configuration.serviceName = "livedelivery"
        configuration.resourceAttributes["service.instance.id"] = instanceID
        // swift-otel's own log: its failures to export (OTEL_LOG_LEVEL lowers the level). It also logs each
        // OTEL_* variable it reads, headers (API keys) included: those values never reach the log.
        configuration.diagnosticLogger = .custom(
            Logger(label: "swift-otel") { _ in WithoutEnvironmentValues(wrapping: logger.handler) })
        configuration.diagnosticLogLevel = .warning
        configuration.metrics.enabled = false
        configuration.logs.enabled = false
        configuration.traces.enabled = true
        // The OTEL_* variables override the above (OTEL_SERVICE_NAME, the endpoint, protocol, headers, sampler).
        let backend = try OTel.makeTracingBackend(configuration: configuration)
        InstrumentationSystem.bootstrap(backend.factory)
        logger.info("\(settings.summary)")
        return backend.service
    }
}

/// A log handler that drops the values swift-otel logs of the environment (`environment_value`, `new_value`,
/// `previous_value`): an `OTEL_EXPORTER_OTLP_HEADERS` may carry an API key.
struct WithoutEnvironmentValues: LogHandler {
    var wrapped: any LogHandler
    static let hidden: Set<String> = ["environment_value", "new_value", "previous_value"]

    init(wrapping handler: any LogHandler) { wrapped = handler }

    var logLevel: Logger.Level {
        get { wrapped.logLevel }
        set { wrapped.logLevel = newValue }
    }
    var metadata: Logger.Metadata {
        get { wrapped.metadata }
        set { wrapped.metadata = newValue.filter { !Self.hidden.contains($0.key) } }
    }
    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { wrapped[metadataKey: key] }
        set { if !Self.hidden.contains(key) { wrapped[metadataKey: key] = newValue } }
    }

    func log(event: LogEvent) {
        var event = event
        event.metadata = event.metadata?.filter { !Self.hidden.contains($0.key) }
        wrapped.log(event: event)
    }
}
#else
/// This build has no OTLP exporter (the package trait `OTLP` is off): the spans go to swift-distributed-tracing's
/// no-op tracer, and an environment that asks for the export is refused at start (``TraceExportSettings``).
enum TraceExport {
    static func bootstrap(
        environment: [String: String], instanceID: String, logger: Logger
    ) throws -> (any Service)? {
        try TraceExportSettings(environment: environment).validate()
        return nil
    }
}
#endif
