import Foundation
import WorkerHarness

/// Polls an observable condition (SQL, the simulator's records, a file) until it holds or a deadline passes.
///
/// This is the only waiting the end-to-end tests do: never a sleep standing in for "long enough". The interval
/// between checks is short and the deadline generous, so a loaded 2-core CI machine is slower, not flaky.
/// (``eventuallyValue(_:timeout:every:_:)`` returns the value; it is the harness's, which the benchmarks use
/// too.)
///
/// Waits until `check` returns true; `check` may throw to mean "not yet" (the last error is reported on timeout).
func eventually(
    _ what: String,
    timeout: Duration = .seconds(90),
    every interval: Duration = .milliseconds(100),
    _ check: () async throws -> Bool
) async throws {
    _ = try await eventuallyValue(what, timeout: timeout, every: interval) { try await check() ? true : nil }
}
