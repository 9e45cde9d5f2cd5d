import Synchronization

/// Pushes the consumer leases to its own process's dispatcher in the transaction that plans them,
/// handed over in memory once that transaction commits.
///
/// The other way round, a new push costs a `NOTIFY`, a wake-up of every worker's dispatcher, a
/// claim statement that leases the row (a second version of it), and a decode of the push the
/// consumer has just encoded. Here the outbox row is inserted already leased, and the dispatcher
/// sends the push it is given.
///
/// What keeps it safe:
/// - Only a row the statement *inserts* is leased: no row for the activity existed, so no push of
///   it is in flight. A row that replaces a waiting or in-flight one keeps its lease state and goes
///   the usual way (claim, or release after the push in flight is answered).
/// - Only due rows of apps not paused are leased, as the claim would.
/// - The consumer leases no more rows than the dispatcher has free slots for, reserved before the
///   statement, so a handed push is sent at once and never waits out its lease in a queue.
/// - A leased row that never reaches the dispatcher (the process dies, or the dispatcher has
///   stopped) is an ordinary expired lease: any worker claims it again after the lease period.
final class PushHandoff: Sendable {
    private struct State {
        /// The dispatcher's in-flight count while its claim loop runs; nil before and after.
        var answers: Answers?
        var queue: [Outbox.Claim] = []
        /// A caller is in ``waitForRoom(_:)``.
        var waiting = false
    }

    private let state = Mutex(State())
    let workerID: String
    let leaseSeconds: Double
    private let concurrency: Int
    private let roomWait: Duration
    private let wakeup: Wakeup

    init(workerID: String, leaseSeconds: Double, concurrency: Int, roomWait: Duration, wakeup: Wakeup) {
        self.workerID = workerID
        self.leaseSeconds = leaseSeconds
        self.concurrency = concurrency
        self.roomWait = roomWait
        self.wakeup = wakeup
    }

    /// Takes up to `count` of the dispatcher's free slots; 0 when it is full or not running.
    func reserve(upTo count: Int) -> Int {
        guard count > 0 else { return 0 }
        return state.withLock { state in
            state.answers?.reserve(upTo: count, limit: concurrency) ?? 0
        }
    }

    /// Waits until the dispatcher has room for `count` pushes (all its slots at most), for `roomWait` at
    /// most; returns false if it gave up (the bound passed without room, or another caller was waiting).
    ///
    /// A consumer that waits here before its transaction hands all its pushes over. In a backlog it would
    /// otherwise run ahead of the dispatcher, and each push it could not hand over costs a `NOTIFY`, a
    /// claim that writes a second version of its outbox row, and a decode. The bound keeps a stalled APNs
    /// from stalling the consumer: after it, pushes wait in the outbox, where a newer state replaces an
    /// older one. One caller waits at a time (the consumer applies one batch at a time); another goes on.
    @discardableResult
    func waitForRoom(_ count: Int) async -> Bool {
        let needed = min(count, concurrency)
        guard needed > 0, roomWait > .zero else { return true }
        // No dispatcher running is nothing to wait for.
        func hasRoom(_ state: State) -> Bool { state.answers.map { concurrency - $0.inFlight >= needed } ?? true }
        let answers = state.withLock { state -> Answers? in
            guard !hasRoom(state), !state.waiting else { return nil }
            state.waiting = true
            return state.answers
        }
        guard let answers else { return state.withLock { hasRoom($0) } }
        defer { state.withLock { $0.waiting = false } }
        let deadline = ContinuousClock.now + roomWait
        while !state.withLock({ hasRoom($0) }) {
            let now = ContinuousClock.now
            guard now < deadline, !Task.isCancelled else { return false }
            await answers.freed.wait(timeout: deadline - now)
        }
        return true
    }

    /// Whether a caller is in ``waitForRoom(_:)``.
    var isWaitingForRoom: Bool { state.withLock { $0.waiting } }

    /// After commit: queues the pushes leased with `reserved` slots and gives back the slots they
    /// did not use. A dispatcher that has stopped meanwhile gets nothing: the rows' leases expire.
    func deliver(_ claims: [Outbox.Claim], reserved: Int) {
        let answers = state.withLock { state -> Answers? in
            guard let answers = state.answers else { return nil }
            state.queue += claims
            return answers
        }
        guard let answers else { return }
        // The statement leases at most the rows it reserved for; should it ever lease more, they are
        // counted (and sent) all the same rather than left to wait out their lease.
        if reserved > claims.count {
            answers.remove(inFlight: reserved - claims.count)
        } else if claims.count > reserved {
            answers.add(inFlight: claims.count - reserved)
        }
        if !claims.isEmpty {
            wakeup.signal()
            answers.room.signal()
        }
    }

    /// The transaction that reserved `reserved` slots did not commit: they are free again.
    func release(_ reserved: Int) {
        guard reserved > 0, let answers = state.withLock({ $0.answers }) else { return }
        answers.remove(inFlight: reserved)
    }

    /// The claim loop starts taking handed pushes, counted in `answers`.
    func open(_ answers: Answers) {
        state.withLock { $0.answers = answers }
    }

    /// The pushes handed over since the last call; their slots are already counted in flight.
    func take() -> [Outbox.Claim] {
        state.withLock { state in
            defer { state.queue.removeAll() }
            return state.queue
        }
    }

    /// The claim loop has ended: no more reservations; returns what was handed and not yet taken.
    func close() -> [Outbox.Claim] {
        state.withLock { state in
            state.answers = nil
            defer { state.queue.removeAll() }
            return state.queue
        }
    }
}

/// One transaction's use of a ``PushHandoff``: the slots it reserved and the pushes it leased, handed
/// over by ``commit()`` or given back by ``abandon()``.
final class Handover: Sendable {
    private struct State {
        var reserved = 0
        var claims: [Outbox.Claim] = []
    }

    private let state = Mutex(State())
    let handoff: PushHandoff

    init(_ handoff: PushHandoff) {
        self.handoff = handoff
    }

    var workerID: String { handoff.workerID }
    var leaseSeconds: Double { handoff.leaseSeconds }

    func reserve(upTo count: Int) -> Int {
        let slots = handoff.reserve(upTo: count)
        state.withLock { $0.reserved += slots }
        return slots
    }

    func leased(_ claims: [Outbox.Claim]) {
        state.withLock { $0.claims += claims }
    }

    func commit() {
        let (claims, reserved) = state.withLock { state in
            defer { state = State() }
            return (state.claims, state.reserved)
        }
        handoff.deliver(claims, reserved: reserved)
    }

    func abandon() {
        let reserved = state.withLock { state in
            defer { state = State() }
            return state.reserved
        }
        handoff.release(reserved)
    }
}
