/// Every decision about the dispatcher's capacity, with no I/O and no locks: events in, actions out,
/// so that each case is unit-tested without a server or a task. ``PushCapacity`` holds one under a lock
/// and performs what it returns (which loop to wake).
///
/// What it owns:
/// - **The limit and the counts.** A push is *sending* from its claim (or its reservation by the
///   consumer) until APNs answers, then *unrecorded* until its answer is recorded. At most `limit` are
///   sending: an answer frees its slot at once, so a batch's pushes never wait for the previous
///   answers' commit. At most `limit` answers wait for their recording: with that many, no slot is free
///   until the recorder catches up, so a database slower than APNs slows claims and sends rather than
///   letting answers pile up in memory.
/// - **The hand-off.** The consumer reserves slots before the statement that keeps its new pushes out of
///   the outbox (``reserve(upTo:)``); after commit they queue here for the claim loop
///   (``committed(_:reserved:)``), and what the statement did not hand over, or a rollback, gives the slots back.
/// - **When the claim loop reads the outbox** (``ClaimSchedule``): when a wake-up asks (a `NOTIFY`, a row
///   released), at once after a full claim, once per poll otherwise, and never without room.
/// - **The answers awaiting their recording**, taken in groups by the recorder.
/// - **Who waits for what**, so that a wake-up goes only to a loop that waits for it: the claim loop
///   (for work, or for room), the recorder (for answers), the consumer (for room for its batch).
struct PushCapacityMachine<Instant: InstantProtocol<Duration>> {
    /// The loops an event wakes.
    struct Wake: OptionSet, Equatable {
        let rawValue: UInt8
        static var claimLoop: Wake { Wake(rawValue: 1) }
        static var recorder: Wake { Wake(rawValue: 2) }
        static var consumer: Wake { Wake(rawValue: 4) }
    }

    /// The claim loop's next step.
    enum Step {
        /// Send these pushes, handed over by the consumer (their slots are counted already).
        case send([Outbox.Claim])
        /// Lease up to `limit` due rows; `expired`: rows whose lease expired too.
        case claim(limit: Int, expired: Bool)
        /// Nothing to do before `until`, unless woken.
        case wait(until: Instant)
    }

    /// What the recorder does next.
    enum Recording {
        case record([PushDispatcher.Sent])
        case wait
        /// The claim loop has finished and every answer is recorded.
        case finished
    }

    /// Whether a consumer waits for room before its batch.
    enum RoomWait: Equatable {
        /// There is room, or no dispatcher to wait for.
        case go
        /// Another consumer waits already: this one goes on without.
        case busy
        /// Wait, until ``consumerHasRoom`` or the bound.
        case wait
    }

    private enum ClaimLoop {
        /// Not running: nothing is reserved or handed over.
        case closed
        case running
        /// Waiting for a wake-up, or until the next poll.
        case waiting
        /// Every slot is taken: waiting for one to free.
        case waitingForRoom
    }

    let limit: Int
    /// Pushes reserved, claimed or handed over, and not yet answered.
    private(set) var sending = 0
    /// Answers awaiting their recording, or being recorded.
    private(set) var unrecorded = 0
    private var schedule: ClaimSchedule<Instant>
    private var claimLoop = ClaimLoop.closed
    /// A wake-up asked for a claim since the last one (new or released rows).
    private var claimWanted = true
    private var handed: [Outbox.Claim] = []
    private var answers: [PushDispatcher.Sent] = []
    private var recorderWaits = false
    private var finished = false
    /// The free slots a waiting consumer needs.
    private(set) var consumerNeeds: Int?

    init(limit: Int, batchSize: Int, poll: Duration, now: Instant) {
        self.limit = limit
        schedule = ClaimSchedule(concurrency: limit, batchSize: batchSize, poll: poll, now: now)
    }

    /// Pushes sent or awaiting their recording (the `livedelivery_pushes_in_flight` gauge).
    var inFlight: Int { sending + unrecorded }

    /// The slots taken: those sending, or every slot while `limit` answers wait for their recording.
    private var occupied: Int { unrecorded >= limit ? limit : sending }

    var isOpen: Bool {
        if case .closed = claimLoop { return false }
        return true
    }

    // MARK: The consumer

    /// Takes up to `count` free slots for pushes the consumer's statement will hand over; 0 when the
    /// dispatcher is full or not running.
    mutating func reserve(upTo count: Int) -> Int {
        guard isOpen, count > 0 else { return 0 }
        let slots = max(0, min(count, limit - occupied))
        sending += slots
        return slots
    }

    /// The transaction that reserved `reserved` slots committed, handing `claims` over: they queue for
    /// the claim loop, and unused slots are given back. After the claim loop closed, nothing queues
    /// (a sweeper finds the pushes a lease later and puts them in the outbox).
    mutating func committed(_ claims: [Outbox.Claim], reserved: Int) -> Wake {
        guard isOpen else { return free(reserved) }
        handed += claims
        // The statement hands over at most the pushes it reserved for; should it ever hand more, they are
        // counted (and sent) all the same rather than left to wait out a lease.
        var wake = Wake()
        if reserved > claims.count {
            wake = free(reserved - claims.count)
        } else {
            sending += claims.count - reserved
        }
        if !claims.isEmpty { wake.formUnion(wakeClaimLoop()) }
        return wake
    }

    /// The transaction that reserved `reserved` slots did not commit: they are free again.
    mutating func abandoned(reserved: Int) -> Wake { free(reserved) }

    /// A consumer is about to apply a batch that may plan `count` pushes: whether it waits for room for
    /// them (all the slots at most), so that it hands them all over.
    mutating func startWaitingForRoom(_ count: Int) -> RoomWait {
        let needed = min(count, limit)
        guard needed > 0, isOpen, limit - occupied < needed else { return .go }
        guard consumerNeeds == nil else { return .busy }
        consumerNeeds = needed
        return .wait
    }

    /// Whether the waiting consumer may go on: room for what it needs, or no dispatcher to wait for.
    var consumerHasRoom: Bool {
        guard isOpen, let needed = consumerNeeds else { return true }
        return limit - occupied >= needed
    }

    mutating func stopWaitingForRoom() { consumerNeeds = nil }

    // MARK: The claim loop

    mutating func open() {
        claimLoop = .running
    }

    /// The claim loop's next step at `now`: handed pushes first, then the schedule's decision.
    mutating func next(now: Instant) -> Step {
        claimLoop = .running
        if !handed.isEmpty {
            defer { handed.removeAll() }
            return .send(handed)
        }
        let wanted = claimWanted
        claimWanted = false
        switch schedule.next(wanted: wanted, occupied: occupied, now: now) {
        case .claim(let limit, let expired):
            return .claim(limit: limit, expired: expired)
        case .wait(let until):
            claimLoop = .waiting
            return .wait(until: until)
        case .waitForRoom:
            // Claim once there is room: rows may have come due meanwhile.
            claimWanted = true
            claimLoop = .waitingForRoom
            return .wait(until: now.advanced(by: schedule.poll))
        }
    }

    /// A claim of up to `limit` rows leased `count`: they are in flight.
    mutating func claimed(_ count: Int, limit: Int, now: Instant) {
        sending += count
        if schedule.claimed(count, limit: limit, now: now) { claimWanted = true }
    }

    /// A claim failed: the next one is wanted (after the caller's backoff).
    mutating func claimFailed() {
        claimWanted = true
    }

    /// The claim loop stops: no more reservations. Returns what was handed over and not yet taken
    /// (their slots are counted: send them).
    mutating func close() -> [Outbox.Claim] {
        claimLoop = .closed
        defer { handed.removeAll() }
        return handed
    }

    /// New or released outbox rows (a `NOTIFY`): claim.
    mutating func wantClaim() -> Wake {
        claimWanted = true
        return wakeClaimLoop()
    }

    // MARK: Answers and their recording

    /// APNs answered a push: its slot is free for the next push, unless `limit` answers now wait for
    /// their recording.
    mutating func answered(_ sent: PushDispatcher.Sent) -> Wake {
        answers.append(sent)
        let before = occupied
        sending -= 1
        unrecorded += 1
        var wake = freed(from: before)
        if recorderWaits {
            recorderWaits = false
            wake.insert(.recorder)
        }
        return wake
    }

    /// Up to `limit` answers to record, oldest first.
    mutating func nextAnswers(limit: Int) -> Recording {
        guard answers.isEmpty else {
            let taken = Array(answers.prefix(limit))
            answers.removeFirst(taken.count)
            return .record(taken)
        }
        if finished { return .finished }
        recorderWaits = true
        return .wait
    }

    /// `count` answers are recorded (their slots were freed when they were answered, unless `limit`
    /// answers waited). `released`: a row was released to be sent again, so claim.
    mutating func recorded(_ count: Int, released: Bool) -> Wake {
        let before = occupied
        unrecorded -= count
        var wake = freed(from: before)
        if released {
            claimWanted = true
            wake.formUnion(wakeClaimLoop())
        }
        return wake
    }

    /// The claim loop and every send have ended: the recorder drains what is left, then finishes.
    mutating func finish() -> Wake {
        finished = true
        recorderWaits = false
        return .recorder
    }

    // MARK: Wake-ups

    /// Frees `count` slots reserved or handed over and never sent.
    private mutating func free(_ count: Int) -> Wake {
        guard count > 0 else { return [] }
        let before = occupied
        sending -= count
        return freed(from: before)
    }

    /// If slots were freed since `before` slots were taken, wakes the claim loop if it waits for room,
    /// and the consumer once it has what it waits for.
    private mutating func freed(from before: Int) -> Wake {
        guard occupied < before else { return [] }
        var wake = Wake()
        if case .waitingForRoom = claimLoop {
            claimLoop = .running
            wake.insert(.claimLoop)
        }
        if consumerNeeds != nil && consumerHasRoom { wake.insert(.consumer) }
        return wake
    }

    private mutating func wakeClaimLoop() -> Wake {
        switch claimLoop {
        case .waiting, .waitingForRoom:
            claimLoop = .running
            return .claimLoop
        case .closed, .running:
            return []
        }
    }
}
