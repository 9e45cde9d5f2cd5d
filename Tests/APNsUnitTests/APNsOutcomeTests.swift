import Foundation
import Testing

@testable import APNs

@Suite("Every APNs answer becomes a typed outcome")
struct APNsOutcomeTests {
    static let id = UUID()
    static let delays = APNsClientConfiguration.RetryDelays()

    static func classify(_ status: Int, _ body: String = "", retryAfter: Duration? = nil) -> APNsOutcome {
        APNsOutcome.classify(status: status, body: Array(body.utf8), apnsID: id, retryAfter: retryAfter, delays: delays)
    }

    static func reason(_ reason: String) -> String { #"{"reason":"\#(reason)"}"# }

    @Test func delivered() {
        #expect(Self.classify(200) == .delivered(apnsID: Self.id))
    }

    @Test(arguments: [
        (410, "Unregistered"), (410, "ExpiredToken"), (400, "BadDeviceToken"), (400, "DeviceTokenNotForTopic"),
    ])
    func tokenGone(status: Int, reason: String) {
        let outcome = Self.classify(status, Self.reason(reason))
        #expect(outcome == .tokenGone(reason: APNsReason(rawValue: reason), unregisteredAt: nil))
        #expect(outcome.status == status)
    }

    @Test func unregisteredCarriesItsMillisecondTimestamp() {
        let outcome = Self.classify(410, #"{"reason":"Unregistered","timestamp":1790000000123}"#)
        #expect(
            outcome == .tokenGone(reason: .unregistered, unregisteredAt: Date(timeIntervalSince1970: 1_790_000_000.123))
        )
    }

    @Test(arguments: [
        (429, "TooManyRequests", Duration.seconds(10)), (429, "TooManyProviderTokenUpdates", .seconds(5)),
        (500, "InternalServerError", .seconds(30)), (503, "ServiceUnavailable", .seconds(30)),
        (503, "Shutdown", .seconds(30)),
        (502, "", .seconds(30)), (400, "IdleTimeout", .seconds(1)),
    ])
    func retryLater(status: Int, reason: String, after: Duration) {
        let outcome = Self.classify(status, reason.isEmpty ? "" : Self.reason(reason))
        let expected = reason.isEmpty ? APNsReason.unexpectedStatus : APNsReason(rawValue: reason)
        #expect(outcome == .retryLater(reason: expected, status: status, after: after))
    }

    @Test func retryAfterHeaderWins() {
        #expect(
            Self.classify(429, Self.reason("TooManyRequests"), retryAfter: .seconds(120))
                == .retryLater(reason: .tooManyRequests, status: 429, after: .seconds(120)))
    }

    @Test func refreshAuth() {
        #expect(Self.classify(403, Self.reason("ExpiredProviderToken")) == .refreshAuth(reason: .expiredProviderToken))
    }

    @Test(arguments: [
        (403, "InvalidProviderToken"), (403, "MissingProviderToken"), (403, "BadEnvironmentKeyIdInToken"),
        (403, "UnrelatedKeyIdInToken"), (403, "Forbidden"), (400, "BadTopic"), (400, "TopicDisallowed"),
        (400, "MissingTopic"), (404, "BadPath"), (405, "MethodNotAllowed"), (403, "SomethingNewFrom2027"),
    ])
    func configurationFault(status: Int, reason: String) {
        #expect(
            Self.classify(status, Self.reason(reason))
                == .configurationFault(reason: APNsReason(rawValue: reason), status: status))
    }

    @Test(arguments: [
        (413, "PayloadTooLarge"), (400, "BadPriority"), (400, "BadCollapseId"), (400, "BadExpirationDate"),
        (400, "BadMessageId"), (400, "DuplicateHeaders"), (400, "InvalidPushType"), (400, "PayloadEmpty"),
        (400, "MissingDeviceToken"), (400, "ANewReasonNobodyKnows"),
    ])
    func payloadFault(status: Int, reason: String) {
        #expect(
            Self.classify(status, Self.reason(reason))
                == .payloadFault(reason: APNsReason(rawValue: reason), status: status))
    }

    @Test func garbageBodiesDoNotCrash() {
        #expect(Self.classify(400, "<html>") == .payloadFault(reason: .unexpectedStatus, status: 400))
        #expect(Self.classify(410, #"{"reason":7}"#) == .tokenGone(reason: .unexpectedStatus, unregisteredAt: nil))
        #expect(Self.classify(302) == .configurationFault(reason: .unexpectedStatus, status: 302))
    }
}
