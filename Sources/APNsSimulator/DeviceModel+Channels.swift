import Foundation
import LiveDeliveryJSON

/// APNs' broadcast channels and the activities subscribed to them (iOS 18), from Apple's "Sending channel
/// management requests to APNs" and "Sending broadcast push notification requests to APNs":
/// - a channel belongs to one bundle id and environment, with a storage policy fixed at creation;
/// - an app has at most ``channelLimit`` live channels; turning its broadcast capability off deletes them all;
/// - a broadcast `update` or `end` applies to every activity subscribed to the channel by the rules of a
///   device push, except that it draws on no priority-10 budget; a broadcast cannot start an activity;
/// - a Most Recent Message Stored channel keeps its latest broadcast for 8 hours and applies it at once to an
///   activity that subscribes later, when it is newer than what the activity shows;
/// - a deleted channel delivers nothing more; its activities keep what they show.
extension DeviceModel {
    /// How long a Most Recent Message Stored channel keeps its latest broadcast.
    static let storedBroadcastLifetime: TimeInterval = 8 * 3600

    struct ChannelState: Sendable {
        var view: ChannelView
        /// Creation order, for lists.
        var number: Int
        /// The latest broadcast (Most Recent Message Stored channels only).
        var stored: StoredBroadcast?
    }

    struct StoredBroadcast: Sendable {
        var aps: JSONValue
        var isEnd: Bool
        var priority: Int
        var until: Date
    }

    /// A channel-management or broadcast request whose headers and body APNs has checked.
    enum ChannelRequest: Sendable {
        case create(bundleID: String, storagePolicy: Int)
        case read(bundleID: String, channelID: String)
        case delete(bundleID: String, channelID: String)
        case list(bundleID: String)
        case broadcast(bundleID: String, channelID: String, priority: Int, expiration: Int, payload: JSONValue)
    }

    /// APNs' answer to a ``ChannelRequest`` and, for a broadcast, what the subscribed activities made of it.
    struct ChannelResult: Sendable {
        var status: Int
        var reason: String?
        /// The new channel's id (create).
        var channelID: String?
        /// The response body (read, list).
        var body: JSONValue?
        var verdict: DeviceVerdict
        var deliveries: [BroadcastDelivery]?

        static func refused(_ status: Int, _ reason: String) -> ChannelResult {
            ChannelResult(status: status, reason: reason, verdict: DeviceVerdict(.rejected))
        }
    }

    // MARK: Requests

    mutating func handle(_ request: ChannelRequest, now: Date) -> ChannelResult {
        switch request {
        case .create(let bundleID, let storagePolicy):
            guard !broadcastDisabled.contains(bundleID) else { return .refused(400, "FeatureNotEnabled") }
            guard liveChannelCounts[bundleID, default: 0] < channelLimit else {
                return .refused(400, "CannotCreateChannelConfig")
            }
            var id = Self.randomChannelID()
            while channels[id] != nil { id = Self.randomChannelID() }
            channelsCreated += 1
            channels[id] = ChannelState(
                view: ChannelView(
                    channelID: id, bundleID: bundleID, environment: environment,
                    messageStoragePolicy: storagePolicy, createdAt: now, deletedAt: nil, activityIDs: [],
                    broadcastCount: 0),
                number: channelsCreated)
            liveChannelCounts[bundleID, default: 0] += 1
            return ChannelResult(status: 201, channelID: id, verdict: DeviceVerdict(.channel, "created"))
        case .read(let bundleID, let channelID):
            guard let channel = liveChannel(channelID, bundleID: bundleID) else {
                return .refused(400, "ChannelNotRegistered")
            }
            let body = JSONValue.object(
                JSONObject([
                    ("message-storage-policy", .int(channel.view.messageStoragePolicy)),
                    ("push-type", .string("LiveActivity")),
                ]))
            return ChannelResult(status: 200, body: body, verdict: DeviceVerdict(.channel, "read"))
        case .delete(let bundleID, let channelID):
            guard liveChannel(channelID, bundleID: bundleID) != nil else {
                return .refused(400, "ChannelNotRegistered")
            }
            markDeleted(channelID, now: now)
            return ChannelResult(status: 204, verdict: DeviceVerdict(.channel, "deleted"))
        case .list(let bundleID):
            let ids = channels.values.filter { isLive($0, bundleID: bundleID) }.sorted { $0.number < $1.number }
                .map { JSONValue.string($0.view.channelID) }
            return ChannelResult(
                status: 200, body: .object(JSONObject([("channels", .array(ids))])),
                verdict: DeviceVerdict(.channel, "listed \(ids.count)"))
        case .broadcast(let bundleID, let channelID, let priority, let expiration, let payload):
            return broadcast(
                bundleID: bundleID, channelID: channelID, priority: priority, expiration: expiration,
                payload: payload, now: now)
        }
    }

    private mutating func broadcast(
        bundleID: String,
        channelID: String,
        priority: Int,
        expiration: Int,
        payload: JSONValue,
        now: Date
    ) -> ChannelResult {
        guard !broadcastDisabled.contains(bundleID) else { return .refused(400, "FeatureNotEnabled") }
        guard var channel = liveChannel(channelID, bundleID: bundleID) else {
            return .refused(400, "ChannelNotRegistered")
        }
        if channel.view.messageStoragePolicy == 0, expiration != 0 { return .refused(400, "BadExpirationDate") }
        channel.view.broadcastCount += 1
        defer { channels[channelID] = channel }

        // APNs accepted it (200); the phones judge it.
        func invalid(_ detail: String) -> ChannelResult {
            ChannelResult(status: 200, verdict: DeviceVerdict(.invalidPayload, detail))
        }
        guard let aps = payload["aps"], case .object = aps else { return invalid("no aps dictionary") }
        guard let event = aps["event"]?.stringValue else { return invalid("aps.event missing") }
        guard event == "update" || event == "end" else {
            return invalid(
                event == "start" ? "a broadcast cannot start a Live Activity" : "unknown aps.event \(event)")
        }
        let isEnd = event == "end"
        if channel.view.messageStoragePolicy == 1 {
            var until = now.addingTimeInterval(Self.storedBroadcastLifetime)
            if expiration > 0 { until = min(until, Date(timeIntervalSince1970: Double(expiration))) }
            channel.stored = StoredBroadcast(aps: aps, isEnd: isEnd, priority: priority, until: until)
        }
        let deliveries = channel.view.activityIDs.map { activityID in
            BroadcastDelivery(
                activityID: activityID,
                verdict: apply(aps, isEnd: isEnd, priority: priority, budgeted: false, to: activityID, now: now))
        }
        return ChannelResult(
            status: 200, verdict: DeviceVerdict(.broadcast, "\(deliveries.count) subscribed activities"),
            deliveries: deliveries)
    }

    // MARK: Subscriptions

    /// Subscribes a new activity to a live channel and applies the channel's stored broadcast when it is
    /// newer than what the activity shows; returns what the activity made of it.
    mutating func subscribe(_ activityID: String, to channelID: String, now: Date) -> [BroadcastDelivery]? {
        guard var channel = channels[channelID] else { return nil }
        channel.view.activityIDs.append(activityID)
        channels[channelID] = channel
        guard let stored = channel.stored, now < stored.until,
            let timestamp = stored.aps["timestamp"]?.numberValue,
            timestamp > activities[activityID]?.view.timestamp ?? -.infinity
        else { return nil }
        let verdict = apply(
            stored.aps, isEnd: stored.isEnd, priority: stored.priority, budgeted: false, to: activityID, now: now)
        let detail = ["stored broadcast", verdict.detail].compactMap { $0 }.joined(separator: ": ")
        return [BroadcastDelivery(activityID: activityID, verdict: DeviceVerdict(verdict.kind, detail))]
    }

    /// The channel when it is live for this app in this environment.
    func liveChannel(_ channelID: String, bundleID: String) -> ChannelState? {
        guard let channel = channels[channelID], isLive(channel, bundleID: bundleID) else { return nil }
        return channel
    }

    private func isLive(_ channel: ChannelState, bundleID: String) -> Bool {
        channel.view.deletedAt == nil && channel.view.bundleID == bundleID && channel.view.environment == environment
    }

    private mutating func markDeleted(_ channelID: String, now: Date) {
        guard var channel = channels[channelID], channel.view.deletedAt == nil else { return }
        channel.view.deletedAt = now
        channel.stored = nil
        channels[channelID] = channel
        liveChannelCounts[channel.view.bundleID, default: 1] -= 1
    }

    // MARK: The control API

    /// Turns an app's broadcast capability on or off; off deletes all its channels, as Apple does.
    mutating func setBroadcast(enabled: Bool, bundleID: String, now: Date) {
        guard !enabled else {
            broadcastDisabled.remove(bundleID)
            return
        }
        broadcastDisabled.insert(bundleID)
        for (id, channel) in channels where channel.view.bundleID == bundleID { markDeleted(id, now: now) }
    }

    /// Deletes a channel as if Apple had: later broadcasts get `ChannelNotRegistered`. Nil when unknown.
    mutating func deleteChannel(id: String, now: Date) -> ChannelView? {
        markDeleted(id, now: now)
        return channels[id]?.view
    }

    func channelView(id: String) -> ChannelView? { channels[id]?.view }

    /// Channels, deleted ones too, oldest first; optionally one app's.
    func channelViews(bundleID: String?) -> [ChannelView] {
        channels.values.filter { bundleID == nil || $0.view.bundleID == bundleID }.sorted { $0.number < $1.number }
            .map(\.view)
    }

    /// A channel id as APNs makes them: 16 random bytes in base64 (standard alphabet, padded).
    static func randomChannelID() -> String {
        var generator = SystemRandomNumberGenerator()
        return Data((0..<16).map { _ in UInt8.random(in: 0...255, using: &generator) }).base64EncodedString()
    }

    /// Whether `id` is base64 (standard alphabet, padded) of 16 bytes, the form of APNs' channel ids.
    static func isWellFormedChannelID(_ id: String) -> Bool {
        id.utf8.count == 24 && Data(base64Encoded: id)?.count == 16
    }
}
