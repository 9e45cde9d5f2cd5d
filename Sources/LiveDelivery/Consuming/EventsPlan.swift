import Foundation
import LiveDeliveryCore

/// What a batch of new events does to their orders, decided from what the consumer read and nothing
/// else (no I/O): the core applied per event in arrival order, a push-to-start token or a settings report
/// to every open order of its user, each push carrying the trace of the event that set its content. ``EventProcessor``
/// reads, builds this, and has ``OrderStore`` write it in the batch's transaction.
struct EventsPlan {
    /// Every order an event reached, by order id.
    private(set) var changes: [String: OrderChange] = [:]

    /// - Parameters:
    ///   - events: the batch's new events, in arrival order.
    ///   - stored: the orders' states as locked (nil for an order created by this batch).
    ///   - ordersOfUser: the open orders of each user whose push-to-start token or settings arrived.
    ///   - tokens: the push-to-start tokens on file, by user.
    ///   - settings: the device settings on file, by user and device.
    ///   - openChannels: the broadcast channels open per app, when counted.
    ///   - takenOver: the orders unknown here that the cell they were in handed over (``CellHandover``).
    ///   - traces: the `traceparent` each event's message carried, by event id.
    ///   - orderTraces: the `traceparent` of each order's newest event of the batch that carried one.
    init(
        _ events: [InboundEvent], stored: [String: OrderState?], ordersOfUser: [String: Set<String>],
        tokens: [String: [PushToStartRegistration]], settings: [String: [String: DeviceSettings]] = [:],
        startLimit: StartLimit, openChannels: [String: Int]? = nil,
        takenOver: [String: (OrderState, Decision)] = [:], traces: [String: String] = [:],
        orderTraces: [String: String] = [:], tracker: OrderTracker, now: Date
    ) {
        var startLimit = startLimit
        for event in events {
            for orderID in event.orders(openOrdersOfUser: { Array(ordersOfUser[$0] ?? []) }) {
                // Taken out of the dictionary while it is worked on, so that its box is not shared and is
                // written in place (``OrderChange``: copy on write).
                let known = changes.index(forKey: orderID) != nil
                let original = stored[orderID] ?? nil
                var change: OrderChange
                if let planned = changes.removeValue(forKey: orderID) {
                    change = planned
                } else if original == nil, let (state, decision) = takenOver[orderID] {
                    change = OrderChange(original: nil, state: state)
                    change.decisions.append(decision)
                } else {
                    change = OrderChange(original: original, state: original ?? OrderState(orderID: orderID, now: now))
                }
                if event.reachesUser, change.state.isSettled {
                    if known { changes[orderID] = change }
                    continue
                }
                // The followers' tokens and settings read for this batch (those of earlier batches are in the state).
                var joining: [String] = []
                if case .orderFollowers(let e) = event { joining = e.followers }
                let context = TrackingContext(
                    order: change.state, userID: change.state.record?.userID ?? event.userID, joining: joining,
                    tokens: tokens, settings: settings, startRefusedDevices: startLimit.refused,
                    openChannels: openChannels)
                let pendingStarts = StartLimit.pendingStarts(change.state)
                // In place: the change's box is this change's alone, so the state's arrays change where they lie.
                let effects = tracker.apply(event, updating: &change.state, context: context, now: now)
                startLimit.count(effects, pendingStarts: pendingStarts, after: change.state)
                change.merge(effects)
                changes[orderID] = change
            }
        }
        if !traces.isEmpty { trace(traces, orderTraces) }
    }

    /// Each push carries the trace of the status event that set its content, else of the order's newest
    /// event of the batch.
    private mutating func trace(_ traces: [String: String], _ orderTraces: [String: String]) {
        for (orderID, change) in changes {
            for (key, push) in change.pushes {
                changes[orderID]?.pushes[key]?.traceParent = traces[push.statusKey.eventID] ?? orderTraces[orderID]
            }
        }
    }

    /// The changes to write: those that changed something or decided something.
    var written: [OrderChange] { changes.values.filter { $0.changed || !$0.decisions.isEmpty } }
}
