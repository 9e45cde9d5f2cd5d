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
        (["OTEL_TRACES_EXPORTER": "console"], true),
        (["OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318", "OTEL_TRACES_EXPORTER": "none"], false),
        (["OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318", "OTEL_SDK_DISABLED": "true"], false),
    ])
    func offUnlessAnEndpointOrAnExporterIsNamed(_ environment: [String: String], _ on: Bool) {
        #expect(TraceExportSettings(environment: environment).isOn == on)
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
