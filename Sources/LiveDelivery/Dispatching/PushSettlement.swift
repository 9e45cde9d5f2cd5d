import APNs
import Foundation
import LiveDeliveryCore
import Logging

/// What the dispatcher makes of APNs' answer to one claimed push, and what becomes of its outbox row:
/// decisions only, with no I/O, no clock, no randomness and no logging, so that every answer is
/// unit-tested without a server. The recorder (``PushDispatcher``) executes them: it records the
/// core's outcome in the order's state, pauses the app, logs the note, and deletes or releases the
/// row, all in one transaction with the other answers of its group.
struct PushSettlement: Equatable {
    /// The core's outcome, recorded in the order's state; nil when the push stays as it is (the app's
    /// configuration is at fault: it goes again, unchanged, after the pause).
    var outcome: PushOutcome?
    /// Send the push again, rebuilt by the core (fresh timestamp, newest content), after this delay.
    var retryAfter: Duration?
    /// Pause sending for the push's app, with APNs' reason and status.
    var pause: Pause?
    /// What to log about the answer, beyond its `push_attempts` row; nil for the common answers.
    var note: Note?

    struct Pause: Equatable {
        var reason: String
        var status: Int?
    }

    struct Note: Equatable {
        var level: Logger.Level
        var message: String
        var metadata: [String: String] = [:]
    }

    /// The dispatcher's settings the decisions depend on.
    struct Rules: Equatable {
        /// Attempts of one push, the first included, before a retryable answer gives it up.
        var maxAttempts: Int
        var backoffBase: Duration
        var backoffMax: Duration
        var pause: Duration

        init(maxAttempts: Int, backoffBase: Duration, backoffMax: Duration, pause: Duration) {
            self.maxAttempts = maxAttempts
            self.backoffBase = backoffBase
            self.backoffMax = backoffMax
            self.pause = pause
        }

        init(_ configuration: WorkerConfiguration.Dispatcher) {
            self.init(
                maxAttempts: configuration.maxAttempts, backoffBase: configuration.backoffBase,
                backoffMax: configuration.backoffMax, pause: configuration.pause)
        }
    }

    /// The settlement of `answer` to a push on its `attempts`-th attempt (counted at the claim).
    /// `jitter` (in 0.5…1) scales the exponential backoff, so that pushes refused together do not
    /// come back together.
    static func settle(_ answer: APNsOutcome, attempts: Int, rules: Rules, jitter: Double) -> PushSettlement {
        switch answer {
        case .delivered:
            return PushSettlement(outcome: .accepted)
        case .channelCreated(let channelID):
            return PushSettlement(outcome: .channelCreated(channelID: channelID))
        case .tokenGone(let reason, let unregisteredAt):
            return PushSettlement(
                outcome: .tokenRejected(reason: reason.rawValue, unregisteredAt: unregisteredAt),
                note: Note(
                    level: .info, message: "token gone", metadata: [LiveDeliveryLoggingKeys.apnsReason: "\(reason)"]))
        case .payloadFault(let reason, let status):
            return PushSettlement(
                outcome: .dropped(reason: "\(status) \(reason.rawValue)"),
                note: Note(
                    level: .error, message: "APNs refused the push as malformed; dropped",
                    metadata: [
                        LiveDeliveryLoggingKeys.apnsReason: "\(reason)",
                        LiveDeliveryLoggingKeys.apnsStatus: "\(status)",
                    ]))
        case .retryLater(let reason, _, let after):
            guard attempts < rules.maxAttempts else {
                return PushSettlement(
                    outcome: .dropped(reason: "retries exhausted: \(reason.rawValue)"),
                    note: Note(
                        level: .warning, message: "push given up after retries",
                        metadata: [
                            LiveDeliveryLoggingKeys.apnsReason: "\(reason)",
                            LiveDeliveryLoggingKeys.attempt: "\(attempts)",
                        ]))
            }
            // Exponential in the attempts, jittered and capped; never sooner than APNs asked (capped too).
            let backoff = Backoff.delay(
                attempt: attempts - 1, base: rules.backoffBase, maximum: rules.backoffMax, jitter: jitter)
            return PushSettlement(
                outcome: .retryLater(reason: reason.rawValue), retryAfter: max(backoff, min(after, rules.backoffMax)))
        case .refreshAuth(let reason):
            // The client has dropped its provider token: at once, with a fresh one.
            guard attempts < rules.maxAttempts else {
                return PushSettlement(outcome: .dropped(reason: "retries exhausted: \(reason.rawValue)"))
            }
            return PushSettlement(outcome: .retryLater(reason: reason.rawValue), retryAfter: .zero)
        case .configurationFault(let reason, let status):
            return PushSettlement(
                pause: Pause(reason: reason.rawValue, status: status),
                note: Note(
                    level: .error,
                    message: "APNs configuration fault: sending for this app is paused; its pushes are kept",
                    metadata: [
                        LiveDeliveryLoggingKeys.apnsReason: "\(reason)",
                        LiveDeliveryLoggingKeys.apnsStatus: "\(status.map { String($0) } ?? "")",
                        LiveDeliveryLoggingKeys.delay: "\(rules.pause)",
                    ]))
        }
    }

    /// What becomes of a claimed outbox row once its answer is recorded.
    enum Row: Equatable {
        /// The push is settled: the row goes.
        case delete
        /// The row stays for another send. `replaced`: a newer state replaced the push while it was in
        /// flight, and goes next as a first attempt. `uncounted`: the answer does not count against the
        /// push's attempts (its app's configuration was at fault).
        case release(replaced: Bool, uncounted: Bool)
    }

    /// The row's fate: deleted only when the push sent is still the row's (same generation), the
    /// core recorded an outcome, and the core does not want it sent again.
    static func row(claimed: Int64, current: Int64, recorded: Bool, resend: Bool) -> Row {
        claimed == current && recorded && !resend
            ? .delete : .release(replaced: claimed != current, uncounted: !recorded)
    }
}
