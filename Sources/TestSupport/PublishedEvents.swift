import Foundation
package import LiveDelivery
import LiveDeliveryCore

/// A record of the events the tests publish to the worker's exchange, for `scripts/check-contract --published`:
/// when `LIVEDELIVERY_RECORD_EVENTS` names a file (scripts/test sets it), each event a test publishes is appended
/// to it as one JSON line, with what the worker's own parsers said of it at that moment. The check then gives
/// each body to docs/asyncapi.yaml's schemas and requires the same verdict: the tests publish invalid events on
/// purpose (dead letters, hostile input), so it is agreement that is checked, not validity.
///
/// A line: `routing_key`, `message_id` (or null), the string `headers`, the `body` in base64, `decoder` (what
/// `EventDecoder` says of the body with that routing key and message id: `accepted`, and when refused its
/// `reason` and `field`), and `traceparent_read` when a `traceparent` header was set (whether the worker reads
/// it). Not recorded: whether the app is in the apps file, and a cell's routing check; both depend on the
/// deployment, not on the contract.
package enum PublishedEvents {
    /// The file the records go to, when recording.
    package static let path: String? = ProcessInfo.processInfo.environment["LIVEDELIVERY_RECORD_EVENTS"]
        .flatMap { $0.isEmpty ? nil : $0 }

    /// Records one event as published to the worker's exchange (nothing when not recording).
    package static func record(
        routingKey: String, body: [UInt8], messageID: String?, headers: [String: String] = [:]
    ) {
        guard let path else { return }
        var record: [String: Any] = [
            "routing_key": routingKey, "message_id": messageID.map { $0 as Any } ?? NSNull(), "headers": headers,
            "body": Data(body).base64EncodedString(),
        ]
        switch EventDecoder.decode(body, routingKey: routingKey, messageID: messageID) {
        case .success: record["decoder"] = ["accepted": true]
        case .failure(let rejection):
            record["decoder"] = [
                "accepted": false, "reason": rejection.reason.rawValue,
                "field": rejection.field.map { $0 as Any } ?? NSNull(),
            ]
        }
        if let traceParent = headers["traceparent"] { record["traceparent_read"] = TraceParent(traceParent) != nil }
        guard var line = try? JSONSerialization.data(withJSONObject: record) else {
            fatalError("LIVEDELIVERY_RECORD_EVENTS: a record of a \(routingKey) event does not serialize")
        }
        line.append(UInt8(ascii: "\n"))
        append(line, to: path)
    }

    /// Records each message as ``record(routingKey:body:messageID:headers:)`` does.
    package static func record(_ messages: [InboundMessage]) {
        guard path != nil else { return }
        for message in messages {
            record(
                routingKey: message.routingKey, body: message.body, messageID: message.messageID,
                headers: message.headers)
        }
    }

    /// One `write` on a file opened for appending: the lines of tests publishing at once (threads or processes)
    /// do not interleave.
    private static func append(_ line: Data, to path: String) {
        let descriptor = open(path, O_WRONLY | O_APPEND | O_CREAT, 0o644)
        guard descriptor >= 0 else { fatalError("LIVEDELIVERY_RECORD_EVENTS: cannot open \(path) to append") }
        defer { close(descriptor) }
        let written = line.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
        guard written == line.count else { fatalError("LIVEDELIVERY_RECORD_EVENTS: cannot append to \(path)") }
    }
}
