import Logging
import Tracing

/// A W3C Trace Context `traceparent` header: `00-<32 hex trace id>-<16 hex parent id>-<2 hex flags>`.
///
/// An upstream system that traces its work sets it on the AMQP message (a header named `traceparent`);
/// the worker puts its ids in the log lines of what it does for that event and of the APNs request,
/// and gives the tracer the message's headers to continue the trace. A malformed header is ignored.
package struct TraceParent: Sendable, Hashable {
    package var traceID: String
    package var parentID: String
    /// The header as received (lowercase), to store with a planned push.
    package var header: String

    package init?(_ header: String) {
        let parts = header.lowercased().split(separator: "-", omittingEmptySubsequences: false)
        guard parts.count >= 4, parts[0].count == 2, parts[0] != "ff", parts[1].count == 32, parts[2].count == 16,
            parts[3].count == 2, parts.allSatisfy({ $0.allSatisfy(\.isHexDigit) }),
            parts[1].contains(where: { $0 != "0" }), parts[2].contains(where: { $0 != "0" })
        else { return nil }
        traceID = String(parts[1])
        parentID = String(parts[2])
        self.header = header.lowercased()
    }
}

/// Reads a trace from string-valued AMQP headers (for the tracer's `extract`).
struct AMQPHeadersExtractor: Extractor {
    func extract(key: String, from carrier: [String: String]) -> String? { carrier[key] }
}

extension Logger.Metadata {
    /// The trace's ids, when there is a trace.
    mutating func addTrace(_ traceParent: String?) {
        guard let traceParent, let trace = TraceParent(traceParent) else { return }
        self[LiveDeliveryLoggingKeys.traceID] = "\(trace.traceID)"
        self[LiveDeliveryLoggingKeys.traceParent] = "\(trace.parentID)"
    }
}
