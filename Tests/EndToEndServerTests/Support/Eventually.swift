import Foundation

/// Polls an observable condition (SQL, the simulator's records, a file) until it holds or a deadline passes.
///
/// This is the only waiting the end-to-end tests do: never a sleep standing in for "long enough". The interval
/// between checks is short and the deadline generous, so a loaded 2-core CI machine is slower, not flaky.
struct DeadlineExceeded: Error, CustomStringConvertible {
    var what: String
    var timeout: Duration
    var last: String?
    var description: String {
        "timed out after \(timeout) waiting for \(what)" + (last.map { " (last seen: \($0))" } ?? "")
    }
}

/// Waits until `check` returns true; `check` may throw to mean "not yet" (the last error is reported on timeout).
func eventually(
    _ what: String,
    timeout: Duration = .seconds(90),
    every interval: Duration = .milliseconds(100),
    _ check: () async throws -> Bool
) async throws {
    _ = try await eventuallyValue(what, timeout: timeout, every: interval) { try await check() ? true : nil }
}

/// Waits until `produce` returns a value and returns it; nil (or a thrown error) means "not yet".
func eventuallyValue<Value>(
    _ what: String,
    timeout: Duration = .seconds(90),
    every interval: Duration = .milliseconds(100),
    _ produce: () async throws -> Value?
) async throws -> Value {
    let clock = ContinuousClock()
    let deadline = clock.now + timeout
    var last: String?
    while true {
        do {
            if let value = try await produce() { return value }
            last = nil
        } catch {
            last = "\(error)"
        }
        if clock.now >= deadline { throw DeadlineExceeded(what: what, timeout: timeout, last: last) }
        try await Task.sleep(for: interval)
    }
}
