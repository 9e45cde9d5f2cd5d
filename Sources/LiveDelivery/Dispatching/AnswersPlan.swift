import APNs
import Foundation
import LiveDeliveryCore
import Logging
import Postgres

/// What a group of APNs' answers does, decided from what the recorder read and nothing else (no I/O):
/// the core's outcome per push (several pushes of one order applied in turn to the same state), the
/// outbox rows to delete or release, the apps to pause, the log notes, and the delivered updates
/// written as their activities' rows alone (see ``Delivered``). ``PushDispatcher`` reads, builds
/// this, and has ``OrderStore`` write it in one transaction.
struct AnswersPlan {
    /// Changes to write in full, by order.
    var changes: [String: OrderChange] = [:]
    /// Orders whose only change is APNs' acceptance of their current updates.
    var delivered: [Delivered] = []
    /// Outbox rows to delete (`ctid`s).
    var settled: [String] = []
    /// Outbox rows to release for another send.
    var released: [Outbox.Released] = []
    /// Pushes sent without an outbox row that are kept for later (their app's configuration was at fault): they
    /// go to the outbox now, unchanged, with their send uncounted.
    var kept: [Outbox.Claim] = []
    /// The activities answered: no push of theirs is in flight any more, so a push planned for one of them does
    /// not wait for an answer (``OrderStore/Writes/Lease/answered``).
    var answered: Set<Outbox.Key> = []
    /// Apps to pause, the first answer of each.
    var pauses: [(bundleID: String, pause: PushSettlement.Pause)] = []
    /// What to log, beyond the `push_attempts` rows.
    var notes: [PushSettlement.Note] = []
    /// How old the newest event of each delivered push's order was when APNs accepted it.
    var ages: [(app: String, seconds: Double)] = []

    /// - Parameters:
    ///   - answers: sorted by order and activity.
    ///   - stored: the orders' states as locked (with accepted updates settled).
    ///   - versions: the orders' row versions as locked.
    ///   - outbox: the answers' outbox rows as locked.
    ///   - jitter: a backoff jitter in 0.5…1 per answer.
    init(
        _ answers: [PushDispatcher.Sent], stored: [String: OrderState], versions: [String: Int64],
        outbox: [Outbox.Key: Outbox.LockedRow], tracker: OrderTracker, rules: PushSettlement.Rules,
        jitter: () -> Double, now: Date
    ) {
        // The ids of delivered updates by order, and the orders with any other answer (never folded).
        var deliveredUpdates: [String: Set<String>] = [:]
        var otherAnswers = Set<String>()
        // Orders whose one answer is an accepted update that settling its id records (`settledAcceptance`): the
        // core's `record` does not run for them, and their acceptance is written as the id alone.
        var settledByID:
            [String: (original: OrderState, settled: OrderState, claim: Outbox.Claim, settlement: PushSettlement)] =
                [:]
        var answersPerOrder: [String: Int] = [:]
        for answer in answers { answersPerOrder[answer.claim.orderID, default: 0] += 1 }
        for answer in answers {
            let claim = answer.claim
            answered.insert(Outbox.Key(orderID: claim.orderID, activityKey: claim.activityKey))
            if case .delivered = answer.outcome, let occurred = stored[claim.orderID]?.record?.newest.occurredAt {
                ages.append((claim.push.bundleID, now.timeIntervalSince(occurred)))
            }
            let settlement = PushSettlement.settle(
                answer.outcome, attempts: claim.attempts, rules: rules, jitter: jitter())
            note(settlement, for: claim)
            var resend = false
            if settlement.outcome == .accepted, settlement.retryAfter == nil, answersPerOrder[claim.orderID] == 1,
                let state = stored[claim.orderID],
                let settled = tracker.settledAcceptance(of: claim.push, in: state, now: now)
            {
                settledByID[claim.orderID] = (state, settled, claim, settlement)
            } else {
                resend = record(settlement, for: claim, stored: stored, tracker: tracker, now: now)
            }
            // The outbox row: delete when settled and not replaced meanwhile, else release it.
            let current = outbox[Outbox.Key(orderID: claim.orderID, activityKey: claim.activityKey)]
            if current == nil, claim.generation == 0 {
                // Sent without a row, and no newer push of the activity waits in one: nothing to delete. A push
                // kept goes to the outbox; a retry's row is the change's (with this send counted).
                if settlement.outcome == nil {
                    kept.append(claim)
                    otherAnswers.insert(claim.orderID)
                } else if resend {
                    otherAnswers.insert(claim.orderID)
                } else if case .delivered = answer.outcome, claim.push.kind == .update, !claim.push.isChannelRequest {
                    deliveredUpdates[claim.orderID, default: []].insert(claim.push.apnsID)
                } else {
                    otherAnswers.insert(claim.orderID)
                }
                continue
            }
            guard let current else { continue }
            switch PushSettlement.row(
                claimed: claim.generation, current: current.generation, recorded: settlement.outcome != nil,
                resend: resend)
            {
            case .delete:
                settled.append(current.row)
                if case .delivered = answer.outcome, claim.push.kind == .update, !claim.push.isChannelRequest {
                    deliveredUpdates[claim.orderID, default: []].insert(claim.push.apnsID)
                } else {
                    otherAnswers.insert(claim.orderID)
                }
            case .release(let replaced, let uncounted):
                released.append(Outbox.Released(row: current.row, replaced: replaced, uncounted: uncounted))
                otherAnswers.insert(claim.orderID)
            }
        }
        // A delivered current update changes nothing but its activity: the order's state is not
        // written again: the update's id goes to the activity's row, and every read settles it (`sql/116`).
        for (orderID, ids) in deliveredUpdates.sorted(by: { $0.key < $1.key }) where !otherAnswers.contains(orderID) {
            guard let version = versions[orderID] else { continue }
            if let settled = settledByID.removeValue(forKey: orderID) {
                delivered.append(
                    Delivered(original: settled.original, settled: settled.settled, ids: ids, version: version))
                continue
            }
            guard let change = changes[orderID], let folded = Delivered(folding: change, ids: ids, version: version)
            else { continue }
            delivered.append(folded)
            changes[orderID] = nil
        }
        // An acceptance not written by its id after all (its outbox row was gone or replaced) is recorded in full.
        for (_, left) in settledByID {
            _ = record(left.settlement, for: left.claim, stored: stored, tracker: tracker, now: now)
        }
    }

    /// Records the settlement's outcome in the order's change (several pushes of one order in turn), and a
    /// retry's new push with its delay; returns whether the push is to be sent again.
    private mutating func record(
        _ settlement: PushSettlement, for claim: Outbox.Claim, stored: [String: OrderState], tracker: OrderTracker,
        now: Date
    ) -> Bool {
        guard let outcome = settlement.outcome, let state = changes[claim.orderID]?.state ?? stored[claim.orderID]
        else { return false }
        // Taken out while it is worked on, so that its box is written in place (``OrderChange``).
        var change = changes.removeValue(forKey: claim.orderID) ?? OrderChange(original: state, state: state)
        let recorded = tracker.record(outcome, for: claim.push, updating: &change.state, now: now)
        change.merge(recorded)
        var resend = false
        if let retryDelay = settlement.retryAfter {
            let retried = tracker.retry(updating: &change.state, now: now)
            change.merge(retried)
            let notBefore = now.addingTimeInterval(retryDelay.seconds)
            for key in Set((recorded.pushes + retried.pushes).map(\.activityKey)) {
                change.notBefore[key] = notBefore
            }
            resend = change.pushes[claim.activityKey] != nil
            // A push sent without a row: the retry's row counts that send.
            if resend, claim.generation == 0 { change.attempts[claim.activityKey] = claim.attempts }
            // The resend stays in the trace of the event that planned the push (when the event carried one).
            if resend, change.pushes[claim.activityKey]?.traceParent == nil {
                change.pushes[claim.activityKey]?.traceParent = claim.push.traceParent
            }
        }
        changes[claim.orderID] = change
        return resend
    }

    /// The settlement's note and pause. Only an answer other than "delivered" has a note; an app is
    /// paused once per group, by its first answer, which says so.
    private mutating func note(_ settlement: PushSettlement, for claim: Outbox.Claim) {
        var note = settlement.note
        if let pause = settlement.pause {
            if pauses.contains(where: { $0.bundleID == claim.push.bundleID }) {
                note = nil
            } else {
                pauses.append((claim.push.bundleID, pause))
                note?.metadata[LiveDeliveryLoggingKeys.bundleID] = claim.push.bundleID
            }
        }
        guard var note else { return }
        note.metadata[LiveDeliveryLoggingKeys.orderID] = claim.orderID
        note.metadata[LiveDeliveryLoggingKeys.activityKey] = claim.activityKey
        note.metadata[LiveDeliveryLoggingKeys.apnsID] = claim.push.apnsID
        if let trace = claim.push.traceParent.flatMap(TraceParent.init) {
            note.metadata[LiveDeliveryLoggingKeys.traceID] = trace.traceID
            note.metadata[LiveDeliveryLoggingKeys.traceParent] = trace.parentID
        }
        notes.append(note)
    }

    /// The outbox rows deleted, released and kept: statements for the same round trip as the orders' writes.
    func outboxWrites() throws -> [PostgresQuery] {
        var writes: [PostgresQuery] = []
        if !settled.isEmpty { writes.append(Outbox.deleteQuery(settled)) }
        if !released.isEmpty { writes.append(Outbox.releaseQuery(released)) }
        if !kept.isEmpty {
            let rows = try kept.map { try Outbox.Row(orderID: $0.orderID, push: $0.push, notBefore: $0.push.notBefore) }
            writes.append(Outbox.writeQuery(rows, holdSeconds: 0))  // none is held
        }
        return writes
    }
}
