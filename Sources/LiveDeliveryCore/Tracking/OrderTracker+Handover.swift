package import Foundation

extension OrderTracker {
    // MARK: - Cells

    /// Hands the order over to `cell`, the cell a grown list of cells now gives it (docs/scaling.md, Adding a
    /// cell): its activities and its broadcast channel close here without a push (`handed_over`), since the new
    /// cell carries them on with their tokens, and from then on nothing happens to the order here. The state
    /// handed over is ``OrderState/Handover/state``. Only a quiet order (``OrderState/isQuiet``) is handed over:
    /// a push waiting to be sent or answered would be the old cell's, after the new one has taken the order.
    /// An order handed over already is returned as it is.
    package func handOver(_ state: OrderState, to cell: String, now: Date) -> Step {
        var step = Step(state: state)
        guard state.handedOver == nil else { return step }
        precondition(state.isQuiet, "an order with a push in flight is not handed over")
        for index in step.state.activities.indices where !step.state.activities[index].phase.isFinal {
            step.state.activities[index].close(.ended, .decided(.handedOver), at: now)
            step.decisions.append(
                Decision(
                    .handedOver, activity: step.state.activities[index].key,
                    "the order moved to cell \(cell), which carries the activity on; it closes here without a push"))
        }
        if var channel = step.state.channel, !channel.phase.isFinal {
            channel.close(.ended, .decided(.handedOver), at: now)
            step.state.channel = channel
            step.decisions.append(
                Decision(
                    .handedOver, activity: Self.channelKey,
                    "the order moved to cell \(cell), which carries the broadcast channel on; it closes here, undeleted"
                ))
        }
        step.state.handedOver = OutOfLine(OrderState.Handover(cell: cell, state: state))
        step.state.nextSweepAt = nil
        return step
    }

    /// The state a new cell starts an order from that the cell it was in handed over: as it was there.
    package func takeOver(_ handover: OrderState.Handover, from cell: String) -> (OrderState, Decision) {
        let decision = Decision(
            .takenOver,
            "the order came from cell \(cell) with \(handover.state.activities.count) activity(ies); they carry on here"
        )
        return (handover.state, decision)
    }

    /// An event, a sweep or a retry that reaches an order handed over: nothing changes.
    func handedOverStep(_ step: inout Step, to cell: String) {
        step.decisions.append(
            Decision(.orderHandedOver, "the order was handed over to cell \(cell); nothing happens to it here"))
    }
}
