import Foundation
import LiveDeliveryJSON
import NIOCore

/// Broadcast channels (iOS 18): channel management (`/1/apps/<bundleID>/channels`, `/all-channels`, at Apple
/// on `api-manage-broadcast.push.apple.com`) and broadcast sends (`POST /4/broadcasts/apps/<bundleID>`),
/// served on the same listener as device pushes and with the same provider-token rules.
extension RequestProcessor {
    private static let channelCheckedOnce = checkedOnce.union(["apns-channel-id", "apns-request-id"])

    /// A request APNs refused before its channel was looked up, or one carried out under the store's lock.
    private struct ChannelExchange {
        let processor: RequestProcessor
        var record: PushRecord
        var becameAuthenticated = false

        func refuse(_ status: Int, _ reason: String) -> APNsAnswer {
            var record = record
            record.status = status
            record.reason = reason
            let stored = processor.store.deliver(record, push: nil, bundleID: nil)
            return answer(stored, channelID: nil, body: nil)
        }

        func refuse(_ refusal: APNsRefusal) -> APNsAnswer { refuse(refusal.status, refusal.reason) }

        func perform(_ request: DeviceModel.ChannelRequest) -> APNsAnswer {
            let (stored, result) = processor.store.handle(record, request)
            return answer(stored, channelID: result.channelID, body: result.body?.compactText)
        }

        private func answer(_ stored: PushRecord, channelID: String?, body: String?) -> APNsAnswer {
            APNsAnswer(
                status: stored.status, reason: stored.reason, apnsID: stored.apnsID,
                becameAuthenticated: becameAuthenticated, idHeader: stored.kind.idHeader, channelID: channelID,
                body: body)
        }
    }

    /// `POST|GET|DELETE /1/apps/<bundleID>/channels`, `GET /1/apps/<bundleID>/all-channels`.
    func processChannelManagement(
        head: RequestHead,
        body: ByteBuffer,
        connection: ConnectionState,
        streamID: Int
    ) -> APNsAnswer {
        var exchange = ChannelExchange(
            processor: self, record: record(head: head, body: body, connection: connection, streamID: streamID))

        // Path, then method.
        let rest = head.path.dropFirst("/1/apps/".count).split(separator: "/", omittingEmptySubsequences: false)
        guard rest.count == 2, Self.isValidBundleID(rest[0]), ["channels", "all-channels"].contains(rest[1]) else {
            return exchange.refuse(404, "BadPath")
        }
        let bundleID = String(rest[0])
        let isList = rest[1] == "all-channels"
        let allowed = isList ? ["GET"] : ["POST", "GET", "DELETE"]
        guard allowed.contains(head.method) else { return exchange.refuse(405, "MethodNotAllowed") }

        if let refusal = authorize(
            head, bundleID: bundleID, checksTopic: false, connection: connection, exchange: &exchange)
        {
            return exchange.refuse(refusal)
        }

        if isList { return exchange.perform(.list(bundleID: bundleID)) }
        guard head.method == "POST" else {
            switch channelID(head) {
            case .success(let channelID):
                return exchange.perform(
                    head.method == "GET"
                        ? .read(bundleID: bundleID, channelID: channelID)
                        : .delete(bundleID: bundleID, channelID: channelID))
            case .failure(let refusal):
                return exchange.refuse(refusal)
            }
        }

        // Create: {"message-storage-policy": 0|1, "push-type": "LiveActivity"}.
        guard body.readableBytes <= Self.maxPayloadBytes else { return exchange.refuse(413, "PayloadTooLarge") }
        guard let payload = JSONValue.parse(body.readableBytesView, allowingTrailingCommas: false),
            case .object = payload,
            case .int(let policy) = payload["message-storage-policy"], policy == 0 || policy == 1
        else { return exchange.refuse(400, "BadRequestPayload") }
        guard let pushType = payload["push-type"] else { return exchange.refuse(400, "MissingPushType") }
        guard let name = pushType.stringValue else { return exchange.refuse(400, "BadRequestPayload") }
        guard name.lowercased() == "liveactivity" else { return exchange.refuse(400, "InvalidPushType") }
        return exchange.perform(.create(bundleID: bundleID, storagePolicy: policy))
    }

    /// `POST /4/broadcasts/apps/<bundleID>`.
    func processBroadcast(
        head: RequestHead,
        body: ByteBuffer,
        connection: ConnectionState,
        streamID: Int
    ) -> APNsAnswer {
        var exchange = ChannelExchange(
            processor: self, record: record(head: head, body: body, connection: connection, streamID: streamID))

        let prefix = "/4/broadcasts/apps/"
        let bundleID = head.path.hasPrefix(prefix) ? String(head.path.dropFirst(prefix.count)) : ""
        guard Self.isValidBundleID(bundleID) else { return exchange.refuse(404, "BadPath") }
        guard head.method == "POST" else { return exchange.refuse(405, "MethodNotAllowed") }

        if let refusal = authorize(
            head, bundleID: bundleID, checksTopic: true, connection: connection, exchange: &exchange)
        {
            return exchange.refuse(refusal)
        }

        guard let pushType = head.value("apns-push-type") else { return exchange.refuse(400, "MissingPushType") }
        guard pushType.lowercased() == "liveactivity" else { return exchange.refuse(400, "InvalidPushType") }
        let channelID: String
        switch self.channelID(head) {
        case .success(let id): channelID = id
        case .failure(let refusal): return exchange.refuse(refusal)
        }
        guard let priority = head.value("apns-priority").flatMap({ Int($0) }), priority == 5 || priority == 10 else {
            return exchange.refuse(400, "BadPriority")
        }
        guard let expiration = head.value("apns-expiration").flatMap({ Int($0) }), expiration >= 0 else {
            return exchange.refuse(400, "BadExpirationDate")
        }

        guard body.readableBytes > 0 else { return exchange.refuse(400, "PayloadEmpty") }
        guard body.readableBytes <= Self.maxBroadcastPayloadBytes else {
            return exchange.refuse(413, "PayloadTooLarge")
        }
        guard let payload = JSONValue.parse(body.readableBytesView, allowingTrailingCommas: false),
            case .object = payload
        else { return exchange.refuse(400, "BadRequestPayload") }

        return exchange.perform(
            .broadcast(
                bundleID: bundleID, channelID: channelID, priority: priority, expiration: expiration,
                payload: payload))
    }

    /// What every channel request shares after its path: repeated headers, the provider token, (for a
    /// broadcast) a topic that is the bare bundle id if any, a key allowed for the app, and the app's
    /// broadcast capability.
    private func authorize(
        _ head: RequestHead,
        bundleID: String,
        checksTopic: Bool,
        connection: ConnectionState,
        exchange: inout ChannelExchange
    ) -> APNsRefusal? {
        let verified: VerifiedProviderToken
        switch authenticate(
            head, checkedOnce: Self.channelCheckedOnce, connection: connection, record: &exchange.record,
            becameAuthenticated: &exchange.becameAuthenticated)
        {
        case .success(let token): verified = token
        case .failure(let refusal): return refusal
        }
        if checksTopic, let topic = head.value("apns-topic"), topic != bundleID {
            return APNsRefusal(400, "TopicDisallowed")
        }
        if let allowed = verified.key?.bundleIDs, !allowed.contains(bundleID) {
            return APNsRefusal(400, "TopicDisallowed")
        }
        guard store.isBroadcastEnabled(bundleID: bundleID) else { return APNsRefusal(400, "FeatureNotEnabled") }
        return nil
    }

    /// The `apns-channel-id` header: present, and base64 of 16 bytes.
    private func channelID(_ head: RequestHead) -> Result<String, APNsRefusal> {
        guard let id = head.value("apns-channel-id") else { return .failure(APNsRefusal(400, "MissingChannelId")) }
        guard DeviceModel.isWellFormedChannelID(id) else { return .failure(APNsRefusal(400, "BadChannelId")) }
        return .success(id)
    }
}
