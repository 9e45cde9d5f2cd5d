import Synchronization

/// A wake-up flag one loop waits on (with a timeout) and others signal; signals coalesce.
final class Wakeup: Sendable {
    private struct State {
        var pending = false
        var waiter: CheckedContinuation<Void, Never>?
        var cancelled = false
    }
    private let state = Mutex(State())

    func signal() {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            guard let waiter = state.waiter else {
                state.pending = true
                return nil
            }
            state.waiter = nil
            return waiter
        }
        waiter?.resume()
    }

    /// Returns when signalled (or a signal was pending), after `timeout`, or on cancellation.
    func wait(timeout: Duration) async {
        if state.withLock({ state in
            defer { state.pending = false }
            return state.pending
        }) {
            return
        }
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await self.waitForSignal() }
            group.addTask { try? await Task.sleep(for: timeout) }
            await group.next()
            group.cancelAll()
        }
    }

    private func waitForSignal() async {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let resumeNow = state.withLock { state -> Bool in
                    if state.pending || state.cancelled {
                        state.pending = false
                        state.cancelled = false
                        return true
                    }
                    state.waiter = continuation
                    return false
                }
                if resumeNow { continuation.resume() }
            }
        } onCancel: {
            let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
                guard let waiter = state.waiter else {
                    state.cancelled = true
                    return nil
                }
                state.waiter = nil
                return waiter
            }
            waiter?.resume()
        }
    }
}
