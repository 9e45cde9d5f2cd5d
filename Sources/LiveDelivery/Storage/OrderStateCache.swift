import LiveDeliveryCore
import Synchronization

/// The order states this process wrote, decoded, keyed by the row version they were written as
/// (`xmin`, the writing transaction's id).
///
/// An event's push is recorded moments after the event's own write: without this, the dispatcher
/// read back and decoded the whole state the consumer had just encoded. A read sends the versions
/// it holds and the server returns a state only when the row's version differs, so an entry is never
/// used once anything (another worker, an admin's `UPDATE`) has written the row since: any update
/// gives the row a new `xmin`. Only states written by committed transactions are stored.
///
/// Bounded two ways: at most `capacity` entries (two generations: when the young one fills, the old
/// one is dropped), and none older than `maximumAge` (so a version number can never come round
/// again while an entry holds it).
final class OrderStateCache: Sendable {
    struct Entry: Sendable {
        var version: Int64
        var state: OrderState
        var storedAt: ContinuousClock.Instant
    }

    /// A state written inside a transaction; stored once the transaction committed.
    struct Written: Sendable {
        var orderID: String
        var version: Int64
        var state: OrderState
    }

    private struct Generations {
        var young: [String: Entry] = [:]
        var old: [String: Entry] = [:]
    }

    let capacity: Int
    let maximumAge: Duration
    let metrics: WorkerMetrics?
    private let generations = Mutex(Generations())

    /// `capacity` 0 turns the cache off.
    init(capacity: Int = 4096, maximumAge: Duration = .seconds(300), metrics: WorkerMetrics? = nil) {
        self.capacity = capacity
        self.maximumAge = maximumAge
        self.metrics = metrics
    }

    /// Counts the states a read took from the cache and those the database sent.
    func counted(cached: Int, fetched: Int) {
        metrics?.stateReads(cached: cached, fetched: fetched)
    }

    /// The entries held for these orders (not expired).
    func entries(_ orderIDs: [String]) -> [String: Entry] {
        guard capacity > 0 else { return [:] }
        let oldest = ContinuousClock.now - maximumAge
        return generations.withLock { generations in
            var found = [String: Entry](minimumCapacity: orderIDs.count)
            for id in orderIDs {
                if let entry = generations.young[id] ?? generations.old[id], entry.storedAt >= oldest {
                    found[id] = entry
                }
            }
            return found
        }
    }

    /// Stores states written by a transaction that committed.
    func store(_ written: [Written]) {
        guard capacity > 0, !written.isEmpty else { return }
        let now = ContinuousClock.now
        generations.withLock { generations in
            let half = max(1, capacity / 2)
            for item in written {
                if generations.young.count >= half {
                    // Sized at once: grown from empty, it was rehashed eleven times (at the default
                    // capacity) before it filled.
                    generations.old = generations.young
                    generations.young = Dictionary(minimumCapacity: half)
                }
                generations.old[item.orderID] = nil
                generations.young[item.orderID] = Entry(version: item.version, state: item.state, storedAt: now)
            }
        }
    }

    var count: Int { generations.withLock { $0.young.count + $0.old.count } }
}
