import APNs
import Foundation
import LiveDeliveryCore
import TestSupport
import Testing

@testable import LiveDelivery

/// The dispatcher's capacity (``PushCapacityMachine``): events in, actions out, without a server or a
/// task; and the waits of ``PushCapacity`` around it.
@Suite("Push capacity")
struct PushCapacityTests {
    typealias Machine = PushCapacityMachine<ContinuousClock.Instant>
    static let start = ContinuousClock.now

    static func machine(limit: Int = 10) -> Machine {
        Machine(limit: limit, batchSize: 4, poll: .seconds(1), now: start)
    }

    /// A real planned push, under other order ids.
    static func claims(_ orderIDs: String...) throws -> [Outbox.Claim] {
        let (_, change) = try PlanTests.orderWithUpdate(try PlanTests.tracker())
        let push = try #require(change.orderedPushes.first)
        return orderIDs.map {
            Outbox.Claim(orderID: $0, activityKey: push.activityKey, generation: 1, attempts: 1, push: push)
        }
    }

    static func sent(_ claims: [Outbox.Claim]) -> [PushDispatcher.Sent] {
        claims.map { PushDispatcher.Sent(claim: $0, outcome: .delivered(apnsID: UUID()), latency: .milliseconds(5)) }
    }

    static func handed(_ step: Machine.Step) -> [String]? {
        if case .send(let claims) = step { return claims.map(\.orderID) }
        return nil
    }

    @Test("slots: none before the claim loop opens; a reservation is bounded; what is not used is given back")
    func slots() throws {
        var machine = Self.machine()
        #expect(machine.reserve(upTo: 5) == 0)  // no dispatcher to send
        machine.open()
        machine.claimed(4, limit: 4, now: Self.start)

        #expect(machine.reserve(upTo: 3) == 3)
        #expect(machine.inFlight == 7)
        #expect(machine.abandoned(reserved: 3) == [])
        #expect(machine.inFlight == 4)

        #expect(machine.reserve(upTo: 100) == 6)
        #expect(machine.reserve(upTo: 1) == 0)
        #expect(machine.committed(try Self.claims("a", "b"), reserved: 6) == [])  // the loop is not waiting
        #expect(machine.inFlight == 6)
        #expect(Self.handed(machine.next(now: Self.start)) == ["a", "b"])

        #expect(machine.reserve(upTo: 1) == 1)
        _ = machine.committed(try Self.claims("c"), reserved: 1)
        #expect(machine.close().map(\.orderID) == ["c"])
        #expect(machine.reserve(upTo: 1) == 0)
        // Committed after the loop closed: nothing queues, the slots are given back.
        _ = machine.committed(try Self.claims("d"), reserved: 0)
        #expect(machine.close().isEmpty)
    }

    @Test("the claim loop: handed pushes first, then claims while there is room, then waits for room")
    func claimLoop() throws {
        var machine = Self.machine(limit: 6)
        machine.open()
        guard case .claim(limit: 4, expired: true) = machine.next(now: Self.start) else {
            Issue.record("the first step claims a batch")
            return
        }
        machine.claimed(4, limit: 4, now: Self.start)  // a full batch: claim again at once
        guard case .claim(limit: 2, expired: false) = machine.next(now: Self.start) else {
            Issue.record("the room left is claimed")
            return
        }
        machine.claimed(2, limit: 2, now: Self.start)
        guard case .wait(let until) = machine.next(now: Self.start) else {
            Issue.record("no room: wait")
            return
        }
        #expect(until == Self.start.advanced(by: .seconds(1)))
        // An answer frees a slot before its recording: the loop waiting for room is woken, and claims.
        #expect(machine.answered(Self.sent(try Self.claims("a"))[0]) == .claimLoop)
        guard case .claim(limit: 1, _) = machine.next(now: Self.start) else {
            Issue.record("room again: claim")
            return
        }
    }

    @Test("wake-ups go only to a loop that waits: a NOTIFY, a handed push, a released row")
    func wakeups() throws {
        var machine = Self.machine()
        machine.open()
        _ = machine.next(now: Self.start)
        machine.claimed(0, limit: 4, now: Self.start)  // drained until the poll
        #expect(machine.wantClaim() == [])  // the loop is running: it sees the claim wanted
        guard case .claim = machine.next(now: Self.start) else {
            Issue.record("a claim was wanted")
            return
        }
        machine.claimed(0, limit: 4, now: Self.start)
        guard case .wait = machine.next(now: Self.start) else {
            Issue.record("drained: wait for the poll")
            return
        }
        #expect(machine.wantClaim() == .claimLoop)
        #expect(machine.wantClaim() == [])  // woken once

        _ = machine.next(now: Self.start)
        machine.claimed(0, limit: 4, now: Self.start)
        _ = machine.next(now: Self.start)  // waiting
        #expect(machine.reserve(upTo: 1) == 1)
        #expect(machine.committed(try Self.claims("a"), reserved: 1) == .claimLoop)
        #expect(Self.handed(machine.next(now: Self.start)) == ["a"])

        machine.claimed(0, limit: 4, now: Self.start)
        _ = machine.next(now: Self.start)  // waiting
        #expect(machine.answered(Self.sent(try Self.claims("a"))[0]) == [])  // waiting for work, not room
        #expect(machine.inFlight == 1)
        #expect(machine.recorded(1, released: true) == .claimLoop)
        #expect(machine.inFlight == 0)
    }

    @Test("answers: the recorder is woken when it waits, takes them in groups, and finishes once drained")
    func answers() throws {
        var machine = Self.machine()
        machine.open()
        machine.claimed(3, limit: 4, now: Self.start)
        let sent = Self.sent(try Self.claims("a", "b", "c"))
        #expect(machine.answered(sent[0]) == [])  // the recorder is not waiting
        guard case .record(let first) = machine.nextAnswers(limit: 10) else {
            Issue.record("an answer to record")
            return
        }
        #expect(first.map(\.claim.orderID) == ["a"])
        guard case .wait = machine.nextAnswers(limit: 10) else {
            Issue.record("nothing to record: wait")
            return
        }
        #expect(machine.answered(sent[1]) == .recorder)
        #expect(machine.answered(sent[2]) == [])
        guard case .record(let group) = machine.nextAnswers(limit: 1) else {
            Issue.record("a group")
            return
        }
        #expect(group.map(\.claim.orderID) == ["b"])
        #expect(machine.finish() == .recorder)
        guard case .record(let last) = machine.nextAnswers(limit: 10), case .finished = machine.nextAnswers(limit: 10)
        else {
            Issue.record("what is left, then finished")
            return
        }
        #expect(last.map(\.claim.orderID) == ["c"])
    }

    @Test("room: the consumer goes on with room or without a dispatcher; one waits at a time, woken with enough")
    func room() throws {
        var machine = Self.machine()
        let sent = Self.sent(try Self.claims("a", "b", "c", "d", "e", "f", "g", "h"))
        #expect(machine.startWaitingForRoom(5) == .go)  // no dispatcher running
        machine.open()
        machine.claimed(8, limit: 8, now: Self.start)
        #expect(machine.startWaitingForRoom(2) == .go)
        #expect(machine.startWaitingForRoom(500) == .wait)  // at most all ten slots
        #expect(machine.startWaitingForRoom(5) == .busy)  // another goes on at once
        for answer in sent.dropLast() { #expect(machine.answered(answer) == []) }  // nine free slots are not ten
        #expect(!machine.consumerHasRoom)
        #expect(machine.answered(sent[7]) == .consumer)  // answered, not yet recorded: the slot is free
        #expect(machine.consumerHasRoom)
        machine.stopWaitingForRoom()
        #expect(machine.consumerNeeds == nil)
    }

    @Test("answers awaiting their recording: at most `limit`; with that many no slot is free until they are recorded")
    func unrecordedBound() throws {
        var machine = Self.machine(limit: 4)
        machine.open()
        guard case .claim(limit: 4, _) = machine.next(now: Self.start) else {
            Issue.record("the first step claims a batch")
            return
        }
        machine.claimed(4, limit: 4, now: Self.start)
        guard case .wait = machine.next(now: Self.start) else {
            Issue.record("no room: wait")
            return
        }
        let sent = Self.sent(try Self.claims("a", "b", "c", "d"))
        #expect(machine.answered(sent[0]) == .claimLoop)  // a slot is free before the recording
        #expect(machine.reserve(upTo: 1) == 1)
        _ = machine.committed([], reserved: 1)
        for answer in sent.dropFirst() { _ = machine.answered(answer) }
        // Four answers wait for the recorder: the database is behind, so nothing more is sent.
        #expect(machine.sending == 0)
        #expect(machine.unrecorded == 4)
        #expect(machine.reserve(upTo: 1) == 0)
        #expect(machine.startWaitingForRoom(1) == .wait)
        guard case .record(let group) = machine.nextAnswers(limit: 2) else {
            Issue.record("answers to record")
            return
        }
        #expect(machine.reserve(upTo: 1) == 0)  // taken by the recorder, not yet committed
        #expect(machine.recorded(group.count, released: false) == .consumer)
        #expect(machine.reserve(upTo: 10) == 4)
    }

    @Test("the consumer's wait ends with room, or false at its bound; a zero bound never waits")
    func roomWait() async throws {
        let capacity = PushCapacity(
            leaseSeconds: 60, limit: 10, batchSize: 4, poll: .seconds(1), roomWait: .seconds(120))
        capacity.open()
        capacity.claimed(10, limit: 10)
        let waiter = Task { await capacity.waitForRoom(3) }
        try await eventually("the caller waits") { capacity.isWaitingForRoom }
        for answer in Self.sent(try Self.claims("a", "b", "c")) { capacity.answered(answer) }
        #expect(await waiter.value)
        #expect(!capacity.isWaitingForRoom)

        let bounded = PushCapacity(
            leaseSeconds: 60, limit: 10, batchSize: 4, poll: .seconds(1), roomWait: .milliseconds(1))
        bounded.open()
        bounded.claimed(10, limit: 10)
        #expect(await bounded.waitForRoom(1) == false)
        let never = PushCapacity(
            leaseSeconds: 60, limit: 10, batchSize: 4, poll: .seconds(1), roomWait: .zero)
        never.open()
        never.claimed(10, limit: 10)
        #expect(await never.waitForRoom(1))
    }
}
