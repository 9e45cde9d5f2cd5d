import Foundation
package import LiveDeliveryCore

/// How events reach the cells of a deployment past one database (docs/scaling.md, Cells): every event goes
/// through the consistent-hash exchange, which gives each order to one cell by a hash of the AMQP header
/// ``header`` (a first guess); the events that name a user rather than an order also go straight to every cell.
/// With the list of cells configured (`cell.all`), the cell an order belongs to is the one ``CellAssignment``
/// names, and an event that reached another cell is forwarded to it (``CellForwarder``).
package enum OrderRouting {
    /// The AMQP header (a string) the hash exchange hashes: the event's `order_id`.
    package static let header = "order_id"

    /// The event types every cell takes: a user's push-to-start tokens and settings serve their orders in
    /// every cell.
    package static let everyCell: [EventType] = [.pushToStartToken, .activitySettings]
    /// The routing keys of ``everyCell``.
    static let everyCellKeys = Set(everyCell.map(\.rawValue))

    /// Whether `name` may name a cell: 1–32 of a–z, 0–9 and '-', not starting with '-' (it goes into
    /// configuration keys, environment variable names and metric labels).
    package static func isCellName(_ name: String) -> Bool {
        name.utf8.count <= 32 && name.utf8.first.map { $0 != UInt8(ascii: "-") } ?? false
            && name.utf8.allSatisfy { ($0 >= 0x61 && $0 <= 0x7A) || ($0 >= 0x30 && $0 <= 0x39) || $0 == 0x2D }
    }

    /// The cells of a comma-separated list (`--cells a,b`), in the order given, blanks left out.
    package static func cellList(_ text: String) -> [String] {
        text.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
    }

    /// The refusal of an order's event that came to a cell without the header, or with another order's: the
    /// hash exchange routes a message without the header as if it had an empty one, so it may be in the wrong
    /// cell. An event of a user (no order) needs no header.
    ///
    /// With the deployment's `cells`, also an order's event that the hash gives another cell than `cell`: it
    /// came here forwarded too often (the workers' lists of cells disagree), and is never applied here.
    package static func refusal(
        _ event: InboundEvent, headers: [String: String], cells: CellAssignment? = nil, cell: String? = nil
    ) -> EventRejection? {
        guard let orderID = event.orderID else { return nil }
        guard let routed = headers[header] else {
            return EventRejection(
                .cellRoutingHeader, field: header,
                "an order's event needs the AMQP header \(header) (its order_id) for the cells' hash exchange; none was set"
            )
        }
        guard routed == orderID else {
            return EventRejection(
                .cellRoutingHeader, field: header,
                "the AMQP header \(header) differs from the body's order_id; the event may be in another order's cell")
        }
        if let cells, let cell, case let owner = cells.cell(for: orderID).name, owner != cell {
            return EventRejection(
                .cellRoutingHeader, field: header,
                "the order belongs to cell \(owner), not \(cell), and the event was forwarded \(CellForwarder.maxForwards) times: the workers' lists of cells (cell.all, cells.<name>.weight) differ"
            )
        }
        return nil
    }
}
