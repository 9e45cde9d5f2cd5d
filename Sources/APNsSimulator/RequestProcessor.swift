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
    var apnsID: String
    var unregisteredAt: Date?
    /// Seconds for a `retry-after` header (injected faults only).
    var retryAfter: Int?
    /// The connection just proved a valid provider token: lift the one-stream limit.
    var becameAuthenticated = false
}

/// Judges `POST /3/device/<token>` requests as APNs documents it, then hands accepted pushes to the devices.
final class RequestProcessor: Sendable {
    static let maxPayloadBytes = 4096
    static let knownPushTypes: Set<String> = [
        "alert", "background", "location", "voip", "complication", "fileprovider", "mdm", "liveactivity",
        "pushtotalk", "widgets", "controls",
    ]
    private static let checkedOnce: Set<String> = [
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
        let token = path.hasPrefix("/3/device/") ? String(path.dropFirst("/3/device/".count)) : ""
        return PushRecord(
            sequence: 0, receivedAt: store.now(), connectionID: connection.id, streamID: streamID,
            method: head.method, path: path, deviceToken: token, topic: head.value("apns-topic"),
            pushType: head.value("apns-push-type"), priority: head.value("apns-priority").flatMap { Int($0) },
            expiration: head.value("apns-expiration").flatMap { Int($0) },
            apnsID: head.value("apns-id")?.lowercased() ?? UUID().uuidString.lowercased(),
            collapseID: head.value("apns-collapse-id"), keyID: nil, issuedAt: nil, providerTokenFingerprint: nil,
            payload: String(decoding: body.readableBytesView, as: UTF8.self), status: 0, reason: nil,
            unregisteredAt: nil, verdict: DeviceVerdict(.rejected), activityID: nil, issuedUpdateToken: nil)
    }

    func process(head: RequestHead, body: ByteBuffer, connection: ConnectionState, streamID: Int) -> APNsAnswer {
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

        // Headers that may appear once.
        var seen = Set<String>()
        for (name, _) in head.headers where Self.checkedOnce.contains(name) {
            guard seen.insert(name).inserted else { return answer(400, "DuplicateHeaders") }
        }

        // Provider token.
        guard let authorization = head.value("authorization") else { return answer(403, "MissingProviderToken") }
        guard authorization.count > 7, authorization.prefix(7).lowercased() == "bearer " else {
            return answer(403, "InvalidProviderToken")
        }
        let jwt = authorization.dropFirst(7)
        let now = store.now()
        let verified: VerifiedProviderToken
        if let current = connection.verified, connection.providerToken.map({ $0[...] == jwt }) == true {
            verified = current
        } else {
            guard let fresh = verifier.verify(jwt) else { return answer(403, "InvalidProviderToken") }
            verified = fresh
        }
        record.keyID = verified.keyID
        record.issuedAt = verified.issuedAt
        record.providerTokenFingerprint = verified.fingerprint
        if let restricted = verified.key?.environment, restricted != environment {
            return answer(403, "BadEnvironmentKeyIdInToken")
        }
        if now.timeIntervalSince1970 - Double(verified.issuedAt) > providerTokenMaxAge {
            return answer(403, "ExpiredProviderToken")
        }
        if let team = connection.verified?.teamID, team != verified.teamID {
            return answer(403, "UnrelatedKeyIdInToken")
        }
        if connection.providerToken.map({ $0[...] != jwt }) ?? true {
            if let setAt = connection.tokenSetAt, now.timeIntervalSince(setAt) < providerTokenMinUpdateInterval {
                return answer(429, "TooManyProviderTokenUpdates")
            }
            connection.providerToken = String(jwt)
            connection.verified = verified
            connection.tokenSetAt = now
        }
        if !connection.authenticated {
            connection.authenticated = true
            becameAuthenticated = true
        }

        // Topic and push type.
        guard let topic = head.value("apns-topic"), !topic.isEmpty else { return answer(400, "MissingTopic") }
        let pushType = head.value("apns-push-type") ?? "alert"
        guard Self.knownPushTypes.contains(pushType) else { return answer(400, "InvalidPushType") }
        let suffix = ".push-type.liveactivity"
        let hasSuffix = topic.hasSuffix(suffix)
        if (pushType == "liveactivity") != hasSuffix { return answer(400, "DeviceTokenNotForTopic") }
        let bundleID = hasSuffix ? String(topic.dropLast(suffix.count)) : topic
        guard !bundleID.isEmpty, bundleID.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "." || $0 == "-" })
        else { return answer(400, "BadTopic") }
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
