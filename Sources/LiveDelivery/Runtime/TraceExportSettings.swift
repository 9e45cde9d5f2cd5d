import Foundation

/// What OpenTelemetry's standard variables ask of the worker's trace export (`livedelivery run` bootstraps
/// swift-otel's OTLP/HTTP exporter from them; `check-config` prints ``summary``).
///
/// Off unless the environment names an endpoint (`OTEL_EXPORTER_OTLP_ENDPOINT` or
/// `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) or asks for an exporter (`OTEL_TRACES_EXPORTER=otlp`);
/// `OTEL_SDK_DISABLED=true` and `OTEL_TRACES_EXPORTER=none` turn it off.
package struct TraceExportSettings: Sendable {
    let environment: [String: String]
    /// Whether the build holds the exporter.
    let exporterBuilt: Bool

    /// Whether this build holds the OTLP exporter: the package trait `OTLP` (`swift build --traits OTLP`).
    package static var exporterBuilt: Bool {
        #if OTLP
        true
        #else
        false
        #endif
    }

    package init(
        environment: [String: String] = ProcessInfo.processInfo.environment, exporterBuilt: Bool = Self.exporterBuilt
    ) {
        self.environment = environment
        self.exporterBuilt = exporterBuilt
    }

    /// What the environment asks for, for `check-config`: never a header (they may hold an API key) nor a
    /// URL's user and password.
    package var summary: String {
        guard isOn else {
            return "traces: not exported (set OTEL_EXPORTER_OTLP_ENDPOINT to export them over OTLP/HTTP)"
        }
        let protocolName =
            environment["OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"] ?? environment["OTEL_EXPORTER_OTLP_PROTOCOL"]
            ?? "http/protobuf"
        let service = environment["OTEL_SERVICE_NAME"] ?? "livedelivery"
        return "traces: exported over OTLP (\(protocolName)) to \(Self.withoutUserInfo(endpoint)) as service \(service)"
    }

    /// Refuses what swift-otel would stop the process on, or cannot do, rather than start: any export when the
    /// build has no exporter (the package trait `OTLP` off), gRPC (its exporter is not built in), a console or
    /// Jaeger exporter, the Jaeger and X-Ray samplers, propagators other than W3C Trace Context.
    package func validate() throws(LiveDeliveryError) {
        guard isOn else { return }
        guard exporterBuilt else {
            throw LiveDeliveryError(
                .invalidConfiguration, "the trace export cannot be set up",
                problems: [
                    "this build has no OTLP exporter (the package trait OTLP is off): build with `swift build --traits OTLP`, or set OTEL_TRACES_EXPORTER=none"
                ])
        }
        var problems: [String] = []
        func check(_ key: String, allowed: [String], _ why: String) {
            guard let value = environment[key] else { return }
            let values = value.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
            if !values.allSatisfy(allowed.contains) { problems.append("\(key)=\(value): \(why)") }
        }
        check("OTEL_TRACES_EXPORTER", allowed: ["otlp"], "this build exports to otlp only (or none)")
        for key in ["OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"] {
            check(
                key, allowed: ["http/protobuf", "http/json"],
                "this build exports over OTLP/HTTP only (http/protobuf or http/json)")
        }
        check(
            "OTEL_TRACES_SAMPLER",
            allowed: [
                "always_on", "always_off", "traceidratio", "parentbased_always_on", "parentbased_always_off",
                "parentbased_traceidratio",
            ], "the samplers are always_on, always_off, traceidratio and their parentbased_ forms")
        check("OTEL_PROPAGATORS", allowed: ["tracecontext", "none"], "the propagators are tracecontext (or none)")
        guard problems.isEmpty else {
            throw LiveDeliveryError(.invalidConfiguration, "the trace export cannot be set up", problems: problems)
        }
    }

    /// The export's link, when it is plain text (an `http://` endpoint, OTLP's default): it carries the
    /// spans and `OTEL_EXPORTER_OTLP_HEADERS` (often an API key) readable on the wire. Never the headers'
    /// values, nor the URL's user and password.
    package var linkFinding: LinkFinding? {
        guard isOn else { return nil }
        let endpoint = self.endpoint
        guard let url = URLComponents(string: endpoint), url.scheme?.lowercased() == "http" else { return nil }
        let headers = ["OTEL_EXPORTER_OTLP_TRACES_HEADERS", "OTEL_EXPORTER_OTLP_HEADERS"].filter {
            environment[$0]?.isEmpty == false
        }
        let carried = headers.isEmpty ? "" : " and sends \(headers.joined(separator: " and ")) in the clear"
        return LinkFinding(
            isLocal: LinkFinding.isLoopback(url.host ?? ""),
            message: "the trace export to \(Self.withoutUserInfo(endpoint)) is plain text (http://)\(carried): "
                + "use an https:// endpoint")
    }

    /// The endpoint the export goes to (swift-otel's default when none is named).
    var endpoint: String {
        environment["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] ?? environment["OTEL_EXPORTER_OTLP_ENDPOINT"]
            ?? "http://localhost:4318"
    }

    /// Whether the environment asks for the export.
    package var isOn: Bool {
        if environment["OTEL_SDK_DISABLED"]?.lowercased() == "true" { return false }
        switch environment["OTEL_TRACES_EXPORTER"]?.lowercased() {
        case "none": return false
        case .some: return true
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
