import Foundation
import Testing

@testable import LiveDeliveryCore

/// An order handed over from the cell it was in to a cell added to the deployment (docs/scaling.md, Adding a
/// cell): the old cell's copy closes without a push and never acts again; the new cell carries on from the state
/// as it was handed over, with the same activity.
@Suite("Tracking: handing an order over to another cell")
struct HandoverTests {
    /// An order with an active activity (its token adopted, every push accepted).
    static func active() -> Fixtures.Run {
        var run = Fixtures.Run()
        run.apply(Fixtures.status("placed", seq: 1, minute: 0, courier: "Sam", eta: (30, 40)))
        run.apply(Fixtures.token(minute: 1, device: nil))
        run.apply(Fixtures.status("preparing", seq: 2, minute: 2, courier: "Sam", eta: (30, 40)))
        return run
    }

    @Test("the old cell's copy: its activity closes without a push, settled, never swept, the state handed over kept")
    func handOverClosesWithoutAPush() throws {
        let run = Self.active()
        #expect(run.state.isQuiet && run.activity.phase == .active)
        let step = run.tracker.handOver(run.state, to: "c", now: Fixtures.at(3))
        #expect(step.pushes.isEmpty && step.withdrawn.isEmpty)
        #expect(step.state.activities[0].phase == .ended)
        #expect(step.state.activities[0].closeReason == .decided(.handedOver))
        #expect(step.state.activities[0].closeReason?.stored == "handed_over")
        #expect(step.decisions.codes() == ["handed_over"])
        #expect(step.state.isSettled && step.state.nextSweepAt == nil)
        let handover = try #require(step.state.handedOver?.value)
        #expect(handover.cell == "c" && handover.state == run.state)
        // Handing it over again changes nothing.
        let again = run.tracker.handOver(step.state, to: "c", now: Fixtures.at(4))
        #expect(again.state == step.state && again.decisions.isEmpty)
    }

    @Test(
        "nothing happens to an order handed over: an event, a sweep or a retry there changes nothing and sends nothing")
    func handedOverOrderIsInert() {
        let run = Self.active()
        let handedOver = run.tracker.handOver(run.state, to: "c", now: Fixtures.at(3)).state
        let steps = [
            run.tracker.apply(
                Fixtures.status("out_for_delivery", seq: 3, minute: 5, courier: "Sam", eta: (30, 40)), to: handedOver,
                now: Fixtures.at(5)),
            run.tracker.sweep(handedOver, now: Fixtures.at(600)),
            run.tracker.retry(handedOver, now: Fixtures.at(6)),
        ]
        for step in steps {
            #expect(step.state == handedOver && step.pushes.isEmpty && step.withdrawn.isEmpty)
            #expect(step.decisions.codes() == ["order_handed_over"])
        }
    }

    @Test("the new cell carries on from the state handed over: the same activity is updated, nothing is started")
    func takeOverCarriesTheActivityOn() throws {
        var run = Self.active()
        let handedOver = try #require(run.tracker.handOver(run.state, to: "c", now: Fixtures.at(3)).state.handedOver)
        let (state, decision) = run.tracker.takeOver(handedOver.value, from: "a")
        #expect(decision.code == .takenOver)
        #expect(state == run.state && state.handedOver == nil)
        run.state = state
        let step = run.apply(Fixtures.status("out_for_delivery", seq: 3, minute: 5, courier: "Sam", eta: (30, 40)))
        let push = try #require(step.pushes.first)
        #expect(step.pushes.count == 1 && push.kind == .update && push.activityKey == run.activity.key)
    }
}
