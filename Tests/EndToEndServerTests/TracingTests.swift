import APNsSimulator
import ChildProcesses
import Foundation
import TestSupport
import Testing
import WorkerHarness

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Whether the worker holds the exporter: the package trait `OTLP`.
private let otlpBuilt: Bool = {
    #if OTLP
    true
    #else
    false
    #endif
}()

/// The worker's spans over OTLP/HTTP (swift-otel), received by a real OTLP receiver (scripts/otlp-receiver,
/// which decodes with OpenTelemetry's own message types) in both of OTLP/HTTP's encodings. The worker holds the
/// exporter only when built with the package trait `OTLP`, as scripts/test builds it.
@Suite(
    .timeLimit(.minutes(6)),
    .enabled(if: otlpBuilt, "the worker is built without the OTLP trait (swift build --traits OTLP)"))
struct TracingTests {
    @Test(
        "each traced event's spans reach an OTLP receiver: consume, apply, push and record, under the upstream trace",
        arguments: [("http/protobuf", "application/x-protobuf"), ("http/json", "application/json")])
    func spansReachAnOTLPReceiver(protocolName: String, contentType: String) async throws {
        try await Fixture.with("otlp") { fixture in
            let receiver = try await OTLPReceiver.start(in: fixture.directory)
            defer { receiver.process.signal(SIGKILL) }
            try await fixture.startWorker(
                "w1",
                extraEnvironment: [
                    "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:\(receiver.port)",
                    "OTEL_EXPORTER_OTLP_PROTOCOL": protocolName, "OTEL_SERVICE_NAME": "livedelivery-test",
                    "OTEL_BSP_SCHEDULE_DELAY": "100",
                ])
            // One delivery, each event with its own upstream span in one trace; APNs refuses the first push
            // once (retried), and a malformed event of the same trace is refused.
            // Before it, another delivery whose upstream did not sample its trace (flags 00): parent-based sampling
            // keeps that decision, so none of its spans may reach the receiver (checked with the others').
            let unsampled = Scenario.deliveries(orders: 1, prefix: fixture.name + "-unsampled")
            let unsampledTrace = Self.hex(bytes: 16)
            try await fixture.publish(
                unsampled.events.map { ($0.type, $0.body, $0.eventID) },
                traceParents: Dictionary(
                    unsampled.events.map { ($0.eventID, "00-\(unsampledTrace)-\(Self.hex(bytes: 8))-00") }
                ) { first, _ in first })
            try await fixture.waitUntilSettled(eventIDs: Set(unsampled.events.map(\.eventID)))
            fixture.simulator.injectFault(FaultRule(status: 500, reason: "InternalServerError", count: 1))
            let scenario = Scenario.deliveries(orders: 1, prefix: fixture.name)
            let traceID = Self.hex(bytes: 16)
            var upstream: [String: String] = [:]  // event id → the upstream span id
            for event in scenario.events { upstream[event.eventID] = Self.hex(bytes: 8) }
            let refusedID = "bad-\(fixture.name)"
            upstream[refusedID] = Self.hex(bytes: 8)
            let traceParents = upstream.mapValues { "00-\(traceID)-\($0)-01" }
            try await fixture.publish(
                scenario.events.map { ($0.type, $0.body, $0.eventID) }, traceParents: traceParents)
            try await fixture.publish([("order.status", Array("not json".utf8), refusedID)], traceParents: traceParents)
            try await fixture.waitUntilSettled(eventIDs: Set(scenario.events.map(\.eventID)))
            let order = scenario.orders[0].orderID
            let attempts = try await fixture.count("SELECT count(*) FROM push_attempts WHERE order_id = '\(order)'")
            let delivered = try await fixture.count(
                "SELECT count(*) FROM push_attempts WHERE order_id = '\(order)' AND outcome = 'delivered'")
            #expect(attempts == delivered + 1)

            // Every push recorded: a span for each event (and the refused one), each request and each recording.
            let spans = try await eventuallyValue("the spans at the receiver", timeout: .seconds(60)) {
                () -> [OTLPReceiver.Span]? in
                let spans = try await receiver.spans()
                let strays = spans.filter { $0.traceID != traceID }.count
                guard strays == 0 else { throw HarnessError("\(strays) spans outside the sampled trace") }
                let events = spans.filter { $0.name == "livedelivery.event" }.count
                let records = spans.filter { $0.name == "livedelivery.record" }.count
                let pushes = spans.filter { $0.name == "livedelivery.push" }.count
                guard events == upstream.count && pushes == attempts && records == pushes else {
                    throw HarnessError(
                        "\(events) of \(upstream.count) event spans, \(pushes) of \(attempts) push spans, "
                            + "\(records) record spans; \(spans.count) in all")
                }
                return spans
            }
            Self.verify(
                spans, traceID: traceID, upstream: upstream, refusedID: refusedID,
                orderID: scenario.orders[0].orderID, contentType: contentType, delivered: delivered)
        }
    }

    @Test("a collector that is down costs no delivery, and its headers never reach the log")
    func anUnreachableCollectorCostsNoDelivery() async throws {
        try await Fixture.with("otlp-down") { fixture in
            // A port that was just listening and no longer is.
            let receiver = try await OTLPReceiver.start(in: fixture.directory)
            receiver.process.signal(SIGKILL)
            _ = try await receiver.process.waitForExit(timeout: .seconds(30))
            let worker = try await fixture.startWorker(
                "w1",
                extraEnvironment: [
                    "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:\(receiver.port)",
                    "OTEL_EXPORTER_OTLP_HEADERS": "authorization=Bearer s3cret-collector-key",
                    "OTEL_BSP_SCHEDULE_DELAY": "100", "OTEL_LOG_LEVEL": "debug",
                ])
            let scenario = Scenario.deliveries(orders: 3, prefix: fixture.name)
            let traceParents = Dictionary(
                scenario.events.map { ($0.eventID, "00-\(Self.hex(bytes: 16))-\(Self.hex(bytes: 8))-01") }
            ) { first, _ in first }
            try await fixture.publish(
                scenario.events.map { ($0.type, $0.body, $0.eventID) }, traceParents: traceParents)
            // Every event delivered as if no tracer were configured: each in the inbox once, none refused, every
            // push accepted, and each order's phone showing its final state, ended.
            try await fixture.waitUntilSettled(eventIDs: Set(scenario.events.map(\.eventID)))
            try await fixture.waitUntilAllEnded(scenario)
            try await fixture.verifyConverged(scenario)
            #expect(try await fixture.count("SELECT count(*) FROM dead_letters") == 0)
            #expect(try await fixture.count("SELECT count(*) FROM push_attempts WHERE outcome <> 'delivered'") == 0)
            // It stops cleanly, the spans it could not export dropped.
            #expect(try await worker.process.terminate() == 0)
            let log = try String(contentsOf: fixture.directory.appendingPathComponent("w1.log"), encoding: .utf8)
            #expect(!log.contains("s3cret"))
            #expect(log.contains("traces: exported over OTLP (http/protobuf) to http://127.0.0.1:\(receiver.port)"))
        }
    }

    /// Consume, apply, push and record, each where it belongs in the trace.
    static func verify(
        _ spans: [OTLPReceiver.Span], traceID: String, upstream: [String: String], refusedID: String,
        orderID: String, contentType: String, delivered: Int
    ) {
        #expect(
            spans.allSatisfy { $0.traceID == traceID }, "a span outside the upstream trace (or of the unsampled one)")
        let strangers = spans.filter { $0.service != "livedelivery-test" || $0.encoding != contentType }
        #expect(strangers.isEmpty, "spans of another service or encoding")
        // Each worker's spans are told apart by its id.
        let instances = Set(spans.compactMap(\.instance))
        #expect(instances.count == 1 && instances.allSatisfy { $0.hasSuffix("-w1") }, "\(instances)")
        let byID = Dictionary(spans.map { ($0.spanID, $0) }) { first, _ in first }

        // Consume: a consumer span per message, the child of its upstream span.
        let events = spans.filter { $0.name == "livedelivery.event" }
        for span in events {
            #expect(span.kind == "SPAN_KIND_CONSUMER")
            #expect(span.attributes["messaging.system"] == "rabbitmq")
            let eventID = span.attributes["messaging.message.id"] ?? ""
            #expect(span.parentSpanID == upstream[eventID], "\(eventID)")
            if eventID == refusedID {
                #expect(span.status == "STATUS_CODE_ERROR")
                #expect(span.attributes["livedelivery.refusal"] == "malformed_json")
            } else {
                #expect(span.status == "STATUS_CODE_UNSET", "\(eventID): \(span.statusMessage)")
                #expect(span.attributes["livedelivery.order.id"] == orderID)
            }
        }
        // Apply: one per event span, inside it.
        let applies = spans.filter { $0.name == "livedelivery.apply" }
        #expect(applies.count == events.count)
        #expect(Set(applies.compactMap { byID[$0.parentSpanID]?.name }) == ["livedelivery.event"])
        #expect(Set(applies.map(\.parentSpanID)).count == applies.count)

        // Push: a client span per APNs request, the child of the upstream span of the event that planned it;
        // the refused request has an error status that names APNs' reason.
        let pushes = spans.filter { $0.name == "livedelivery.push" }
        let plannedBy = Set(upstream.values)
        for span in pushes {
            #expect(span.kind == "SPAN_KIND_CLIENT")
            #expect(plannedBy.contains(span.parentSpanID))
            #expect(span.attributes["apns.topic"] == Scenario.bundleID)
            #expect(span.attributes["apns.id"]?.isEmpty == false)
        }
        let failed = pushes.filter { $0.status == "STATUS_CODE_ERROR" }
        #expect(failed.count == 1)
        #expect(failed.first?.attributes["apns.reason"] == "InternalServerError")
        #expect(pushes.filter { $0.status == "STATUS_CODE_OK" }.count == delivered)

        // Record: one per request, inside it.
        let records = spans.filter { $0.name == "livedelivery.record" }
        #expect(Set(records.map(\.parentSpanID)) == Set(pushes.map(\.spanID)))
        #expect(records.allSatisfy { $0.kind == "SPAN_KIND_INTERNAL" && $0.status != "STATUS_CODE_ERROR" })
    }

    static func hex(bytes: Int) -> String {
        (0..<bytes).map { _ in String(format: "%02x", UInt8.random(in: 1...255)) }.joined()
    }
}

/// scripts/otlp-receiver, on a free port.
struct OTLPReceiver {
    let process: ChildProcess
    let port: Int

    /// A span as the receiver flattens it.
    struct Span: Decodable {
        var traceID: String
        var spanID: String
        var parentSpanID: String
        var name: String
        var kind: String
        var status: String
        var statusMessage: String
        var attributes: [String: String]
        var service: String?
        var instance: String?
        var encoding: String

        enum CodingKeys: String, CodingKey {
            case traceID = "trace_id"
            case spanID = "span_id"
            case parentSpanID = "parent_span_id"
            case name, kind, status,
                attributes, service, instance, encoding
        }
        struct Status: Decodable {
            var code: String
            var message: String
        }
        /// An attribute's value as text (the worker's are strings, integers and booleans).
        struct Value: Decodable {
            var text: String
            init(from decoder: any Decoder) throws {
                let container = try decoder.singleValueContainer()
                if let string = try? container.decode(String.self) {
                    text = string
                } else if let bool = try? container.decode(Bool.self) {
                    text = "\(bool)"
                } else {
                    text = "\(try container.decode(Int64.self))"
                }
            }
        }

        init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            traceID = try container.decode(String.self, forKey: .traceID)
            spanID = try container.decode(String.self, forKey: .spanID)
            parentSpanID = try container.decode(String.self, forKey: .parentSpanID)
            name = try container.decode(String.self, forKey: .name)
            kind = try container.decode(String.self, forKey: .kind)
            let status = try container.decode(Status.self, forKey: .status)
            self.status = status.code
            statusMessage = status.message
            attributes = try container.decode([String: Value].self, forKey: .attributes).mapValues(\.text)
            service = try container.decodeIfPresent(String.self, forKey: .service)
            instance = try container.decodeIfPresent(String.self, forKey: .instance)
            encoding = try container.decode(String.self, forKey: .encoding)
        }
    }

    static func start(in directory: URL) async throws -> OTLPReceiver {
        let portFile = directory.appendingPathComponent("otlp-receiver.port")
        let process = try ChildProcess(
            name: "otlp-receiver", executable: "/usr/bin/env",
            arguments: [
                "python3", TestEnvironment.projectRoot.appendingPathComponent("scripts/otlp-receiver").path,
                "--port-file", portFile.path,
            ],
            environment: ProcessInfo.processInfo.environment,
            outputPath: directory.appendingPathComponent("otlp-receiver.log").path)
        let port = try await eventuallyValue("the OTLP receiver to listen", timeout: .seconds(60)) { () -> Int? in
            if let status = process.exitStatus {
                throw HarnessError("otlp-receiver exited \(status):\n\(process.tail())")
            }
            guard let text = try? String(contentsOf: portFile, encoding: .utf8) else { return nil }
            return Int(text.trimmingCharacters(in: .whitespacesAndNewlines))
        }
        return OTLPReceiver(process: process, port: port)
    }

    func spans() async throws -> [Span] {
        let (data, _) = try await URLSession.shared.data(from: URL(string: "http://127.0.0.1:\(port)/spans")!)
        return try JSONDecoder().decode([Span].self, from: data)
    }
}
