import Testing

@testable import LiveDeliveryCore

/// Close reasons are typed in the core and stored as text: every text an earlier release wrote reads back as
/// the case the core decides by, and every case is written as that text again.
@Suite("Tracking: close reasons")
struct CloseReasonTests {
    static let stored: [(String, CloseReason)] = [
        ("sweep_idle", .decided(.sweepIdle)), ("sweep_lifetime", .decided(.sweepLifetime)),
        ("sweep_never_adopted", .decided(.sweepNeverAdopted)),
        ("sweep_terminal_not_ended", .decided(.sweepTerminalNotEnded)), ("start_withdrawn", .decided(.startWithdrawn)),
        ("activities_disabled", .decided(.activitiesDisabled)), ("channel_limit_near", .decided(.channelLimitNear)),
        ("handed_over", .decided(.handedOver)),
        ("dismissed_by_user", .reportedByApp(.dismissedByUser)), ("ended_on_device", .reportedByApp(.endedOnDevice)),
        ("expired", .reportedByApp(.expired)), ("ended_by_server", .endedByServer), ("close_retried", .closeRetried),
        ("token_gone: 410 Unregistered", .tokenGone("410 Unregistered")),
        ("start_dropped: 400 BadDeviceToken", .startDropped("400 BadDeviceToken")),
        ("end_dropped: 400 PayloadTooLarge", .endDropped("400 PayloadTooLarge")),
        ("end_not_accepted: 400 BadPriority", .endNotAccepted("400 BadPriority")),
        ("channel_refused: 400 CannotCreateChannelConfig", .channelRefused("400 CannotCreateChannelConfig")),
        ("channel_gone: 400 ChannelNotRegistered", .channelGone("400 ChannelNotRegistered")),
        ("close_not_accepted: 500 InternalServerError", .closeNotAccepted("500 InternalServerError")),
        ("close_dropped: 400 BadChannelId", .closeDropped("400 BadChannelId")),
    ]

    @Test("each stored text reads as its case and is written back unchanged", arguments: stored.indices)
    func roundTrip(_ index: Int) {
        let (text, reason) = Self.stored[index]
        #expect(CloseReason(stored: text) == reason)
        #expect(reason.stored == text)
    }

    @Test("a detail that itself looks like a prefix stays the detail")
    func nestedDetail() {
        let reason = CloseReason(stored: "end_dropped: end_not_accepted: x")
        #expect(reason == .endDropped("end_not_accepted: x"))
        #expect(CloseReason(stored: reason.stored) == reason)
    }

    @Test("only the sweeper's lifetime and idle ends name a sweep in the end push")
    func sweepEnd() {
        #expect(CloseReason.decided(.sweepIdle).sweepEnd == .sweepIdle)
        #expect(CloseReason.decided(.sweepLifetime).sweepEnd == .sweepLifetime)
        #expect(CloseReason.decided(.sweepTerminalNotEnded).sweepEnd == nil)
        #expect(CloseReason.endNotAccepted("sweep_idle").sweepEnd == nil)
    }
}
