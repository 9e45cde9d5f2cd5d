import Foundation
import Logging
import RabbitMQ
import Synchronization

/// Forwards the events that reached this cell but whose order the hash gives another (``CellAssignment``) to
/// that cell's queue, unchanged, with a confirmed publish; the consumer acks each only once the broker has
/// confirmed its copy (docs/scaling.md, "Which cell an order belongs to").
///
/// A forwarded copy goes to the cell's queue through the default exchange: its body, properties and headers
/// are the original's, with two headers added: ``routingKeyHeader`` (the routing key it was published with,
/// which the default exchange replaces by the queue's name) and ``forwardsHeader`` (how often it was
/// forwarded). A message forwarded ``maxForwards`` times is not forwarded again: the workers' lists of cells
/// then disagree, and the cell it is in refuses it (``OrderRouting/refusal(_:headers:cells:cell:)``).
///
/// It publishes on a connection of its own, opened at the first forward, opened again after a failure (on
/// the next of the broker's nodes).
final class CellForwarder: Sendable {
    /// The routing key a forwarded message was published with.
    static let routingKeyHeader = "livedelivery-routing-key"
    /// How many times a message was forwarded from one cell to another.
    static let forwardsHeader = "livedelivery-forwards"
    /// A message is forwarded this many times at most: one forward suffices when the workers agree.
    static let maxForwards = 3

    let endpoints: AMQPEndpoints
    let logger: Logger
    private struct State {
        var publisher: RabbitMQPublisher?
        var nextNode = 0
    }
    private let state = Mutex(State())

    init(endpoints: AMQPEndpoints, logger: Logger) {
        self.endpoints = endpoints
        self.logger = logger
    }

    /// The cell a delivery must go to, when it is another than `own`'s: an order's event (one that carries
    /// the `order_id` header, and whose type is not one every cell takes) whose order the hash gives another
    /// cell, forwarded fewer than ``maxForwards`` times. nil: this cell applies it (or refuses it).
    static func destination(_ delivery: RabbitMQDelivery, cells: CellAssignment, own: String) -> CellAssignment.Cell? {
        guard let orderID = delivery.headers[OrderRouting.header]?.stringValue,
            !OrderRouting.everyCellKeys.contains(routingKey(of: delivery))
        else { return nil }
        let cell = cells.cell(for: orderID)
        guard cell.name != own, (delivery.headers[forwardsHeader]?.intValue ?? 0) < maxForwards else { return nil }
        return cell
    }

    /// The routing key a delivery was published with: a forwarded copy's ``routingKeyHeader``.
    static func routingKey(of delivery: RabbitMQDelivery) -> String {
        guard delivery.exchange.isEmpty, let original = delivery.headers[routingKeyHeader]?.stringValue else {
            return delivery.routingKey
        }
        return original
    }

    /// The properties of a delivery's forwarded copy: the original's, with the two headers of a forward; the
    /// broker's count of this queue's deliveries is left out (the copy is a new message of another queue).
    static func forwardedProperties(_ delivery: RabbitMQDelivery) -> RabbitMQMessageProperties {
        var properties = delivery.properties
        properties.headers["x-delivery-count"] = nil
        properties.headers[routingKeyHeader] = .string(routingKey(of: delivery))
        properties.headers[forwardsHeader] = .int64(Int64((delivery.headers[forwardsHeader]?.intValue ?? 0) + 1))
        return properties
    }

    /// Publishes each delivery's copy to its cell's queue, all at once; returns, in order, whether the broker
    /// confirmed each. A failure closes the connection: the next call opens another.
    func forward(_ items: [(delivery: RabbitMQDelivery, cell: CellAssignment.Cell)]) async -> [Bool] {
        let publisher: RabbitMQPublisher
        do {
            publisher = try await connected()
        } catch {
            logger.info(
                "cannot connect to RabbitMQ to forward events to their cells",
                metadata: [LiveDeliveryLoggingKeys.error: "\(error.code)"])
            return Array(repeating: false, count: items.count)
        }
        let confirmed = await withTaskGroup(of: (Int, Bool).self) { group in
            for (index, item) in items.enumerated() {
                group.addTask {
                    do {
                        try await publisher.publish(
                            exchange: "", routingKey: item.cell.queue, body: item.delivery.body,
                            properties: Self.forwardedProperties(item.delivery), mandatory: true)
                        return (index, true)
                    } catch let error as RabbitMQError {
                        self.logger.info(
                            "an event could not be forwarded to its cell",
                            metadata: [
                                LiveDeliveryLoggingKeys.error: "\(error.code)",
                                LiveDeliveryLoggingKeys.queue: "\(item.cell.queue)",
                                LiveDeliveryLoggingKeys.eventID: "\(item.delivery.messageID ?? "")",
                            ])
                        return (index, false)
                    } catch {
                        return (index, false)
                    }
                }
            }
            var confirmed = Array(repeating: false, count: items.count)
            for await (index, ok) in group { confirmed[index] = ok }
            return confirmed
        }
        if confirmed.contains(false), !publisher.isOpen {
            state.withLock { if $0.publisher === publisher { $0.publisher = nil } }
            await publisher.close()
        }
        return confirmed
    }

    /// Closes the publishing connection, if one is open.
    func close() async {
        let publisher = state.withLock { state in
            defer { state.publisher = nil }
            return state.publisher
        }
        await publisher?.close()
    }

    private func connected() async throws(RabbitMQError) -> RabbitMQPublisher {
        let (current, first) = state.withLock { ($0.publisher, $0.nextNode) }
        if let current, current.isOpen { return current }
        if let current { await current.close() }
        let (publisher, node) = try await RabbitMQPublisher.connect(to: endpoints, startingAt: first, logger: logger)
        state.withLock {
            $0.publisher = publisher
            $0.nextNode = node + 1
        }
        return publisher
    }
}
