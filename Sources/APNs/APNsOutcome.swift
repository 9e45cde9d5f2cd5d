public import Foundation

/// What to do after a send, decided from APNs' status and reason so the worker never parses strings.
public enum APNsOutcome: Sendable, Hashable {
    /// 200: APNs accepted the push (which does not mean the device showed it).
    case delivered(apnsID: UUID)
    /// The token is dead: 410 `Unregistered` (with the time it became invalid), `ExpiredToken`,
    /// `BadDeviceToken` (or the wrong environment), `DeviceTokenNotForTopic`. Stop using it; never retry.
    case tokenGone(reason: APNsReason, unregisteredAt: Date?)
    /// Try again after `after`: 429, 5xx, `IdleTimeout`, a timeout or a lost connection (`status` nil).
    case retryLater(reason: APNsReason, status: Int?, after: Duration)
    /// 403 `ExpiredProviderToken`: the client dropped its cached JWT (when old enough); send again.
    case refreshAuth(reason: APNsReason)
    /// The app's setup is wrong (key, team, topic, environment, base URL, certificate); retrying will not help.
    case configurationFault(reason: APNsReason, status: Int?)
    /// This request is wrong (413 and the other 400s); fix the push, do not resend it as is.
    case payloadFault(reason: APNsReason, status: Int)

    /// The HTTP status, when APNs answered.
    public var status: Int? {
        switch self {
        case .delivered: 200
        case .tokenGone(let reason, _): reason == .badDeviceToken || reason == .deviceTokenNotForTopic ? 400 : 410
        case .retryLater(_, let status, _): status
        case .refreshAuth: 403
        case .configurationFault(_, let status): status
        case .payloadFault(_, let status): status
        }
    }

    /// APNs' (or the client's) reason; `nil` when delivered.
    public var reason: APNsReason? {
        switch self {
        case .delivered: nil
        case .tokenGone(let reason, _), .retryLater(let reason, _, _), .refreshAuth(let reason),
            .configurationFault(let reason, _), .payloadFault(let reason, _):
            reason
        }
    }
}

/// APNs' `reason` strings, plus the client's own for failures without a response.
/// Unknown reasons are kept as they came.
public struct APNsReason: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public var rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public var description: String { rawValue }

    // 400
    public static let badCollapseID = APNsReason(rawValue: "BadCollapseId")
    public static let badDeviceToken = APNsReason(rawValue: "BadDeviceToken")
    public static let badExpirationDate = APNsReason(rawValue: "BadExpirationDate")
    public static let badMessageID = APNsReason(rawValue: "BadMessageId")
    public static let badPriority = APNsReason(rawValue: "BadPriority")
    public static let badTopic = APNsReason(rawValue: "BadTopic")
    public static let deviceTokenNotForTopic = APNsReason(rawValue: "DeviceTokenNotForTopic")
    public static let duplicateHeaders = APNsReason(rawValue: "DuplicateHeaders")
    public static let idleTimeout = APNsReason(rawValue: "IdleTimeout")
    public static let invalidPushType = APNsReason(rawValue: "InvalidPushType")
    public static let missingDeviceToken = APNsReason(rawValue: "MissingDeviceToken")
    public static let missingTopic = APNsReason(rawValue: "MissingTopic")
    public static let payloadEmpty = APNsReason(rawValue: "PayloadEmpty")
    public static let topicDisallowed = APNsReason(rawValue: "TopicDisallowed")
    // 403
    public static let badCertificate = APNsReason(rawValue: "BadCertificate")
    public static let badCertificateEnvironment = APNsReason(rawValue: "BadCertificateEnvironment")
    public static let expiredProviderToken = APNsReason(rawValue: "ExpiredProviderToken")
    public static let forbidden = APNsReason(rawValue: "Forbidden")
    public static let invalidProviderToken = APNsReason(rawValue: "InvalidProviderToken")
    public static let missingProviderToken = APNsReason(rawValue: "MissingProviderToken")
    public static let unrelatedKeyIDInToken = APNsReason(rawValue: "UnrelatedKeyIdInToken")
    public static let badEnvironmentKeyIDInToken = APNsReason(rawValue: "BadEnvironmentKeyIdInToken")
    public static let badEnvironmentKeyInToken = APNsReason(rawValue: "BadEnvironmentKeyInToken")
    // 404, 405, 410, 413, 429, 5xx
    public static let badPath = APNsReason(rawValue: "BadPath")
    public static let methodNotAllowed = APNsReason(rawValue: "MethodNotAllowed")
    public static let expiredToken = APNsReason(rawValue: "ExpiredToken")
    public static let unregistered = APNsReason(rawValue: "Unregistered")
    public static let payloadTooLarge = APNsReason(rawValue: "PayloadTooLarge")
    public static let tooManyProviderTokenUpdates = APNsReason(rawValue: "TooManyProviderTokenUpdates")
    public static let tooManyRequests = APNsReason(rawValue: "TooManyRequests")
    public static let internalServerError = APNsReason(rawValue: "InternalServerError")
    public static let serviceUnavailable = APNsReason(rawValue: "ServiceUnavailable")
    public static let shutdown = APNsReason(rawValue: "Shutdown")

    // The client's own (no APNs response).
    /// No answer within the request timeout.
    public static let timedOut = APNsReason(rawValue: "client.TimedOut")
    /// The connection failed, was reset, or was closed (GOAWAY) before the answer.
    public static let connectionLost = APNsReason(rawValue: "client.ConnectionLost")
    /// No connection could be made.
    public static let couldNotConnect = APNsReason(rawValue: "client.CouldNotConnect")
    /// TLS failed (e.g. the server's certificate is not trusted).
    public static let tlsFailure = APNsReason(rawValue: "client.TLSFailure")
    /// The bundle id is not configured in the client.
    public static let unknownApp = APNsReason(rawValue: "client.UnknownApp")
    /// The provider token could not be signed.
    public static let signingFailed = APNsReason(rawValue: "client.SigningFailed")
    /// The client is shutting down or the task was cancelled.
    public static let cancelled = APNsReason(rawValue: "client.Cancelled")
    /// Anything else the transport reported.
    public static let transportFailure = APNsReason(rawValue: "client.TransportFailure")
    /// APNs answered with a status this client does not know.
    public static let unexpectedStatus = APNsReason(rawValue: "client.UnexpectedStatus")
}
