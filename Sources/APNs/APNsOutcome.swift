package import Foundation

/// What to do after a send, decided from APNs' status and reason so the worker never parses strings.
package enum APNsOutcome: Sendable, Hashable {
    /// 200: APNs accepted the push (which does not mean the device showed it).
    case delivered(apnsID: UUID)
    /// 201 to a channel's creation: the new channel's id (the `apns-channel-id` header).
    case channelCreated(channelID: String)
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
    package var status: Int? {
        switch self {
        case .delivered: 200
        case .channelCreated: 201
        case .tokenGone(let reason, _):
            reason == .badDeviceToken || reason == .deviceTokenNotForTopic || reason == .channelNotRegistered
                ? 400 : 410
        case .retryLater(_, let status, _): status
        case .refreshAuth: 403
        case .configurationFault(_, let status): status
        case .payloadFault(_, let status): status
        }
    }

    /// APNs' (or the client's) reason; `nil` when delivered.
    package var reason: APNsReason? {
        switch self {
        case .delivered, .channelCreated: nil
        case .tokenGone(let reason, _), .retryLater(let reason, _, _), .refreshAuth(let reason),
            .configurationFault(let reason, _), .payloadFault(let reason, _):
            reason
        }
    }
}

/// APNs' `reason` strings, plus the client's own for failures without a response.
/// Unknown reasons are kept as they came.
package struct APNsReason: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    package var rawValue: String
    package init(rawValue: String) { self.rawValue = rawValue }
    package var description: String { rawValue }

    // 400
    package static let badCollapseID = APNsReason(rawValue: "BadCollapseId")
    package static let badDeviceToken = APNsReason(rawValue: "BadDeviceToken")
    package static let badExpirationDate = APNsReason(rawValue: "BadExpirationDate")
    package static let badMessageID = APNsReason(rawValue: "BadMessageId")
    package static let badPriority = APNsReason(rawValue: "BadPriority")
    package static let badTopic = APNsReason(rawValue: "BadTopic")
    package static let deviceTokenNotForTopic = APNsReason(rawValue: "DeviceTokenNotForTopic")
    package static let duplicateHeaders = APNsReason(rawValue: "DuplicateHeaders")
    package static let idleTimeout = APNsReason(rawValue: "IdleTimeout")
    package static let invalidPushType = APNsReason(rawValue: "InvalidPushType")
    package static let missingDeviceToken = APNsReason(rawValue: "MissingDeviceToken")
    package static let missingTopic = APNsReason(rawValue: "MissingTopic")
    package static let payloadEmpty = APNsReason(rawValue: "PayloadEmpty")
    package static let topicDisallowed = APNsReason(rawValue: "TopicDisallowed")
    // Broadcast channels (400 unless said): the channel's id, its creation and the broadcast's headers.
    package static let channelNotRegistered = APNsReason(rawValue: "ChannelNotRegistered")
    package static let missingChannelID = APNsReason(rawValue: "MissingChannelId")
    package static let badChannelID = APNsReason(rawValue: "BadChannelId")
    package static let cannotCreateChannelConfig = APNsReason(rawValue: "CannotCreateChannelConfig")
    package static let featureNotEnabled = APNsReason(rawValue: "FeatureNotEnabled")
    package static let missingPushType = APNsReason(rawValue: "MissingPushType")
    package static let badRequestParams = APNsReason(rawValue: "BadRequestParams")
    package static let badRequestPayload = APNsReason(rawValue: "BadRequestPayload")
    /// 403.
    package static let topicMismatch = APNsReason(rawValue: "TopicMismatch")
    // 403
    package static let badCertificate = APNsReason(rawValue: "BadCertificate")
    package static let badCertificateEnvironment = APNsReason(rawValue: "BadCertificateEnvironment")
    package static let expiredProviderToken = APNsReason(rawValue: "ExpiredProviderToken")
    package static let forbidden = APNsReason(rawValue: "Forbidden")
    package static let invalidProviderToken = APNsReason(rawValue: "InvalidProviderToken")
    package static let missingProviderToken = APNsReason(rawValue: "MissingProviderToken")
    package static let unrelatedKeyIDInToken = APNsReason(rawValue: "UnrelatedKeyIdInToken")
    package static let badEnvironmentKeyIDInToken = APNsReason(rawValue: "BadEnvironmentKeyIdInToken")
    package static let badEnvironmentKeyInToken = APNsReason(rawValue: "BadEnvironmentKeyInToken")
    // 404, 405, 410, 413, 429, 5xx
    package static let badPath = APNsReason(rawValue: "BadPath")
    package static let methodNotAllowed = APNsReason(rawValue: "MethodNotAllowed")
    package static let expiredToken = APNsReason(rawValue: "ExpiredToken")
    package static let unregistered = APNsReason(rawValue: "Unregistered")
    package static let payloadTooLarge = APNsReason(rawValue: "PayloadTooLarge")
    package static let tooManyProviderTokenUpdates = APNsReason(rawValue: "TooManyProviderTokenUpdates")
    package static let tooManyRequests = APNsReason(rawValue: "TooManyRequests")
    package static let internalServerError = APNsReason(rawValue: "InternalServerError")
    package static let serviceUnavailable = APNsReason(rawValue: "ServiceUnavailable")
    package static let shutdown = APNsReason(rawValue: "Shutdown")

    // The client's own (no APNs response).
    /// No answer within the request timeout.
    package static let timedOut = APNsReason(rawValue: "client.TimedOut")
    /// The connection failed, was reset, or was closed (GOAWAY) before the answer.
    package static let connectionLost = APNsReason(rawValue: "client.ConnectionLost")
    /// No connection could be made.
    package static let couldNotConnect = APNsReason(rawValue: "client.CouldNotConnect")
    /// TLS failed (e.g. the server's certificate is not trusted).
    package static let tlsFailure = APNsReason(rawValue: "client.TLSFailure")
    /// The bundle id is not configured in the client.
    package static let unknownApp = APNsReason(rawValue: "client.UnknownApp")
    /// The provider token could not be signed.
    package static let signingFailed = APNsReason(rawValue: "client.SigningFailed")
    /// The client is shutting down or the task was cancelled.
    package static let cancelled = APNsReason(rawValue: "client.Cancelled")
    /// Anything else the transport reported.
    package static let transportFailure = APNsReason(rawValue: "client.TransportFailure")
    /// APNs answered with a status this client does not know.
    package static let unexpectedStatus = APNsReason(rawValue: "client.UnexpectedStatus")
}
