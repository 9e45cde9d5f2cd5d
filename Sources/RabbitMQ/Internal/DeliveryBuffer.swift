import Synchronization

/// The deliveries of one consumer between the connection's thread, which appends them as frames arrive, and
/// the task that takes them, one at a time or as many as are there (``take(max:)``): the one buffer between
/// the socket and a batch. Bounded by the consumer's prefetch, since the broker sends no more than that
/// unsettled.
final class DeliveryBuffer: Sendable {
    private struct State: ~Copyable {
        /// Not taken yet, oldest first (at most the prefetch count).
        var deliveries: [RabbitMQDelivery] = []
        /// Set by the connection's side: no delivery follows; what is buffered is still taken.
        var end: Result<Void, RabbitMQError>?
        /// Set by the taking side (it stopped, or its task was cancelled): later deliveries are refused.
        var abandoned = false
        var waiter: CheckedContinuation<Void, Never>?
    }

    private let state = Mutex(State())
    /// Called once, with this buffer, when the taking side abandons it before its end (it cancels the consumer).
    private let onAbandon: @Sendable (DeliveryBuffer) -> Void

    init(onAbandon: @escaping @Sendable (DeliveryBuffer) -> Void) {
        self.onAbandon = onAbandon
    }

    // MARK: The connection's thread

    /// Appends a delivery; false when the taking side has gone (the caller gives the message back).
    func append(_ delivery: RabbitMQDelivery) -> Bool {
        let (accepted, waiter) = state.withLock { state -> (Bool, CheckedContinuation<Void, Never>?) in
            guard !state.abandoned, state.end == nil else { return (false, nil) }
            state.deliveries.append(delivery)
            defer { state.waiter = nil }
            return (true, state.waiter)
        }
        waiter?.resume()
        return accepted
    }

    /// No delivery follows: the takes return what is buffered, then `nil` (or throw `error`).
    func finish(throwing error: RabbitMQError? = nil) {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            if state.end == nil { state.end = error.map { .failure($0) } ?? .success(()) }
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume()
    }

    // MARK: The taking task

    /// Up to `max` deliveries, waiting for the first when none is buffered; `nil` once the buffer has ended
    /// and is empty. Throws the connection's or channel's error after the buffered deliveries. A cancelled
    /// task gets `nil`, and the buffer is abandoned (the consumer is cancelled; later deliveries requeued).
    func take(max: Int) async throws(RabbitMQError) -> [RabbitMQDelivery]? {
        precondition(max > 0, "take at least one delivery")
        while true {
            let taken: Result<[RabbitMQDelivery]?, RabbitMQError>? = state.withLock { state in
                if !state.deliveries.isEmpty {
                    let count = min(state.deliveries.count, max)
                    let batch = Array(state.deliveries.prefix(count))
                    // What is left moves to the front: the buffer never holds more than the prefetch count.
                    state.deliveries.removeFirst(count)
                    return .success(batch)
                }
                switch state.end {
                case .success: return .success(nil)
                case .failure(let error): return .failure(error)
                case nil: return state.abandoned ? .success(nil) : nil
                }
            }
            if let taken { return try taken.get() }
            if Task.isCancelled {
                abandon()
                return nil
            }
            await withTaskCancellationHandler {
                await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                    let resumeNow = state.withLock { state in
                        if !state.deliveries.isEmpty || state.end != nil || state.abandoned {
                            return true
                        }
                        state.waiter = continuation
                        return false
                    }
                    if resumeNow { continuation.resume() }
                }
            } onCancel: {
                self.abandon()
            }
        }
    }

    /// The taking side stops: later deliveries are refused, a waiting take returns `nil`, and the consumer is
    /// cancelled on the broker (once).
    func abandon() {
        let (waiter, first) = state.withLock { state -> (CheckedContinuation<Void, Never>?, Bool) in
            let first = !state.abandoned && state.end == nil
            state.abandoned = true
            defer { state.waiter = nil }
            return (state.waiter, first)
        }
        waiter?.resume()
        if first { onAbandon(self) }
    }
}
