/// Why an activity or an order's broadcast channel closed, or what its close still waits for.
///
/// The core decides by the case, never by the text. The text (``stored``) is what the state document, the
/// `activities.end_reason` and `broadcast_channels.close_reason` columns and the reports hold; ``init(stored:)``
/// reads every text an earlier release wrote.
package enum CloseReason: Hashable, Sendable, CustomStringConvertible {
    /// A decision of the worker's: `sweep_idle`, `sweep_lifetime`, `sweep_never_adopted`,
    /// `sweep_terminal_not_ended` (the sweeper sends an end once more), `start_withdrawn`,
    /// `activities_disabled`, `channel_limit_near`, `handed_over` (the order moved to another cell).
    case decided(Decision.Code)
    /// The app reported the end (`activity.ended`).
    case reportedByApp(ActivityEndReason)
    /// APNs accepted the end the worker sent.
    case endedByServer
    /// APNs said the token (or the channel, for its members) is gone.
    case tokenGone(String)
    /// APNs refused the start.
    case startDropped(String)
    /// APNs refused the end twice, or the end of the channel the activity was in: given up.
    case endDropped(String)
    /// APNs refused the end once: the sweeper sends it once more.
    case endNotAccepted(String)
    /// The channel: APNs did not create it.
    case channelRefused(String)
    /// The channel (and its members): APNs says it no longer exists.
    case channelGone(String)
    /// The channel: APNs refused its deletion once; the sweeper tries once more.
    case closeNotAccepted(String)
    /// The channel: its deletion is being tried the second time.
    case closeRetried
    /// The channel: APNs refused its deletion twice; given up.
    case closeDropped(String)

    private static let detailed: [(prefix: String, make: @Sendable (String) -> CloseReason)] = [
        ("token_gone: ", CloseReason.tokenGone), ("start_dropped: ", CloseReason.startDropped),
        ("end_dropped: ", CloseReason.endDropped), ("end_not_accepted: ", CloseReason.endNotAccepted),
        ("channel_refused: ", CloseReason.channelRefused), ("channel_gone: ", CloseReason.channelGone),
        ("close_not_accepted: ", CloseReason.closeNotAccepted), ("close_dropped: ", CloseReason.closeDropped),
    ]

    /// Reads a stored text. A text of no detailed form is the app's reason when it names one, else a decision.
    package init(stored: String) {
        switch stored {
        case "ended_by_server": self = .endedByServer
        case "close_retried": self = .closeRetried
        default:
            if let form = Self.detailed.first(where: { stored.hasPrefix($0.prefix) }) {
                self = form.make(String(stored.dropFirst(form.prefix.count)))
            } else if let reason = ActivityEndReason.known.first(where: { $0.rawValue == stored }) {
                self = .reportedByApp(reason)
            } else {
                self = .decided(Decision.Code(rawValue: stored))
            }
        }
    }

    /// The text stored and shown: a decision's or the app's code, or `<kind>: <APNs' reason>`.
    package var stored: String {
        switch self {
        case .decided(let code): code.rawValue
        case .reportedByApp(let reason): reason.rawValue
        case .endedByServer: "ended_by_server"
        case .closeRetried: "close_retried"
        case .tokenGone(let detail): "token_gone: \(detail)"
        case .startDropped(let detail): "start_dropped: \(detail)"
        case .endDropped(let detail): "end_dropped: \(detail)"
        case .endNotAccepted(let detail): "end_not_accepted: \(detail)"
        case .channelRefused(let detail): "channel_refused: \(detail)"
        case .channelGone(let detail): "channel_gone: \(detail)"
        case .closeNotAccepted(let detail): "close_not_accepted: \(detail)"
        case .closeDropped(let detail): "close_dropped: \(detail)"
        }
    }

    package var description: String { stored }

    /// The sweeper's end for lifetime or idleness, which the end push's plan names.
    var sweepEnd: Decision.Code? {
        guard case .decided(let code) = self, code == .sweepIdle || code == .sweepLifetime else { return nil }
        return code
    }
}
