import Foundation
import LiveDeliveryJSON
import NIOCore

/// One request's pseudo-headers and headers, as received.
struct RequestHead: Sendable {
    var method: String = ""
    var path: String = ""
    var headers: [(name: String, value: String)] = []

    func value(_ name: String) -> String? { headers.first { $0.name == name }?.value }
}

/// What one connection has proven so far (Apple's per-connection provider-token rules).
///
/// `@unchecked Sendable`: every stream of a connection runs on the connection's event loop, and only
/// those streams touch this object, so it is never accessed concurrently.
final class ConnectionState: @unchecked Sendable {
    let id: Int
    var providerToken: String?
    var verified: VerifiedProviderToken?
    var tokenSetAt: Date?
    var authenticated = false

    init(id: Int) { self.id = id }
}

/// APNs' answer to a request.
struct APNsAnswer: Sendable {
    var status: Int
    var reason: String?
    /// The request's id, sent in ``idHeader``.
    var apnsID: String
    var unregisteredAt: Date?
    /// Seconds for a `retry-after` header (injected faults only).
    var retryAfter: Int?
    /// The connection just proved a valid provider token: lift the one-stream limit.
    var becameAuthenticated = false
    /// `apns-id`, or `apns-request-id` for broadcasts and channel management.
    var idHeader = "apns-id"
    /// An `apns-channel-id` response header (a created channel).
    var channelID: String?
    /// A JSON body for a success (a channel read or list).
    var body: String?
}

/// APNs' status and reason for a refused request.
struct APNsRefusal: Error, Sendable {
    var status: Int
    var reason: String

    init(_ status: Int, _ reason: String) {
        self.status = status
        self.reason = reason
    }
}

/// Judges requests as APNs documents it: `POST /3/device/<token>` (then hands accepted pushes to the devices),
/// and the broadcast and channel-management requests (`RequestProcessor+Channels.swift`).
final class RequestProcessor: Sendable {
    static let maxPayloadBytes = 4096
    /// A broadcast's body may be larger than a device push's.
    static let maxBroadcastPayloadBytes = 5120
    /// What a stream collects of a body before it stops: enough to tell any body too large.
    static let maxCollectedBytes = max(maxPayloadBytes, maxBroadcastPayloadBytes)
    static let knownPushTypes: Set<String> = [
        "alert", "background", "location", "voip", "complication", "fileprovider", "mdm", "liveactivity",
        "pushtotalk", "widgets", "controls",
    ]
    static let checkedOnce: Set<String> = [
        "authorization", "apns-id", "apns-expiration", "apns-priority", "apns-topic", "apns-push-type",
        "apns-collapse-id",
    ]

    let store: SimulatorStore
    let verifier: ProviderTokenVerifier
    let environment: SimulatorConfiguration.Environment
    let providerTokenMaxAge: TimeInterval
    let providerTokenMinUpdateInterval: TimeInterval

    init(configuration: SimulatorConfiguration, store: SimulatorStore) {
        self.store = store
        self.verifier = ProviderTokenVerifier(
            keys: configuration.keys, acceptUnknownKeys: configuration.acceptUnknownKeys)
        self.environment = configuration.environment
        self.providerTokenMaxAge = configuration.providerTokenMaxAge
        self.providerTokenMinUpdateInterval = configuration.providerTokenMinUpdateInterval
    }

    /// A record skeleton for a request, before APNs and the device have answered.
    func record(head: RequestHead, body: ByteBuffer, connection: ConnectionState, streamID: Int) -> PushRecord {
        let path = head.path
        let kind = APNsRequestKind(path: path)
        let token = path.hasPrefix("/3/device/") ? String(path.dropFirst("/3/device/".count)) : ""
        let id: String
        if kind == .device {
            id = head.value("apns-id")?.lowercased() ?? UUID().uuidString.lowercased()
        } else if let requestID = head.value("apns-request-id"), Self.isCanonicalUUID(requestID) {
            id = requestID
        } else {
            id = UUID().uuidString.lowercased()
        }
        return PushRecord(
            sequence: 0, receivedAt: store.now(), connectionID: connection.id, streamID: streamID,
            method: head.method, path: path, deviceToken: token, topic: head.value("apns-topic"),
            pushType: head.value("apns-push-type"), priority: head.value("apns-priority").flatMap { Int($0) },
            expiration: head.value("apns-expiration").flatMap { Int($0) },
            apnsID: id, collapseID: head.value("apns-collapse-id"), keyID: nil, issuedAt: nil,
            providerTokenFingerprint: nil, payload: String(decoding: body.readableBytesView, as: UTF8.self),
            status: 0, reason: nil, unregisteredAt: nil, verdict: DeviceVerdict(.rejected), activityID: nil,
            issuedUpdateToken: nil, kind: kind, channelID: head.value("apns-channel-id"), deliveries: nil)
    }

    func process(head: RequestHead, body: ByteBuffer, connection: ConnectionState, streamID: Int) -> APNsAnswer {
        switch APNsRequestKind(path: head.path) {
        case .device: processDevicePush(head: head, body: body, connection: connection, streamID: streamID)
        case .broadcast: processBroadcast(head: head, body: body, connection: connection, streamID: streamID)
        case .channels:
            processChannelManagement(head: head, body: body, connection: connection, streamID: streamID)
        }
    }

    private func processDevicePush(
        head: RequestHead,
        body: ByteBuffer,
        connection: ConnectionState,
        streamID: Int
    ) -> APNsAnswer {
        var record = record(head: head, body: body, connection: connection, streamID: streamID)
        var becameAuthenticated = false

        func answer(
            _ status: Int, _ reason: String?, push: DeviceModel.Push? = nil, bundleID: String? = nil
        )
            -> APNsAnswer
        {
            record.status = status
            record.reason = reason
            let stored = store.deliver(record, push: push, bundleID: bundleID)
            return APNsAnswer(
                status: stored.status, reason: stored.reason, apnsID: stored.apnsID,
                unregisteredAt: stored.unregisteredAt, becameAuthenticated: becameAuthenticated)
        }

        // Method and path.
        guard head.method == "POST" else { return answer(405, "MethodNotAllowed") }
        guard head.path.hasPrefix("/3/device/") else { return answer(404, "BadPath") }
        let token = record.deviceToken
        guard !token.isEmpty else { return answer(400, "MissingDeviceToken") }
        guard !token.utf8.contains(UInt8(ascii: "/")), !token.utf8.contains(UInt8(ascii: "?")) else {
            return answer(404, "BadPath")
        }

        // Headers that may appear once, and the provider token.
        let verified: VerifiedProviderToken
        switch authenticate(
            head, checkedOnce: Self.checkedOnce, connection: connection, record: &record,
            becameAuthenticated: &becameAuthenticated)
        {
        case .success(let token): verified = token
        case .failure(let refusal): return answer(refusal.status, refusal.reason)
        }

        // Topic and push type.
        guard let topic = head.value("apns-topic"), !topic.isEmpty else { return answer(400, "MissingTopic") }
        let pushType = head.value("apns-push-type") ?? "alert"
        guard Self.knownPushTypes.contains(pushType) else { return answer(400, "InvalidPushType") }
        let suffix = ".push-type.liveactivity"
        let hasSuffix = topic.hasSuffix(suffix)
        if (pushType == "liveactivity") != hasSuffix { return answer(400, "DeviceTokenNotForTopic") }
        let bundleID = hasSuffix ? String(topic.dropLast(suffix.count)) : topic
        guard Self.isValidBundleID(bundleID) else { return answer(400, "BadTopic") }
        if let allowed = verified.key?.bundleIDs, !allowed.contains(bundleID) {
            return answer(400, "TopicDisallowed")
        }

        // Other headers.
        let priority: Int
        if let value = head.value("apns-priority") {
            guard let parsed = Int(value), [1, 5, 10].contains(parsed) else { return answer(400, "BadPriority") }
            priority = parsed
        } else {
            priority = 10
        }
        if let value = head.value("apns-expiration") {
            guard let parsed = Int(value), parsed >= 0 else { return answer(400, "BadExpirationDate") }
        }
        if let value = head.value("apns-id") {
            guard Self.isCanonicalUUID(value) else { return answer(400, "BadMessageId") }
        }
        if let value = head.value("apns-collapse-id"), value.utf8.count > 64 {
            return answer(400, "BadCollapseId")
        }
        guard Self.isValidDeviceToken(token) else { return answer(400, "BadDeviceToken") }

        // Body.
        guard body.readableBytes > 0 else { return answer(400, "PayloadEmpty") }
        guard body.readableBytes <= Self.maxPayloadBytes else { return answer(413, "PayloadTooLarge") }
        guard let payload = JSONValue.parse(body.readableBytesView, allowingTrailingCommas: false),
            case .object = payload
        else { return answer(400, "BadRequestPayload") }

        let push = DeviceModel.Push(
            token: token, bundleID: bundleID, pushType: pushType, priority: priority, payload: payload)
        return answer(200, nil, push: push, bundleID: bundleID)
    }

    /// Repeated headers (`checkedOnce`), then the provider token by Apple's per-connection rules: the same
    /// for every APNs service. Fills the record's key id, `iat` and fingerprint, and sets
    /// `becameAuthenticated` when this is the connection's first valid token.
    func authenticate(
        _ head: RequestHead,
        checkedOnce: Set<String>,
        connection: ConnectionState,
        record: inout PushRecord,
        becameAuthenticated: inout Bool
    ) -> Result<VerifiedProviderToken, APNsRefusal> {
        var seen = Set<String>()
        for (name, _) in head.headers where checkedOnce.contains(name) {
            guard seen.insert(name).inserted else { return .failure(APNsRefusal(400, "DuplicateHeaders")) }
        }

        guard let authorization = head.value("authorization") else {
            return .failure(APNsRefusal(403, "MissingProviderToken"))
        }
        guard authorization.count > 7, authorization.prefix(7).lowercased() == "bearer " else {
            return .failure(APNsRefusal(403, "InvalidProviderToken"))
        }
        let jwt = authorization.dropFirst(7)
        let now = store.now()
        let verified: VerifiedProviderToken
        if let current = connection.verified, connection.providerToken.map({ $0[...] == jwt }) == true {
            verified = current
        } else {
            guard let fresh = verifier.verify(jwt) else { return .failure(APNsRefusal(403, "InvalidProviderToken")) }
            verified = fresh
        }
        record.keyID = verified.keyID
        record.issuedAt = verified.issuedAt
        record.providerTokenFingerprint = verified.fingerprint
        if let restricted = verified.key?.environment, restricted != environment {
            return .failure(APNsRefusal(403, "BadEnvironmentKeyIdInToken"))
        }
        if now.timeIntervalSince1970 - Double(verified.issuedAt) > providerTokenMaxAge {
            return .failure(APNsRefusal(403, "ExpiredProviderToken"))
        }
        if let team = connection.verified?.teamID, team != verified.teamID {
            return .failure(APNsRefusal(403, "UnrelatedKeyIdInToken"))
        }
        if connection.providerToken.map({ $0[...] != jwt }) ?? true {
            if let setAt = connection.tokenSetAt, now.timeIntervalSince(setAt) < providerTokenMinUpdateInterval {
                return .failure(APNsRefusal(429, "TooManyProviderTokenUpdates"))
            }
            connection.providerToken = String(jwt)
            connection.verified = verified
            connection.tokenSetAt = now
        }
        if !connection.authenticated {
            connection.authenticated = true
            becameAuthenticated = true
        }
        return .success(verified)
    }

    /// Letters, digits, dots and hyphens, as bundle ids are.
    static func isValidBundleID(_ bundleID: some StringProtocol) -> Bool {
        !bundleID.isEmpty && bundleID.allSatisfy { $0.isLetter || $0.isNumber || $0 == "." || $0 == "-" }
    }

    /// Hex, even length, 8 to 200 bytes. Apple says not to assume a size; 32 (device) and ~80 (activity) are usual.
    static func isValidDeviceToken(_ token: String) -> Bool {
        let count = token.utf8.count
        guard count % 2 == 0, count >= 16, count <= 400 else { return false }
        return token.utf8.allSatisfy { byte in
            (byte >= 48 && byte <= 57) || (byte >= 97 && byte <= 102) || (byte >= 65 && byte <= 70)
        }
    }

    static func isCanonicalUUID(_ value: String) -> Bool {
        let bytes = Array(value.utf8)
        guard bytes.count == 36 else { return false }
        for (index, byte) in bytes.enumerated() {
            if [8, 13, 18, 23].contains(index) {
                guard byte == UInt8(ascii: "-") else { return false }
            } else {
                let isHex = (byte >= 48 && byte <= 57) || (byte >= 97 && byte <= 102) || (byte >= 65 && byte <= 70)
                guard isHex else { return false }
            }
        }
        return true
    }
}
