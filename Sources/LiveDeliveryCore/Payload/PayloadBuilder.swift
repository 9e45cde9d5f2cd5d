import LiveDeliveryJSON

/// Builds the `aps` dictionary of a start, update or end, and keeps it within the size limit.
///
/// Key order: `timestamp`, `event`, `content-state`, `attributes-type`, `attributes`, `alert`,
/// `stale-date`, `dismissal-date`, `relevance-score`, then `input-push-channel` or `input-push-token`.
///
/// Over the limit, in order: the alert loses its subtitle and body; then an update or end loses
/// its alert (a start, which must alert, falls back to the policy's title-only start alert);
/// then the push is refused. Content is never cut: a partial content-state would not decode.
struct PayloadBuilder {
    var kind: PlannedPush.Kind
    var contentState: JSONObject
    var attributesType: String?
    var attributes: JSONObject?
    var timestamp: Int
    var staleDate: Int?
    var dismissalDate: Int?
    var relevance: Double?
    var alert: AlertContent?
    var startFallbackAlert: AlertContent?
    var inputPushToken: Bool
    /// A start into this broadcast channel (`input-push-channel`, iOS 18): the activity gets no update
    /// token, so `input-push-token` is left out.
    var inputPushChannel: String? = nil
    /// ``contentState`` as compact JSON text, when the caller has it already (the content mark's): written as
    /// it is rather than serialized again.
    var contentStateJSON: String? = nil

    enum Result {
        case built(payload: [UInt8], alert: AlertContent?, notes: [String])
        case refused(String)
    }

    /// The payload as a value (what ``serialized(alert:)`` writes, byte for byte).
    func json(alert: AlertContent?) -> JSONValue {
        var aps = JSONObject()
        aps["timestamp"] = .int(timestamp)
        aps["event"] = .string(kind.rawValue)
        aps["content-state"] = .object(contentState)
        if kind == .start {
            aps["attributes-type"] = attributesType.map(JSONValue.string)
            aps["attributes"] = attributes.map(JSONValue.object)
        }
        aps["alert"] = alert?.json
        if kind != .end { aps["stale-date"] = staleDate.map(JSONValue.int) }
        if kind == .end { aps["dismissal-date"] = dismissalDate.map(JSONValue.int) }
        aps["relevance-score"] = relevance.map(JSONValue.double)
        if kind == .start, let channel = inputPushChannel {
            aps["input-push-channel"] = .string(channel)
        } else if kind == .start && inputPushToken {
            aps["input-push-token"] = .int(1)
        }
        return .object(JSONObject([("aps", .object(aps))]))
    }

    /// The payload's compact JSON text, written straight into one buffer in ``json(alert:)``'s key order.
    func serialized(alert: AlertContent?) -> [UInt8] {
        let writer = JSONWriter(capacity: 256 + (contentStateJSON?.utf8.count ?? 256))
        writer.writeRaw("{\"aps\":{\"timestamp\":")
        writer.writeInt(timestamp)
        writer.writeRaw(",\"event\":")
        writer.writeString(kind.rawValue)
        writer.writeRaw(",\"content-state\":")
        if let contentStateJSON {
            writer.writeRaw(contentStateJSON)
        } else {
            writer.writeRaw(JSONValue.object(contentState).serialized())
        }
        if kind == .start {
            if let attributesType {
                writer.writeRaw(",\"attributes-type\":")
                writer.writeString(attributesType)
            }
            if let attributes {
                writer.writeRaw(",\"attributes\":")
                writer.writeRaw(JSONValue.object(attributes).serialized())
            }
        }
        if let alert {
            writer.writeRaw(",\"alert\":")
            writer.writeRaw(alert.json.serialized())
        }
        if kind != .end, let staleDate {
            writer.writeRaw(",\"stale-date\":")
            writer.writeInt(staleDate)
        }
        if kind == .end, let dismissalDate {
            writer.writeRaw(",\"dismissal-date\":")
            writer.writeInt(dismissalDate)
        }
        if let relevance {
            writer.writeRaw(",\"relevance-score\":")
            writer.writeRaw(JSONWriter.format(relevance))
        }
        if kind == .start, let channel = inputPushChannel {
            writer.writeRaw(",\"input-push-channel\":")
            writer.writeString(channel)
        } else if kind == .start && inputPushToken {
            writer.writeRaw(",\"input-push-token\":1")
        }
        writer.writeRaw("}}")
        return writer.bytes
    }

    func build(maxBytes: Int) -> Result {
        var notes: [String] = []
        var candidate = alert
        var bytes = serialized(alert: candidate)
        if bytes.count <= maxBytes { return .built(payload: bytes, alert: candidate, notes: notes) }

        if let full = candidate, full.subtitle != nil || full.body != nil {
            candidate = AlertContent(title: full.title, sound: full.sound)
            let before = bytes.count
            bytes = serialized(alert: candidate)
            notes.append("alert subtitle and body dropped: the payload would be \(before) bytes > \(maxBytes)")
            if bytes.count <= maxBytes { return .built(payload: bytes, alert: candidate, notes: notes) }
        }
        if kind == .start {
            if let fallback = startFallbackAlert, fallback != candidate {
                candidate = fallback
                let before = bytes.count
                bytes = serialized(alert: candidate)
                notes.append("start alert replaced by the fallback title: the payload would be \(before) bytes")
                if bytes.count <= maxBytes { return .built(payload: bytes, alert: candidate, notes: notes) }
            }
        } else if candidate != nil {
            let before = bytes.count
            candidate = nil
            bytes = serialized(alert: nil)
            notes.append("alert dropped: the payload would be \(before) bytes > \(maxBytes)")
            if bytes.count <= maxBytes { return .built(payload: bytes, alert: nil, notes: notes) }
        }
        let content = JSONValue.object(contentState).serialized().count
        let attributesSize = attributes.map { JSONValue.object($0).serialized().count } ?? 0
        return .refused(
            "the payload is \(bytes.count) bytes > \(maxBytes) even without optional parts "
                + "(content-state \(content) bytes" + (kind == .start ? ", attributes \(attributesSize) bytes" : "")
                + "); nothing sent")
    }
}
