import Testing

@testable import Postgres

@Suite struct PostgresPoolStateMachineTests {
    typealias Machine = PostgresPoolStateMachine<String, Int>

    @Test func opensLazilyUpToTheLimitThenQueues() {
        var machine = Machine(maximumConnections: 2)
        guard case .open(let first) = machine.lease(), case .open(let second) = machine.lease() else {
            Issue.record("expected two opens")
            return
        }
        #expect(first != second)
        guard case .wait = machine.lease() else {
            Issue.record("expected wait")
            return
        }
        guard case .wait = machine.enqueue(7, id: 1) else {
            Issue.record("expected the waiter to be queued")
            return
        }
        // A returned connection goes straight to the waiter.
        guard case .grant(7, .use("a")) = machine.release("a", reusable: true) else {
            Issue.record("expected a grant to the waiter")
            return
        }
        // No waiter now: the connection becomes idle and is reused next.
        guard case .none = machine.release("a", reusable: true), case .use("a") = machine.lease() else {
            Issue.record("expected idle reuse")
            return
        }
    }

    @Test func brokenConnectionFreesASlotForAWaiter() {
        var machine = Machine(maximumConnections: 1)
        _ = machine.lease()
        _ = machine.enqueue(9, id: 1)
        guard case .closeAndGrant("a", 9, .open) = machine.release("a", reusable: false) else {
            Issue.record("expected close and a slot for the waiter")
            return
        }
        #expect(machine.connectionCount == 1)
    }

    @Test func failedOpenPassesTheSlotOn() {
        var machine = Machine(maximumConnections: 1)
        _ = machine.lease()
        _ = machine.enqueue(3, id: 1)
        guard case (3, .open)? = machine.openFailed() else {
            Issue.record("expected the waiter to get the slot")
            return
        }
        #expect(machine.openFailed() == nil)
        #expect(machine.connectionCount == 0)
    }

    @Test func cancelledWaiterIsRemovedOnce() {
        var machine = Machine(maximumConnections: 1)
        _ = machine.lease()
        _ = machine.enqueue(5, id: 42)
        #expect(machine.cancelWaiter(id: 42) == 5)
        #expect(machine.cancelWaiter(id: 42) == nil)
        guard case .none = machine.release("a", reusable: true) else {
            Issue.record("expected the connection to go idle")
            return
        }
    }

    @Test func shutdownFailsWaitersAndClosesReturns() {
        var machine = Machine(maximumConnections: 2)
        _ = machine.lease()
        _ = machine.lease()
        _ = machine.release("idle", reusable: true)
        _ = machine.lease()  // reuses "idle"
        _ = machine.enqueue(1, id: 1)
        let (close, fail) = machine.shutdown()
        #expect(close.isEmpty)
        #expect(fail == [1])
        guard case .shutdown = machine.lease(), case .close("x") = machine.release("x", reusable: true) else {
            Issue.record("expected a closed pool")
            return
        }
    }
}
