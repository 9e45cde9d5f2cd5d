import Foundation
import ServiceLifecycle

/// Exponential backoff with full jitter.
struct Backoff {
    let base: Duration
    let maximum: Duration
    private var attempt = 0

    init(base: Duration, maximum: Duration) {
        self.base = base
        self.maximum = maximum
    }

    mutating func next() -> Duration {
        defer { attempt += 1 }
        return Self.delay(attempt: attempt, base: base, maximum: maximum)
    }

    mutating func reset() { attempt = 0 }

    /// `min(maximum, base · 2^attempt)` scaled by `jitter`, a random factor in [0.5, 1] unless given.
    static func delay(
        attempt: Int, base: Duration, maximum: Duration, jitter: Double = .random(in: 0.5...1.0)
    ) -> Duration {
        let exponential = base.seconds * pow(2, Double(min(attempt, 30)))
        return .milliseconds(Int64(min(maximum.seconds, exponential) * jitter * 1000))
    }
}

/// Sleeps, waking early on graceful shutdown or cancellation.
func sleepUnlessShuttingDown(_ duration: Duration) async {
    _ = try? await cancelWhenGracefulShutdown { try await Task.sleep(for: duration) }
}
