import APNs
import Foundation
import LiveDeliveryCore
import Logging
import Testing

@testable import LiveDelivery

/// Every answer APNs can give, settled without a server: the core's outcome, the retry delay, the
/// app's pause, what is logged, and the outbox row's fate.
@Suite("Push settlement")
struct PushSettlementTests {
    static let rules = PushSettlement.Rules(
        maxAttempts: 4, backoffBase: .seconds(1), backoffMax: .seconds(60), pause: .seconds(300))

    static func settle(_ answer: APNsOutcome, attempts: Int = 1, jitter: Double = 1) -> PushSettlement {
        PushSettlement.settle(answer, attempts: attempts, rules: rules, jitter: jitter)
    }

    @Test("delivered: accepted, nothing else")
    func delivered() {
        #expect(Self.settle(.delivered(apnsID: UUID())) == PushSettlement(outcome: .accepted))
    }

    @Test("token gone: the core fails the activity with APNs' reason and the 410 timestamp")
    func tokenGone() {
        let at = Date(timeIntervalSince1970: 1_790_000_000)
        let settled = Self.settle(.tokenGone(reason: .unregistered, unregisteredAt: at))
        #expect(settled.outcome == .tokenRejected(reason: "Unregistered", unregisteredAt: at))
        #expect(settled.retryAfter == nil && settled.pause == nil)
        #expect(settled.note?.level == .info)
    }

    @Test("payload fault: dropped with status and reason, logged as an error, never retried")
    func payloadFault() {
        let settled = Self.settle(.payloadFault(reason: .payloadTooLarge, status: 413), attempts: 1)
        #expect(settled.outcome == .dropped(reason: "413 PayloadTooLarge"))
        #expect(settled.retryAfter == nil)
        #expect(settled.note?.level == .error)
    }

    @Test("retry later: exponential in the attempts, jittered, capped, never sooner than APNs asked")
    func retryLater() {
        let answer = APNsOutcome.retryLater(reason: .serviceUnavailable, status: 503, after: .zero)
        #expect(Self.settle(answer, attempts: 1).retryAfter == .seconds(1))
        #expect(Self.settle(answer, attempts: 2).retryAfter == .seconds(2))
        #expect(Self.settle(answer, attempts: 3).retryAfter == .seconds(4))
        #expect(Self.settle(answer, attempts: 3, jitter: 0.5).retryAfter == .seconds(2))
        #expect(Self.settle(answer, attempts: 3).outcome == .retryLater(reason: "ServiceUnavailable"))
        // APNs' own delay wins when longer, up to the maximum.
        let asked = APNsOutcome.retryLater(reason: .tooManyRequests, status: 429, after: .seconds(30))
        #expect(Self.settle(asked, attempts: 1).retryAfter == .seconds(30))
        let tooLong = APNsOutcome.retryLater(reason: .tooManyRequests, status: 429, after: .seconds(3600))
        #expect(Self.settle(tooLong, attempts: 1).retryAfter == .seconds(60))
        // The exponential is capped too.
        let capped = PushSettlement.settle(
            answer, attempts: 20,
            rules: .init(maxAttempts: 50, backoffBase: .seconds(1), backoffMax: .seconds(60), pause: .zero),
            jitter: 1)
        #expect(capped.retryAfter == .seconds(60))
    }

    @Test("retries are bounded: the last attempt's retryable answer gives the push up, with a warning")
    func retriesExhausted() {
        let answer = APNsOutcome.retryLater(reason: .connectionLost, status: nil, after: .zero)
        let settled = Self.settle(answer, attempts: Self.rules.maxAttempts)
        #expect(settled.outcome == .dropped(reason: "retries exhausted: client.ConnectionLost"))
        #expect(settled.retryAfter == nil)
        #expect(settled.note?.level == .warning)
        #expect(settled.note?.metadata[LiveDeliveryLoggingKeys.attempt] == "4")
    }

    @Test("refresh auth: again at once with a fresh provider token, bounded as well")
    func refreshAuth() {
        let settled = Self.settle(.refreshAuth(reason: .expiredProviderToken), attempts: 1)
        #expect(settled == PushSettlement(outcome: .retryLater(reason: "ExpiredProviderToken"), retryAfter: .zero))
        let exhausted = Self.settle(.refreshAuth(reason: .expiredProviderToken), attempts: Self.rules.maxAttempts)
        #expect(exhausted.outcome == .dropped(reason: "retries exhausted: ExpiredProviderToken"))
    }

    @Test("configuration fault: the app is paused, the push kept as it is and not counted")
    func configurationFault() {
        let settled = Self.settle(.configurationFault(reason: .badTopic, status: 400), attempts: Self.rules.maxAttempts)
        #expect(settled.outcome == nil && settled.retryAfter == nil)
        #expect(settled.pause == PushSettlement.Pause(reason: "BadTopic", status: 400))
        #expect(settled.note?.level == .error)
        #expect(
            PushSettlement.row(claimed: 3, current: 3, recorded: settled.outcome != nil, resend: false)
                == .release(replaced: false, uncounted: true))
    }

    @Test("the row: deleted when settled and still the row's push, else released for the next send")
    func row() {
        #expect(PushSettlement.row(claimed: 1, current: 1, recorded: true, resend: false) == .delete)
        // Retried: the core wants it sent again (rebuilt).
        #expect(
            PushSettlement.row(claimed: 1, current: 1, recorded: true, resend: true)
                == .release(replaced: false, uncounted: false))
        // A newer state replaced the push while it was in flight: the newer goes next, as a first attempt.
        #expect(
            PushSettlement.row(claimed: 1, current: 2, recorded: true, resend: false)
                == .release(replaced: true, uncounted: false))
        #expect(
            PushSettlement.row(claimed: 1, current: 2, recorded: false, resend: false)
                == .release(replaced: true, uncounted: true))
    }

    @Test("no secret reaches a note: only reasons, statuses, attempts and delays")
    func notesCarryNoToken() {
        let answers: [APNsOutcome] = [
            .tokenGone(reason: .badDeviceToken, unregisteredAt: nil),
            .payloadFault(reason: .badPriority, status: 400),
            .retryLater(reason: .internalServerError, status: 500, after: .zero),
            .configurationFault(reason: .invalidProviderToken, status: 403),
        ]
        let allowed: Set<String> = [
            LiveDeliveryLoggingKeys.apnsReason, LiveDeliveryLoggingKeys.apnsStatus, LiveDeliveryLoggingKeys.attempt,
            LiveDeliveryLoggingKeys.delay,
        ]
        for answer in answers {
            for attempts in [1, Self.rules.maxAttempts] {
                let keys = Set(Self.settle(answer, attempts: attempts).note.map { Array($0.metadata.keys) } ?? [])
                #expect(keys.isSubset(of: allowed), "\(answer): \(keys)")
            }
        }
    }
}
