/// When the dispatcher reads the outbox, and for how many rows: decisions only, with no I/O and the
/// time given, so that every case is unit-tested without a server. ``PushDispatcher`` executes them.
///
/// - The outbox is read when a wake-up asks for it (a `NOTIFY`, a row released), at once after a
///   full claim (more may be due), and once per `poll` otherwise (rows that came due, notifications
///   missed).
/// - At most `concurrency` slots are taken (``PushCapacityMachine`` counts them: pushes sending, or
///   every slot while that many answers wait for their recording): a claim takes no more than the room
///   left, and no more than `batchSize`. With no room, it waits for room.
/// - Rows whose lease expired (their worker died) are looked for once per `poll`: they are rare and
///   wait a lease length anyway, and the free rows have an index of their own.
struct ClaimSchedule<Instant: InstantProtocol<Duration>> {
    let concurrency: Int
    let batchSize: Int
    let poll: Duration
    /// The next read of the outbox without a wake-up.
    private(set) var claimDue: Instant
    /// The next look for expired leases.
    private(set) var expiredDue: Instant

    init(concurrency: Int, batchSize: Int, poll: Duration, now: Instant) {
        self.concurrency = concurrency
        self.batchSize = batchSize
        self.poll = poll
        claimDue = now
        expiredDue = now
    }

    enum Step: Equatable {
        /// Nothing to do before `until`, or a wake-up.
        case wait(until: Instant)
        /// Every slot is taken: wait for one to free (asking for a claim once there is room).
        case waitForRoom
        /// Lease up to `limit` due rows; `expired`: rows whose lease expired too.
        case claim(limit: Int, expired: Bool)
    }

    /// The next step, given whether a wake-up asked for a claim since the last step, and the slots
    /// taken now.
    mutating func next(wanted: Bool, occupied: Int, now: Instant) -> Step {
        if !wanted && now < claimDue { return .wait(until: claimDue) }
        let room = concurrency - occupied
        guard room > 0 else { return .waitForRoom }
        let expired = now >= expiredDue
        if expired { expiredDue = now.advanced(by: poll) }
        return .claim(limit: min(room, batchSize), expired: expired)
    }

    /// A claim of `limit` rows leased `count`. Returns whether to claim again at once: a full batch
    /// means more may be due; a short one means the outbox is drained until the next poll.
    mutating func claimed(_ count: Int, limit: Int, now: Instant) -> Bool {
        guard count < limit else { return true }
        claimDue = now.advanced(by: poll)
        return false
    }
}
