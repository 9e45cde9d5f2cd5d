import APNsSimulator
import Foundation
import InMemoryTracing
import LiveDelivery
import Logging
import Postgres
import RabbitMQ
import ServiceLifecycle
import Synchronization
import TestSupport
import Testing
import Tracing

@Suite("Trace context", .timeLimit(.minutes(6)))
struct TraceContextTests {
    @Test(arguments: [
        "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        "00-0AF7651916CD43DD8448EB211C80319C-B7AD6B7169203331-00",
    ])
    func wellFormedTraceParents(_ header: String) throws {
        let trace = try #require(TraceParent(header))
        #expect(trace.traceID == "0af7651916cd43dd8448eb211c80319c")
        #expect(trace.parentID == "b7ad6b7169203331")
        #expect(trace.header == header.lowercased())
        #expect(trace.versionZero == header.lowercased())
    }

    @Test("a later version's header is read by its first 55 characters, which are all that is kept")
    func laterVersionsKeepTheirFirst55Characters() throws {
        let first55 = "cc-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-03"
        for header in [first55, first55 + "-", first55 + "-" + String(repeating: "ab", count: 50_000)] {
            let trace = try #require(TraceParent(header), "\(header.count) characters")
            #expect(trace.header == first55)
            #expect(trace.traceID == "0af7651916cd43dd8448eb211c80319c")
            #expect(trace.parentID == "b7ad6b7169203331")
            // In version 00 for the tracer, with the sampled flag only.
            #expect(trace.versionZero == "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
            let message = InboundMessage(body: [], routingKey: "order.status", headers: ["traceparent": header])
            #expect(message.traceParent == first55)
        }
    }

    @Test(arguments: [
        "", "garbage", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331",
        "ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        "00-00000000000000000000000000000000-b7ad6b7169203331-01",
        "00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01",
        "00-0af7651916cd43dd8448eb211c80319z-b7ad6b7169203331-01",
        // Version 00 is exactly 55 characters.
        "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-",
        "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-ab",
        // A later version goes on only after a dash.
        "cc-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01ab",
        "0g-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-0x",
        "00-0af7651916cd43dd8448eb211c80319c-b7ad6b716920333\u{00E9}-01",
        "00_0af7651916cd43dd8448eb211c80319c_b7ad6b7169203331_01",
    ])
    func malformedTraceParentsAreIgnored(_ header: String) {
        #expect(TraceParent(header) == nil)
        #expect(
            InboundMessage(body: [], routingKey: "order.status", headers: ["traceparent": header]).traceParent == nil)
    }

    @Test(
        "a traceparent of any length is stored as its first 55 characters; a malformed one is refused and counted; the tracer's carrier prints as the trace alone"
    )
    func traceParentsAreBounded() async throws {
        let harness = try await Harness.start()
        let tracer = InMemoryTracer()
        let worker: Worker
        do {
            worker = try Worker(configuration: harness.configuration, logger: quietLogger, tracer: tracer)
        } catch {
            await harness.stop()
            throw error
        }
        do {
            let ids = "4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
            let hex = String(repeating: "ab", count: 50_000)
            // A later version, 100,000 hex characters after its first 55: kept as those 55.
            let kept = TestEnvironment.uniqueName("T")
            // Version 00 is 55 characters; one longer is malformed: refused, not stored, counted.
            let refused = TestEnvironment.uniqueName("T")
            var messages: [InboundMessage] = []
            for (order, header) in [(kept, "cc-\(ids)-\(hex)"), (refused, "00-\(ids)-\(hex)")] {
                for var message in [
                    Events.activityToken(order, activity: "act-" + order, token: Events.token()),
                    Events.status(order, "out_for_delivery", sequence: 1, courier: "Sam"),
                ] {
                    message.headers = ["traceparent": header, "x-note": String(repeating: "n", count: 100_000)]
                    messages.append(message)
                }
            }
            let outcome = try await worker.processor.process(messages)
            #expect(outcome.applied == 4)
            #expect(outcome.pushesPlanned >= 2)

            // The pending pushes are small: none holds the header's 100,000 characters.
            let largest = try await harness.database.count(
                "SELECT coalesce(max(octet_length(push)), 0)::bigint FROM outbox")
            #expect(largest > 0 && largest < 10_000, "\(largest) bytes")

            // The kept order's events are traced by the 55 characters; the refused order's are not traced.
            let spans = tracer.finishedSpans.filter { $0.operationName == "livedelivery.event" }
            #expect(spans.count == 2)
            #expect(spans.allSatisfy { $0.attributes.get("w3c.traceparent") == .string("cc-\(ids)") })
            #expect(spans.allSatisfy { $0.attributes.get("livedelivery.order.id") == .string(kept) })
            // What the tracer was handed prints as the trace in version 00 alone: a tracer that logs a
            // carrier it could not read logs neither the header's tail nor the message's other headers.
            let carriers = tracer.performedContextExtractions.map { "\($0.carrier)" }
            #expect(carriers == ["[traceparent: 00-\(ids)]", "[traceparent: 00-\(ids)]"])

            let metrics = String(decoding: worker.metrics.exposition(), as: UTF8.self)
            #expect(metrics.contains("livedelivery_trace_headers_refused_total 2"))
        } catch {
            await harness.stop(worker)
            throw error
        }
        await harness.stop(worker)
    }

    @Test("a traceparent on an AMQP message reaches the event's and the APNs request's logs and spans")
    func traceFromTheMessageToAPNs() async throws {
        try await withWorker { harness, _ in
            let tracer = InMemoryTracer()
            let lines = LogLines()
            var logger = Logger(label: "trace-test") { _ in lines.handler() }
            logger.logLevel = .debug
            let worker = try Worker(configuration: harness.configuration, logger: logger, tracer: tracer)
            try await whileRunning(worker) {
                try await eventually("the worker is ready") { worker.health.snapshot.ready }
                let traceParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
                let order = TestEnvironment.uniqueName("T")
                let token = Events.token()
                let (publisher, _) = try await RabbitMQPublisher.connect(
                    to: harness.configuration.amqp.endpoints, logger: quietLogger)
                for message in [
                    Events.activityToken(order, activity: "act-trace", token: token),
                    Events.status(order, "out_for_delivery", sequence: 1, courier: "Sam"),
                ] {
                    var properties = RabbitMQMessageProperties(
                        contentType: "application/json", messageID: message.messageID)
                    // The W3C header, and the in-memory tracer's own, standing in for the tracer a
                    // deployment bootstraps (which reads `traceparent` itself).
                    properties.headers = [
                        "traceparent": .string(traceParent), InMemoryTracer.traceIDKey: .string("upstream-trace"),
                        InMemoryTracer.spanIDKey: .string("upstream-span"),
                    ]
                    PublishedEvents.record(
                        routingKey: message.routingKey, body: message.body, messageID: message.messageID,
                        headers: properties.headers.compactMapValues(\.stringValue))
                    try await publisher.publish(
                        exchange: harness.configuration.amqp.exchange, routingKey: message.routingKey,
                        body: message.body,
                        properties: properties)
                }
                await publisher.close()
                try await eventually("the push reaches the device") {
                    harness.simulator.pushes(token: token).contains { $0.status == 200 }
                }
                try await eventually("the APNs request's span ends") {
                    tracer.finishedSpans.contains { $0.operationName == "livedelivery.push" }
                }

                // The event's span continues the upstream trace; both spans name the W3C parent.
                let spans = tracer.finishedSpans
                let events = spans.filter { $0.operationName == "livedelivery.event" }
                #expect(events.count == 2)
                #expect(events.allSatisfy { $0.spanContext.traceID == "upstream-trace" })
                #expect(events.allSatisfy { $0.spanContext.parentSpanID == "upstream-span" })
                #expect(events.allSatisfy { $0.kind == .consumer })
                let requests = spans.filter { $0.operationName == "livedelivery.push" }
                #expect(requests.allSatisfy { $0.kind == .client })
                for span in events + requests {
                    #expect(span.attributes.get("w3c.traceparent") == .string(traceParent), "\(span.operationName)")
                }
                #expect(requests.first?.attributes.get("apns.outcome") == .string("delivered"))

                // And the log lines of what was done for the event: its decisions and the APNs request.
                let traced = lines.all.filter { $0.contains("trace.id=4bf92f3577b34da6a3ce929d0e0e4736") }
                #expect(traced.contains { $0.hasPrefix("decision") }, "\(lines.all.prefix(20))")
                #expect(traced.contains { $0.hasPrefix("APNs request") }, "\(lines.all.prefix(20))")
                #expect(traced.allSatisfy { $0.contains("trace.parent_id=00f067aa0ba902b7") })
            }
            try await deleteTopology(harness.configuration.amqp)
        }
    }
}

/// Log records as `message key=value …`, for assertions.
final class LogLines: Sendable {
    private let lines = Mutex<[String]>([])
    var all: [String] { lines.withLock { $0 } }

    func handler() -> Handler { Handler(lines: self) }

    func append(_ line: String) { lines.withLock { $0.append(line) } }

    struct Handler: LogHandler {
        let lines: LogLines
        var logLevel: Logger.Level = .trace
        var metadata: Logger.Metadata = [:]

        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }

        func log(event: LogEvent) {
            let merged = metadata.merging(event.metadata ?? [:]) { $1 }
            let fields = merged.keys.sorted().map { "\($0)=\(merged[$0]!)" }
            lines.append(([event.message.description] + fields).joined(separator: " "))
        }
    }
}
