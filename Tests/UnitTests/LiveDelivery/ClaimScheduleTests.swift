import Testing

@testable import LiveDelivery

/// When the dispatcher reads the outbox and for how many rows, with the time given.
@Suite("Claim schedule")
struct ClaimScheduleTests {
    typealias Schedule = ClaimSchedule<ContinuousClock.Instant>
    static let start = ContinuousClock.now

    static func schedule() -> Schedule {
        Schedule(concurrency: 512, batchSize: 250, poll: .seconds(1), now: start)
    }

    @Test("the first step claims, with expired leases, up to a batch")
    func firstStep() {
        var schedule = Self.schedule()
        #expect(schedule.next(wanted: false, occupied: 0, now: Self.start) == .claim(limit: 250, expired: true))
    }

    @Test("a short batch drains the outbox until the next poll; a wake-up claims before it")
    func shortBatchWaitsForThePoll() {
        var schedule = Self.schedule()
        _ = schedule.next(wanted: false, occupied: 0, now: Self.start)
        #expect(schedule.claimed(10, limit: 250, now: Self.start) == false)
        let later = Self.start.advanced(by: .milliseconds(300))
        #expect(
            schedule.next(wanted: false, occupied: 10, now: later) == .wait(until: Self.start.advanced(by: .seconds(1)))
        )
        // A NOTIFY or a released row: at once, without the expired rows (looked for once per poll).
        #expect(schedule.next(wanted: true, occupied: 10, now: later) == .claim(limit: 250, expired: false))
        // The poll comes: a claim without a wake-up, with the expired rows again.
        let poll = Self.start.advanced(by: .seconds(1))
        _ = schedule.claimed(0, limit: 250, now: later)
        #expect(
            schedule.next(wanted: false, occupied: 0, now: poll.advanced(by: .milliseconds(300)))
                == .claim(limit: 250, expired: true))
    }

    @Test("a full batch asks for another claim at once")
    func fullBatchClaimsAgain() {
        var schedule = Self.schedule()
        _ = schedule.next(wanted: false, occupied: 0, now: Self.start)
        #expect(schedule.claimed(250, limit: 250, now: Self.start) == true)
        #expect(schedule.next(wanted: true, occupied: 250, now: Self.start) == .claim(limit: 250, expired: false))
    }

    @Test("never more in flight than the concurrency: the room left bounds a claim; no room, wait for room")
    func roomBoundsClaims() {
        var schedule = Self.schedule()
        #expect(schedule.next(wanted: true, occupied: 400, now: Self.start) == .claim(limit: 112, expired: true))
        #expect(schedule.next(wanted: true, occupied: 512, now: Self.start) == .waitForRoom)
        #expect(schedule.next(wanted: true, occupied: 600, now: Self.start) == .waitForRoom)
    }

    @Test("a failed claim changes nothing: the next step claims again (after the dispatcher's backoff)")
    func failedClaim() {
        var schedule = Self.schedule()
        _ = schedule.next(wanted: false, occupied: 0, now: Self.start)
        // The dispatcher re-arms its wake-up after a failure.
        #expect(schedule.next(wanted: true, occupied: 0, now: Self.start) == .claim(limit: 250, expired: false))
    }
}
