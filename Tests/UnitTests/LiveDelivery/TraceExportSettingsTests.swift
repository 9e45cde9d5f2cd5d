import LiveDelivery
import Testing

/// When `livedelivery run` exports its spans, and what `check-config` says of it.
struct TraceExportSettingsTests {
    @Test(arguments: [
        ([:], false),
        (["OTEL_SERVICE_NAME": "x"], false),
        (["OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"], true),
        (["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"], true),
        (["OTEL_TRACES_EXPORTER": "otlp"], true),
        (["OTEL_TRACES_EXPORTER": "zipkin"], true),
        (["OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318", "OTEL_TRACES_EXPORTER": "none"], false),
        (["OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318", "OTEL_SDK_DISABLED": "true"], false),
    ])
    func offUnlessAnEndpointOrAnExporterIsNamed(_ environment: [String: String], _ on: Bool) {
        #expect(TraceExportSettings(environment: environment).isOn == on)
    }

    /// What swift-otel would stop the process on (a fatalError) or cannot do is refused, each named.
    @Test func whatSwiftOTelCannotDoIsRefusedAtStart() {
        let environment = [
            "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
            "OTEL_TRACES_EXPORTER": "console", "OTEL_TRACES_SAMPLER": "jaeger_remote",
            "OTEL_PROPAGATORS": "tracecontext,baggage",
        ]
        #expect {
            try TraceExportSettings(environment: environment, exporterBuilt: true).validate()
        } throws: { error in
            let problems = (error as? LiveDeliveryError)?.problems ?? []
            return problems.count == 4
                && [
                    "OTEL_EXPORTER_OTLP_PROTOCOL=grpc", "OTEL_TRACES_EXPORTER=console",
                    "OTEL_TRACES_SAMPLER=jaeger_remote",
                    "OTEL_PROPAGATORS=tracecontext,baggage",
                ].allSatisfy { key in problems.contains { $0.hasPrefix(key) } }
        }
        #expect(throws: Never.self) {
            try TraceExportSettings(
                environment: [
                    "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json",
                    "OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0.1",
                    "OTEL_PROPAGATORS": "tracecontext",
                ], exporterBuilt: true
            ).validate()
            // Off, nothing is checked, whatever the build.
            try TraceExportSettings(environment: ["OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"], exporterBuilt: true)
                .validate()
            try TraceExportSettings(environment: ["OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"], exporterBuilt: false)
                .validate()
        }
    }

    /// A build without the package trait `OTLP` holds no exporter: asked to export, it refuses to start and says how
    /// to build one that does, rather than dropping the spans unsaid.
    @Test func aBuildWithoutTheExporterRefusesAnExport() {
        let environment = ["OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"]
        #expect {
            try TraceExportSettings(environment: environment, exporterBuilt: false).validate()
        } throws: { error in
            let problems = (error as? LiveDeliveryError)?.problems ?? []
            return problems.count == 1 && problems[0].contains("swift build --traits OTLP")
        }
        #expect(throws: Never.self) {
            try TraceExportSettings(environment: environment, exporterBuilt: true).validate()
        }
    }

    @Test func theSummaryNamesWhereButNoSecret() {
        let settings = TraceExportSettings(environment: [
            "OTEL_EXPORTER_OTLP_ENDPOINT": "https://tenant:s3cretpass@otlp.example.com:4318/base?api_key=s3cretkey",
            "OTEL_EXPORTER_OTLP_HEADERS": "authorization=Bearer s3crettoken",
            "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json", "OTEL_SERVICE_NAME": "pizza-worker",
        ])
        #expect(
            settings.summary
                == "traces: exported over OTLP (http/json) to https://otlp.example.com:4318/base as service pizza-worker"
        )
        #expect(!settings.summary.contains("s3cret"))
        #expect(TraceExportSettings(environment: [:]).summary.hasPrefix("traces: not exported"))
        #expect(
            TraceExportSettings(environment: ["OTEL_EXPORTER_OTLP_ENDPOINT": "not a url s3cret"]).summary
                == "traces: exported over OTLP (http/protobuf) to (not a URL) as service livedelivery")
    }
}
