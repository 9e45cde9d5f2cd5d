package import APNsModel
package import Foundation

/// Exactly what to send to APNs for ``environment``: a push to `/3/device/<token>`, or for an order's
/// broadcast channel a broadcast (`/4/broadcasts/apps/<bundle id>`) or a channel request
/// (`/1/apps/<bundle id>/channels` on the channel management host).
///
/// `description` and ``redactedPath`` show only a token prefix; ``path`` and `Codable` carry
/// the full token (the worker needs it to send and to store the push in its outbox).
package struct PlannedPush: Hashable, Sendable, CustomStringConvertible {
    package enum Kind: String, Hashable, Sendable {
        case start, update, end
        /// Create the order's broadcast channel (`POST /1/apps/<bundle id>/channels`, the body its settings).
        case openChannel = "open_channel"
        /// Delete it (`DELETE /1/apps/<bundle id>/channels`).
        case closeChannel = "close_channel"
    }

    /// A planned header, as the request model builds it.
    package typealias Header = APNsRequest.Header

    /// Every field, in one copy-on-write box: a push is copied many times on its way (into the batch's change, its
    /// outbox row, the hand-over, the send, the answer), and each copy of the fields themselves retained every
    /// string and array of them. A copy of the box is one retain; a field set on a shared box copies it first.
    private var storage: Storage

    private final class Storage: @unchecked Sendable {
        // Written only through the accessors below, and only while the box is not shared
        // (`isKnownUniquelyReferenced`), so no two threads ever see it change. Unchecked exclusivity, as in
        // ``OrderState``: a checked access would allocate each accessor's coroutine frame on the heap.
        @exclusivity(unchecked) var fields: Fields
        init(_ fields: Fields) { self.fields = fields }
    }

    private struct Fields: Hashable, Sendable {
        var orderID: String
        var activityKey: String
        var activityID: String?
        var kind: Kind
        var deviceToken: DeviceToken?
        var channelID: String?
        var environment: APNsEnvironment
        var bundleID: String
        var apnsID: String
        var priority: Int
        var timestamp: Int
        var notBefore: Date
        var expiration: Int
        var headers: [Header]
        var payload: [UInt8]
        var alert: AlertContent?
        var step: String
        var status: OrderStatus
        var statusKey: EventKey
        var reason: String
        var mark: ActivityState.ContentMark
        var traceParent: String?
    }

    /// Copies the box first if another push shares it, before a field changes.
    private mutating func unshare() {
        if !isKnownUniquelyReferenced(&storage) { storage = Storage(storage.fields) }
    }

    package static func == (lhs: PlannedPush, rhs: PlannedPush) -> Bool {
        lhs.storage === rhs.storage || lhs.storage.fields == rhs.storage.fields
    }

    package func hash(into hasher: inout Hasher) { hasher.combine(storage.fields) }

    package var orderID: String {
        get { storage.fields.orderID }
        set {
            unshare()
            storage.fields.orderID = newValue
        }
    }
    /// The activity's stable key in ``OrderState`` (the outbox key: one pending push per activity).
    package var activityKey: String {
        get { storage.fields.activityKey }
        set {
            unshare()
            storage.fields.activityKey = newValue
        }
    }
    /// ActivityKit's id, once the app has reported it (nil for a start).
    package var activityID: String? {
        get { storage.fields.activityID }
        set {
            unshare()
            storage.fields.activityID = newValue
        }
    }
    package var kind: Kind {
        get { storage.fields.kind }
        set {
            unshare()
            storage.fields.kind = newValue
        }
    }
    /// The token pushed to; nil for the requests of a broadcast channel.
    package var deviceToken: DeviceToken? {
        get { storage.fields.deviceToken }
        set {
            unshare()
            storage.fields.deviceToken = newValue
        }
    }
    /// The broadcast channel: an update or end with it is a broadcast; a ``Kind/closeChannel`` deletes it.
    package var channelID: String? {
        get { storage.fields.channelID }
        set {
            unshare()
            storage.fields.channelID = newValue
        }
    }
    package var environment: APNsEnvironment {
        get { storage.fields.environment }
        set {
            unshare()
            storage.fields.environment = newValue
        }
    }
    package var bundleID: String {
        get { storage.fields.bundleID }
        set {
            unshare()
            storage.fields.bundleID = newValue
        }
    }
    /// The `apns-id` header: deterministic, so replaying a step produces the same id.
    package var apnsID: String {
        get { storage.fields.apnsID }
        set {
            unshare()
            storage.fields.apnsID = newValue
        }
    }
    /// 10 or 5.
    package var priority: Int {
        get { storage.fields.priority }
        set {
            unshare()
            storage.fields.priority = newValue
        }
    }
    /// `aps.timestamp` (Unix seconds).
    package var timestamp: Int {
        get { storage.fields.timestamp }
        set {
            unshare()
            storage.fields.timestamp = newValue
        }
    }
    /// Do not send before this moment (it is ``timestamp``): `aps.timestamp` is never in the future.
    package var notBefore: Date {
        get { storage.fields.notBefore }
        set {
            unshare()
            storage.fields.notBefore = newValue
        }
    }
    /// The `apns-expiration` header value (Unix seconds).
    package var expiration: Int {
        get { storage.fields.expiration }
        set {
            unshare()
            storage.fields.expiration = newValue
        }
    }
    /// `apns-push-type`, `apns-topic`, `apns-priority`, `apns-expiration`, `apns-id`, in that order.
    package var headers: [Header] {
        get { storage.fields.headers }
        set {
            unshare()
            storage.fields.headers = newValue
        }
    }
    /// The request body, compact UTF-8 JSON, at most ``Policy/maxPayloadBytes``.
    package var payload: [UInt8] {
        get { storage.fields.payload }
        set {
            unshare()
            storage.fields.payload = newValue
        }
    }
    package var alert: AlertContent? {
        get { storage.fields.alert }
        set {
            unshare()
            storage.fields.alert = newValue
        }
    }
    /// The policy step the content shows.
    package var step: String {
        get { storage.fields.step }
        set {
            unshare()
            storage.fields.step = newValue
        }
    }
    /// The status shown and the key of the event that set it (never older than a previous push).
    package var status: OrderStatus {
        get { storage.fields.status }
        set {
            unshare()
            storage.fields.status = newValue
        }
    }
    package var statusKey: EventKey {
        get { storage.fields.statusKey }
        set {
            unshare()
            storage.fields.statusKey = newValue
        }
    }
    /// One line: why this push exists.
    package var reason: String {
        get { storage.fields.reason }
        set {
            unshare()
            storage.fields.reason = newValue
        }
    }
    /// What the push shows (``OrderTracker/record(_:for:in:now:)`` stores it as sent).
    package var mark: ActivityState.ContentMark {
        get { storage.fields.mark }
        set {
            unshare()
            storage.fields.mark = newValue
        }
    }
    /// The W3C `traceparent` of the event that planned the push, when its message carried one: the
    /// APNs request is logged and traced under it, wherever and whenever it is sent.
    package var traceParent: String? {
        get { storage.fields.traceParent }
        set {
            unshare()
            storage.fields.traceParent = newValue
        }
    }

    package init(
        orderID: String, activityKey: String, activityID: String?, kind: Kind, deviceToken: DeviceToken?,
        channelID: String? = nil, environment: APNsEnvironment, bundleID: String, apnsID: String, priority: Int,
        timestamp: Int,
        notBefore: Date, expiration: Int, headers: [Header], payload: [UInt8], alert: AlertContent?, step: String,
        status: OrderStatus, statusKey: EventKey, reason: String, mark: ActivityState.ContentMark
    ) {
        storage = Storage(
            Fields(
                orderID: orderID, activityKey: activityKey, activityID: activityID, kind: kind,
                deviceToken: deviceToken, channelID: channelID, environment: environment, bundleID: bundleID,
                apnsID: apnsID, priority: priority, timestamp: timestamp, notBefore: notBefore, expiration: expiration,
                headers: headers, payload: payload, alert: alert, step: step, status: status, statusKey: statusKey,
                reason: reason, mark: mark))
    }

    /// Whether the request is one of a broadcast channel's (create, broadcast, delete).
    package var isChannelRequest: Bool { deviceToken == nil }

    package var method: String { kind == .closeChannel ? "DELETE" : "POST" }
    package var path: String {
        switch (kind, deviceToken) {
        case (.openChannel, _), (.closeChannel, _): "/1/apps/\(bundleID)/channels"
        case (_, let token?): "/3/device/\(token.hex)"
        case (_, nil): "/4/broadcasts/apps/\(bundleID)"
        }
    }
    /// Apple's host for the request: channel management has its own.
    package var host: String {
        switch kind {
        case .openChannel, .closeChannel:
            environment == .production
                ? "api-manage-broadcast.push.apple.com:2196" : "api-manage-broadcast.sandbox.push.apple.com:2195"
        case .start, .update, .end: environment.host
        }
    }
    package var redactedPath: String { deviceToken.map { "/3/device/\($0.prefix)" } ?? path }
    package var topic: String { "\(bundleID).push-type.liveactivity" }

    package var description: String {
        "\(kind.rawValue) \(orderID)/\(activityKey) → \(redactedPath) priority \(priority) timestamp \(timestamp)"
    }
}

/// Deterministic `apns-id` values: a UUID (version 8, RFC 9562 custom) from two 64-bit FNV-1a
/// hashes of the push's identity. No randomness in the core.
enum PushID {
    static func make(_ parts: [String]) -> String {
        var a: UInt64 = 0xcbf2_9ce4_8422_2325
        var b: UInt64 = 0x8422_2325_cbf2_9ce4
        for var part in parts {
            // Over the bytes where they lie: the content state, a few hundred bytes, is one of the parts.
            part.withUTF8 { bytes in
                for byte in bytes {
                    a = (a ^ UInt64(byte)) &* 0x0000_0100_0000_01b3
                    b = (b ^ UInt64(byte ^ 0x5c)) &* 0x0000_0100_0000_01b3
                }
            }
            // Each part ends with a 0 byte, so that ["ab", "c"] and ["a", "bc"] differ.
            a = a &* 0x0000_0100_0000_01b3
            b = (b ^ 0x5c) &* 0x0000_0100_0000_01b3
        }
        // Written in place: the version with a String per hex digit pair cost 9 µs a push.
        return String(unsafeUninitializedCapacity: 36) { out in
            var position = 0
            for index in 0..<16 {
                var byte = UInt8(truncatingIfNeeded: (index < 8 ? a : b) >> (56 - 8 * (index % 8)))
                if index == 6 { byte = (byte & 0x0F) | 0x80 }
                if index == 8 { byte = (byte & 0x3F) | 0x80 }
                if index == 4 || index == 6 || index == 8 || index == 10 {
                    out[position] = UInt8(ascii: "-")
                    position += 1
                }
                out[position] = hexDigit(byte >> 4)
                out[position + 1] = hexDigit(byte & 0xF)
                position += 2
            }
            return position
        }
    }

    private static func hexDigit(_ nibble: UInt8) -> UInt8 {
        nibble < 10 ? UInt8(ascii: "0") + nibble : UInt8(ascii: "a") + nibble - 10
    }
}
