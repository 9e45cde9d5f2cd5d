import Foundation

/// What OpenTelemetry's standard variables ask of the worker's trace export (`livedelivery run` bootstraps
/// swift-otel's OTLP/HTTP exporter from them; `check-config` prints ``summary``).
///
/// Off unless the environment names an endpoint (`OTEL_EXPORTER_OTLP_ENDPOINT` or
/// `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) or asks for an exporter (`OTEL_TRACES_EXPORTER=otlp` or `console`);
/// `OTEL_SDK_DISABLED=true` and `OTEL_TRACES_EXPORTER=none` turn it off.
package struct TraceExportSettings: Sendable {
    let environment: [String: String]

    package init(environment: [String: String] = ProcessInfo.processInfo.environment) {
        self.environment = environment
    }

    /// What the environment asks for, for `check-config`: never a header (they may hold an API key) nor a
    /// URL's user and password.
    package var summary: String {
        guard isOn else {
            return "traces: not exported (set OTEL_EXPORTER_OTLP_ENDPOINT to export them over OTLP/HTTP)"
        }
        if environment["OTEL_TRACES_EXPORTER"]?.lowercased() == "console" {
            return "traces: printed to the console (OTEL_TRACES_EXPORTER=console)"
        }
        let endpoint =
            environment["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] ?? environment["OTEL_EXPORTER_OTLP_ENDPOINT"]
            ?? "http://localhost:4318"
        let protocolName =
            environment["OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"] ?? environment["OTEL_EXPORTER_OTLP_PROTOCOL"]
            ?? "http/protobuf"
        let service = environment["OTEL_SERVICE_NAME"] ?? "livedelivery"
        return "traces: exported over OTLP (\(protocolName)) to \(Self.withoutUserInfo(endpoint)) as service \(service)"
    }

    /// Refuses what this build cannot export (it has OTLP/HTTP only: swift-otel's gRPC exporter is not built in),
    /// rather than let swift-otel stop the process.
    package func validate() throws(LiveDeliveryError) {
        guard isOn else { return }
        var problems: [String] = []
        if let exporter = environment["OTEL_TRACES_EXPORTER"], !["otlp", "console"].contains(exporter.lowercased()) {
            problems.append("OTEL_TRACES_EXPORTER=\(exporter): this build exports to otlp or console (or none)")
        }
        for key in ["OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"] {
            if let value = environment[key], !["http/protobuf", "http/json"].contains(value.lowercased()) {
                problems.append("\(key)=\(value): this build exports over OTLP/HTTP only (http/protobuf or http/json)")
            }
        }
        guard problems.isEmpty else {
            throw LiveDeliveryError(.invalidConfiguration, "the trace export cannot be set up", problems: problems)
        }
    }

    /// Whether the environment asks for the export.
    package var isOn: Bool {
        if environment["OTEL_SDK_DISABLED"]?.lowercased() == "true" { return false }
        switch environment["OTEL_TRACES_EXPORTER"]?.lowercased() {
        case "none": return false
        case "otlp", "console": return true
        default:
            return environment["OTEL_EXPORTER_OTLP_ENDPOINT"] != nil
                || environment["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] != nil
        }
    }

    /// The URL without `user:password@` (and without a query, which may carry a key); "(not a URL)" when it is
    /// none, rather than the text.
    static func withoutUserInfo(_ url: String) -> String {
        guard var components = URLComponents(string: url), components.scheme != nil else { return "(not a URL)" }
        components.user = nil
        components.password = nil
        components.query = nil
        components.fragment = nil
        return components.string ?? "(not a URL)"
    }
}
