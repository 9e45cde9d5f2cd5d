import LiveDeliveryTime

/// A value together with the key of the event that set it.
package struct Register<Value: Hashable & Sendable>: Hashable, Sendable {
    package var value: Value
    package var key: EventKey

    package init(value: Value, key: EventKey) {
        self.value = value
        self.key = key
    }

    /// Keeps the newer of the two (by event key).
    mutating func merge(_ other: Register<Value>) -> Bool {
        guard other.key.isNewer(than: key) else { return false }
        let changed = other.value != value
        self = other
        return changed
    }
}

extension Optional {
    mutating func merge<V>(_ other: Register<V>?) -> Bool where Wrapped == Register<V> {
        guard let other else { return false }
        guard var current = self else {
            self = other
            return true
        }
        let changed = current.merge(other)
        self = current
        return changed
    }
}

/// What the worker knows about an order: the merge of every `order.status` event seen.
///
/// Each detail is a register that keeps the value of the newest event that carried it, so an
/// event that leaves a detail out does not erase it, and the record is the same whatever order the
/// events arrive in (merging is commutative, associative and idempotent). The status follows the
/// newest event, except that a terminal status absorbs: once any terminal status is known, it is the
/// status, and later non-terminal events cannot move the order back.
package struct OrderRecord: Hashable, Sendable {
    package var orderID: String
    package var userID: String
    /// The newest non-terminal status seen (kept even after the order ended).
    package var latestOpen: Register<OrderStatus>?
    /// The newest terminal status seen.
    package var terminal: Register<OrderStatus>?
    package var orderNumber: Register<Int>?
    package var merchantName: Register<String>?
    package var courierName: Register<String>?
    package var eta: Register<ETAWindow>?
    /// The newest event merged.
    package var newest: EventKey

    /// A record with no event merged yet (what a stored one is read over).
    package init(orderID: String, userID: String, newest: EventKey) {
        self.orderID = orderID
        self.userID = userID
        self.newest = newest
    }

    package init(_ event: OrderStatusEvent) {
        orderID = event.orderID
        userID = event.userID
        newest = event.key
        _ = merge(event)
    }

    /// The order's status: the terminal one if any, else the newest.
    package var status: OrderStatus { terminal?.value ?? latestOpen?.value ?? .placed }
    /// The key of the event that set ``status``.
    package var statusKey: EventKey { terminal?.key ?? latestOpen?.key ?? newest }
    package var isTerminal: Bool { terminal != nil }

    /// Merges one event; returns what changed.
    mutating func merge(_ event: OrderStatusEvent) -> Change {
        let key = event.key
        let before = self
        if event.status.isTerminal {
            _ = terminal.merge(Register(value: event.status, key: key))
        } else {
            _ = latestOpen.merge(Register(value: event.status, key: key))
        }
        if let v = event.orderNumber { _ = orderNumber.merge(Register(value: v, key: key)) }
        if let v = event.merchantName { _ = merchantName.merge(Register(value: v, key: key)) }
        if let v = event.courierName { _ = courierName.merge(Register(value: v, key: key)) }
        if let v = event.eta { _ = eta.merge(Register(value: v, key: key)) }
        let isNewest = key.isNewer(than: newest)
        if isNewest { newest = key }
        return Change(
            isNewest: isNewest, statusChanged: before.status != status,
            detailsChanged: before.orderNumber?.value != orderNumber?.value
                || before.merchantName?.value != merchantName?.value
                || before.courierName?.value != courierName?.value || before.eta?.value != eta?.value
        )
    }

    struct Change {
        var isNewest: Bool
        var statusChanged: Bool
        var detailsChanged: Bool
    }
}

extension OrderRecord {
    /// The details that differ from `old`'s, for people: "ETA …, courier …".
    func detailsChanged(since old: OrderRecord) -> String {
        let new = self
        var parts: [String] = []
        if old.eta?.value != new.eta?.value, let eta = new.eta?.value {
            parts.append("ETA \(RFC3339.format(eta.earliest))–\(RFC3339.format(eta.latest))")
        }
        if old.courierName?.value != new.courierName?.value, let courier = new.courierName?.value {
            parts.append("courier \(courier)")
        }
        if old.merchantName?.value != new.merchantName?.value, let merchant = new.merchantName?.value {
            parts.append("merchant \(merchant)")
        }
        if old.orderNumber?.value != new.orderNumber?.value, let number = new.orderNumber?.value {
            parts.append("order number \(number)")
        }
        return parts.joined(separator: ", ")
    }
}
