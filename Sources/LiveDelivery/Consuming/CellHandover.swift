import Foundation
import LiveDeliveryCore
import Logging
import Postgres

/// A cell added to a deployment takes over the orders in flight that the grown list of cells now gives it
/// (docs/scaling.md, Adding a cell): the first time an event of an order it does not know reaches it, it asks
/// the cell the order was in, through that cell's database, for the order's state. That cell's copy of the order
/// is handed over in the same transaction there (its activities close without a push, and nothing happens to
/// the order there again), and this cell carries the order on with the same activities and tokens: the phone
/// sees no gap and no second activity.
///
/// The cell an order was in is the one the hash names over the cells this one was added to (`cell.takeOverFrom`,
/// with their weights): adding cells to a rendezvous hash moves an order only to an added cell, never between the
/// others. An order none of them holds is new, and starts here. An order that a cell already handed over to this
/// one is handed over again as it was (this cell's transaction may have failed after that cell's committed).
///
/// An order with a push waiting to be sent or answered there is not handed over: the batch waits
/// (``Waiting``) and is tried again, as when the database is away, until that push is settled.
final class CellHandover: Sendable {
    /// The cells this one was added to, with their weights, and their databases (`cells.<name>.postgresUrl`).
    struct Sources: Sendable {
        var previous: CellAssignment
        var databases: [String: PostgresConfiguration]
    }

    /// An order cannot be taken over yet: its cell has a push of it in flight, or its database cannot be asked.
    struct Waiting: Error, CustomStringConvertible {
        let description: String
    }

    let own: String
    let previous: CellAssignment
    let clients: [String: PostgresClient]
    let tracker: OrderTracker

    init(own: String, sources: Sources, tracking: TrackingConfiguration, applicationName: String, logger: Logger) {
        self.own = own
        self.previous = sources.previous
        self.tracker = OrderTracker(configuration: tracking)
        var clients: [String: PostgresClient] = [:]
        for (cell, database) in sources.databases {
            var configuration = database
            configuration.poolSize = 2
            configuration.applicationName = applicationName
            clients[cell] = PostgresClient(configuration: configuration, logger: logger)
        }
        self.clients = clients
    }

    /// The orders of `orderIDs` (unknown here) that the cells this one was added to held, taken over: each order's
    /// state, and the decision that says where it came from. The others are new.
    func takeOver(_ orderIDs: [String], now: Date) async throws(Waiting) -> [String: (OrderState, Decision)] {
        var taken: [String: (OrderState, Decision)] = [:]
        let byCell = Dictionary(grouping: Set(orderIDs)) { previous.cell(for: $0).name }
        for (cell, ids) in byCell.sorted(by: { $0.key < $1.key }) {
            guard let client = clients[cell] else { continue }
            let handovers: [String: OrderState.Handover]
            do {
                handovers = try await client.withTransaction { connection in
                    try await Self.handOver(ids, to: self.own, tracker: self.tracker, now: now, on: connection)
                }
            } catch let waiting as Waiting {
                throw waiting
            } catch {
                throw Waiting(description: "cell \(cell)'s database cannot hand orders over: \(error)")
            }
            for (id, handover) in handovers { taken[id] = tracker.takeOver(handover, from: cell) }
        }
        return taken
    }

    /// In the old cell's transaction: locks the orders that exist there and hands each over to `cell` (or finds
    /// it handed over to it already). Throws ``Waiting`` for an order with a push in flight.
    static func handOver(
        _ ids: [String], to cell: String, tracker: OrderTracker, now: Date, on connection: PostgresConnection
    ) async throws -> [String: OrderState.Handover] {
        let stored = try await OrderStore.lockExisting(ids, on: connection)
        var handovers: [String: OrderState.Handover] = [:]
        var changes: [OrderChange] = []
        for id in ids.sorted() {
            guard let state = stored[id] ?? nil else { continue }
            if let done = state.handedOver {
                if done.value.cell == cell { handovers[id] = done.value }
                continue
            }
            guard state.isQuiet else {
                throw Waiting(
                    description:
                        "order \(id) has a push in flight in its old cell; it is taken over once that push is settled")
            }
            let step = tracker.handOver(state, to: cell, now: now)
            var change = OrderChange(original: state, state: state)
            change.merge(step)
            changes.append(change)
            if let handover = step.state.handedOver { handovers[id] = handover.value }
        }
        if !changes.isEmpty { try await OrderStore.write(changes, kind: "event", now: now, on: connection) }
        return handovers
    }

    /// Closes the connections to the other cells' databases.
    func shutdown() async {
        for client in clients.values { await client.shutdown() }
    }
}
