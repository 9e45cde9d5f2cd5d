package import Foundation

extension APNsOutcome {
    /// Maps APNs' answer to an outcome: Apple's table in "Handling notification responses from APNs".
    ///
    /// - Parameters:
    ///   - status: the HTTP status.
    ///   - body: the response body (`{"reason": …, "timestamp": ms}` on errors).
    ///   - apnsID: the `apns-id` header, else the request's.
    ///   - retryAfter: a `Retry-After` header in seconds, if any.
    package static func classify(
        status: Int,
        body: [UInt8],
        apnsID: UUID,
        retryAfter: Duration?,
        delays: APNsRetryDelays
    ) -> APNsOutcome {
        if status == 200 { return .delivered(apnsID: apnsID) }
        let error = ErrorBody.parse(body)
        let reason = error.reason.map { APNsReason(rawValue: $0) } ?? .unexpectedStatus
        func later(_ delay: Duration) -> APNsOutcome {
            .retryLater(reason: reason, status: status, after: retryAfter ?? delay)
        }

        switch status {
        case 400:
            switch reason {
            case .badDeviceToken, .deviceTokenNotForTopic, .channelNotRegistered:
                return .tokenGone(reason: reason, unregisteredAt: nil)
            case .badTopic, .topicDisallowed, .missingTopic:
                return .configurationFault(reason: reason, status: status)
            case .idleTimeout:
                return later(delays.transport)
            default:
                return .payloadFault(reason: reason, status: status)
            }
        case 403:
            return reason == .expiredProviderToken
                ? .refreshAuth(reason: reason) : .configurationFault(reason: reason, status: status)
        case 404, 405:
            return .configurationFault(reason: reason, status: status)
        case 410:
            return .tokenGone(
                reason: reason,
                unregisteredAt: error.timestamp.map { Date(timeIntervalSince1970: Double($0) / 1000) })
        case 413:
            return .payloadFault(reason: reason, status: status)
        case 429:
            return later(
                reason == .tooManyProviderTokenUpdates ? delays.tooManyProviderTokenUpdates : delays.tooManyRequests)
        case 500...599:
            return later(delays.serverError)
        case 400...499:
            return .payloadFault(reason: reason, status: status)
        default:
            return .configurationFault(reason: reason, status: status)
        }
    }

    /// APNs' error body. `timestamp` is milliseconds since 1970 (410 only); some proxies send it as a string.
    struct ErrorBody: Decodable {
        var reason: String?
        var timestamp: Int64?

        static func parse(_ body: [UInt8]) -> ErrorBody {
            guard !body.isEmpty,
                let object = (try? JSONSerialization.jsonObject(with: Data(body))) as? [String: Any]
            else { return ErrorBody() }
            var result = ErrorBody()
            result.reason = object["reason"] as? String
            if let number = object["timestamp"] as? NSNumber {
                result.timestamp = number.int64Value
            } else if let text = object["timestamp"] as? String {
                result.timestamp = Int64(text)
            }
            return result
        }

        init() {}
    }
}
