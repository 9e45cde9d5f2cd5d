/// Publisher-confirm bookkeeping for one channel in confirm mode: a pure state machine, no I/O.
///
/// Publishes get sequence numbers 1, 2, 3, … in send order (the broker numbers them the same
/// way). `basic.ack`/`basic.nack` settle one tag or, with `multiple`, every outstanding tag up to
/// it. A `basic.return` (mandatory publish with no route) carries no tag; the broker sends it
/// *before* the ack for that publish and in publish order, so it is matched to the oldest
/// outstanding, not yet returned, mandatory publish with the same exchange, routing key and body.
/// (Two identical in-flight messages where only one is unroutable are indistinguishable; that
/// needs a binding change between the two publishes and is accepted.)
struct PublishConfirmTracker<Token> {
    enum Outcome: Equatable {
        case confirmed
        case nacked
        case returned(replyCode: UInt16, replyText: String)
    }

    struct ReturnKey: Hashable {
        var exchange: String
        var routingKey: String
        var body: [UInt8]
    }

    private struct Pending {
        var token: Token
        var returnKey: ReturnKey?
        var returned: (replyCode: UInt16, replyText: String)?
    }

    private(set) var nextSequence: UInt64 = 1
    /// Every sequence number below this one is settled.
    private var lowestOutstanding: UInt64 = 1
    private var pending: [UInt64: Pending] = [:]

    init() {}

    var outstandingCount: Int { pending.count }

    /// Records a publish that was just sent; returns its sequence number.
    mutating func register(_ token: Token, returnKey: ReturnKey? = nil) -> UInt64 {
        let sequence = nextSequence
        nextSequence += 1
        pending[sequence] = Pending(token: token, returnKey: returnKey)
        return sequence
    }

    /// Applies `basic.ack` (`acked`) or `basic.nack`; returns the settled publishes in order.
    mutating func settle(tag: UInt64, multiple: Bool, acked: Bool) -> [(token: Token, outcome: Outcome)] {
        var settled: [(token: Token, outcome: Outcome)] = []
        func take(_ sequence: UInt64) {
            guard let entry = pending.removeValue(forKey: sequence) else { return }
            let outcome: Outcome
            if !acked {
                outcome = .nacked
            } else if let returned = entry.returned {
                outcome = .returned(replyCode: returned.replyCode, replyText: returned.replyText)
            } else {
                outcome = .confirmed
            }
            settled.append((entry.token, outcome))
        }
        if multiple {
            if tag >= lowestOutstanding {
                for sequence in lowestOutstanding...min(tag, nextSequence - 1) { take(sequence) }
            }
        } else {
            take(tag)
        }
        while lowestOutstanding < nextSequence, pending[lowestOutstanding] == nil { lowestOutstanding += 1 }
        return settled
    }

    /// Applies `basic.return`; returns whether an outstanding mandatory publish matched.
    mutating func markReturned(_ key: ReturnKey, replyCode: UInt16, replyText: String) -> Bool {
        guard lowestOutstanding < nextSequence else { return false }
        for sequence in lowestOutstanding..<nextSequence {
            guard var entry = pending[sequence], entry.returned == nil, entry.returnKey == key else { continue }
            entry.returned = (replyCode, replyText)
            pending[sequence] = entry
            return true
        }
        return false
    }

    /// Removes every outstanding publish (the channel or connection died), oldest first.
    mutating func removeAll() -> [Token] {
        let tokens = pending.sorted { $0.key < $1.key }.map(\.value.token)
        pending.removeAll()
        lowestOutstanding = nextSequence
        return tokens
    }
}
