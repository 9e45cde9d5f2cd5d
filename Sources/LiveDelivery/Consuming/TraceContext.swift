import Logging
import Tracing

/// A W3C Trace Context `traceparent` header: `00-<32 hex trace id>-<16 hex parent id>-<2 hex flags>`.
///
/// An upstream system that traces its work sets it on the AMQP message (a header named `traceparent`);
/// the worker puts its ids in the log lines of what it does for that event and of the APNs request,
/// and gives the tracer the trace to continue. A malformed header is refused (ignored and counted).
///
/// Parsed as the recommendation says a future version must be: the first 55 characters hold the
/// version, the ids and the flags; a version other than `00` may go on after them, behind a dash, and
/// what it adds is not read. Only those 55 characters are kept, so a header of any length stores as 55.
package struct TraceParent: Sendable, Hashable {
    /// The characters a parser reads of any version: `vv-<32>-<16>-<2>`.
    package static let length = 55

    package var traceID: String
    package var parentID: String
    /// The header's first 55 characters as received (lowercase), to store with a planned push.
    package var header: String
    /// The header in version 00, as the tracer reads it: a later version's ids, and its sampled flag only
    /// (the one bit a parser of version 00 may take from it).
    package var versionZero: String

    package init?(_ header: String) {
        let bytes = header.utf8.prefix(Self.length + 1).map(Self.lowercased)
        guard bytes.count >= Self.length else { return nil }
        let dash = UInt8(ascii: "-")
        func hex(_ range: Range<Int>) -> Bool { bytes[range].allSatisfy(Self.isHexDigit) }
        func zero(_ range: Range<Int>) -> Bool { bytes[range].allSatisfy { $0 == UInt8(ascii: "0") } }
        guard hex(0..<2), bytes[2] == dash, hex(3..<35), bytes[35] == dash, hex(36..<52), bytes[52] == dash,
            hex(53..<55), !zero(3..<35), !zero(36..<52)
        else { return nil }
        let version = String(decoding: bytes[0..<2], as: UTF8.self)
        // ff is invalid; 00 is exactly 55 characters; a later version may only go on after a dash.
        if version == "ff" { return nil }
        if bytes.count > Self.length, version == "00" || bytes[Self.length] != dash { return nil }
        let trace = String(decoding: bytes[3..<35], as: UTF8.self)
        let parent = String(decoding: bytes[36..<52], as: UTF8.self)
        let kept = String(decoding: bytes[0..<Self.length], as: UTF8.self)
        let sampled = (UInt8(String(decoding: bytes[53..<55], as: UTF8.self), radix: 16) ?? 0) & 1 == 1
        traceID = trace
        parentID = parent
        self.header = kept
        versionZero = version == "00" ? kept : "00-\(trace)-\(parent)-\(sampled ? "01" : "00")"
    }

    private static func isHexDigit(_ byte: UInt8) -> Bool {
        (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains(byte)
    }

    private static func lowercased(_ byte: UInt8) -> UInt8 {
        byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z") ? byte + 32 : byte
    }
}

/// What the tracer reads a trace from: the message's `traceparent` in version 00, and its other headers of
/// at most 512 characters (W3C's bound for a `tracestate` a vendor must pass on). It prints as its
/// `traceparent` alone: a tracer that logs a carrier it could not read (swift-otel does, at warning) logs
/// 55 characters, never the message's headers.
struct TraceCarrier: Sendable, CustomStringConvertible {
    static let maximumHeaderLength = 512

    var trace: TraceParent
    var headers: [String: String] = [:]

    var description: String { "[traceparent: \(trace.versionZero)]" }
}

/// Reads a trace from a ``TraceCarrier`` (for the tracer's `extract`).
struct TraceCarrierExtractor: Extractor {
    func extract(key: String, from carrier: TraceCarrier) -> String? {
        if key == "traceparent" { return carrier.trace.versionZero }
        guard let value = carrier.headers[key], value.utf8.count <= TraceCarrier.maximumHeaderLength else { return nil }
        return value
    }
}

extension Logger.Metadata {
    /// The trace's ids, when there is a trace.
    mutating func addTrace(_ traceParent: String?) {
        guard let traceParent, let trace = TraceParent(traceParent) else { return }
        self[LiveDeliveryLoggingKeys.traceID] = "\(trace.traceID)"
        self[LiveDeliveryLoggingKeys.traceParent] = "\(trace.parentID)"
    }
}
