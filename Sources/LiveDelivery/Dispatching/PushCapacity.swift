import Synchronization

/// The one owner of the dispatcher's push capacity: the limit, the count in flight, the pushes the
/// consumer hands over, the answers awaiting their recording, and the wake-ups between the loops that
/// share them. Every decision is ``PushCapacityMachine``'s; this holds it under a lock and wakes the
/// loop each event names (one ``Wakeup`` per waiting loop, signalled only when that loop waits for it).
///
/// The loops:
/// - **the consumer**, in its batch's transaction: reserves slots, and hands over the pushes its
///   statement kept out of the outbox once the transaction commits (``Handover``); before a batch it may wait a
///   bounded time for room (``waitForRoom(_:)``);
/// - **the claim loop**: takes handed pushes, claims due rows while there is room, waits otherwise
///   (``next()``, ``waitForWork(until:)``);
/// - **each send**: hands APNs' answer over, freeing its slot (``answered(_:)``): the next batch's
///   pushes do not wait for this answer's commit;
/// - **the recorder**: records answers in groups (``answers(limit:)``, ``recorded(_:released:)``); with
///   `limit` answers waiting for it, no slot is free until it catches up.
///
/// Why the consumer hands pushes over rather than announce them: a new push would otherwise cost an
/// outbox row inserted and deleted, a `NOTIFY`, a wake-up of every worker's dispatcher, a claim that writes a
/// second version of the row, and a decode of the push just encoded. What keeps it safe
/// (``Outbox/writeQuery(_:holdSeconds:)``, ``OrderStore/Writes``):
/// - Only an update without an alert goes, of an activity with no push pending before the batch and no outbox row:
///   no push of that activity is in flight. A push planned while one may be in flight without a row is
///   inserted held for a lease, and that push's answer releases it.
/// - Only due pushes of apps not paused go, as a claim would take them.
/// - No more go than there are free slots, reserved before the statement, so a handed push is sent at once.
/// - A handed push that never reaches its recorded answer (the process dies, or the claim loop has stopped)
///   is found by a sweeper a lease later: its `apns-id` is on the timeline and no answer is (``HandedPushes``).
final class PushCapacity: Sendable {
    typealias Machine = PushCapacityMachine<ContinuousClock.Instant>

    let leaseSeconds: Double
    /// How long a consumer waits at most for room for its batch; zero: it never waits.
    private let roomWait: Duration
    private let machine: Mutex<Machine>
    private let claimLoop = Wakeup()
    private let recorder = Wakeup()
    private let consumer = Wakeup()

    init(
        leaseSeconds: Double, limit: Int, batchSize: Int, poll: Duration, roomWait: Duration
    ) {
        self.leaseSeconds = leaseSeconds
        self.roomWait = roomWait
        machine = Mutex(Machine(limit: limit, batchSize: batchSize, poll: poll, now: .now))
    }

    /// Pushes sent or awaiting their recording (the `livedelivery_pushes_in_flight` gauge).
    var inFlight: Int { machine.withLock { $0.inFlight } }

    private func apply(_ event: (inout Machine) -> Machine.Wake) {
        let wake = machine.withLock { event(&$0) }
        if wake.contains(.claimLoop) { claimLoop.signal() }
        if wake.contains(.recorder) { recorder.signal() }
        if wake.contains(.consumer) { consumer.signal() }
    }

    // MARK: The consumer

    /// Takes up to `count` free slots; 0 when the dispatcher is full or not running.
    func reserve(upTo count: Int) -> Int { machine.withLock { $0.reserve(upTo: count) } }

    /// After commit: the pushes handed over with `reserved` slots go to the claim loop.
    func committed(_ claims: [Outbox.Claim], reserved: Int) { apply { $0.committed(claims, reserved: reserved) } }

    /// The transaction that reserved `reserved` slots did not commit.
    func abandoned(reserved: Int) { apply { $0.abandoned(reserved: reserved) } }

    /// Waits until the dispatcher has room for `count` pushes (all its slots at most), for the room wait
    /// at most; returns false if it gave up (the bound passed without room, or another caller waits).
    ///
    /// A consumer that waits here hands all its pushes over. In a backlog it would otherwise run ahead
    /// of the dispatcher, and each push it could not hand over costs a `NOTIFY`, a claim that writes a
    /// second version of its outbox row, and a decode. The bound keeps a stalled APNs from stalling the
    /// consumer: after it, pushes wait in the outbox, where a newer state replaces an older one.
    @discardableResult
    func waitForRoom(_ count: Int) async -> Bool {
        guard roomWait > .zero else { return true }
        switch machine.withLock({ $0.startWaitingForRoom(count) }) {
        case .go: return true
        case .busy: return false
        case .wait: break
        }
        defer { machine.withLock { $0.stopWaitingForRoom() } }
        let deadline = ContinuousClock.now + roomWait
        while !machine.withLock({ $0.consumerHasRoom }) {
            let now = ContinuousClock.now
            guard now < deadline, !Task.isCancelled else { return false }
            await consumer.wait(timeout: deadline - now)
        }
        return true
    }

    /// Whether a consumer is in ``waitForRoom(_:)``.
    var isWaitingForRoom: Bool { machine.withLock { $0.consumerNeeds != nil } }

    // MARK: The claim loop

    func open() { machine.withLock { $0.open() } }

    /// The claim loop's next step.
    func next() -> Machine.Step { machine.withLock { $0.next(now: .now) } }

    /// Waits until `until`, or until an event the claim loop waits for (a push handed over, a claim
    /// wanted, room freed), or a shutdown.
    func waitForWork(until: ContinuousClock.Instant) async {
        await claimLoop.wait(timeout: until - .now)
    }

    func claimed(_ count: Int, limit: Int) { machine.withLock { $0.claimed(count, limit: limit, now: .now) } }

    func claimFailed() { machine.withLock { $0.claimFailed() } }

    /// The claim loop stops; returns the pushes handed over and not yet taken (send them).
    func close() -> [Outbox.Claim] { machine.withLock { $0.close() } }

    /// A `NOTIFY` of new or released rows.
    func wantClaim() { apply { $0.wantClaim() } }

    /// Graceful shutdown: the claim loop stops waiting and sees it.
    func shutdown() { claimLoop.signal() }

    // MARK: Answers

    func answered(_ sent: PushDispatcher.Sent) { apply { $0.answered(sent) } }

    /// Up to `limit` answers, waiting for the first; nil once finished and drained.
    func answers(limit: Int) async -> [PushDispatcher.Sent]? {
        while true {
            switch machine.withLock({ $0.nextAnswers(limit: limit) }) {
            case .record(let sent): return sent
            case .finished: return nil
            case .wait: await recorder.wait(timeout: .seconds(1))
            }
        }
    }

    func recorded(_ count: Int, released: Bool) { apply { $0.recorded(count, released: released) } }

    /// No more answers will come.
    func finish() { apply { $0.finish() } }
}

/// One consumer transaction's use of the ``PushCapacity``: the slots it reserved and the pushes its
/// statement kept out of the outbox, handed over by ``commit()`` or given back by ``abandon()``.
final class Handover: Sendable {
    private struct State {
        var reserved = 0
        var claims: [Outbox.Claim] = []
    }

    private let state = Mutex(State())
    let capacity: PushCapacity

    init(_ capacity: PushCapacity) {
        self.capacity = capacity
    }

    var leaseSeconds: Double { capacity.leaseSeconds }

    func reserve(upTo count: Int) -> Int {
        let slots = capacity.reserve(upTo: count)
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
        capacity.committed(claims, reserved: reserved)
    }

    func abandon() {
        let reserved = state.withLock { state in
            defer { state = State() }
            return state.reserved
        }
        capacity.abandoned(reserved: reserved)
    }
}
