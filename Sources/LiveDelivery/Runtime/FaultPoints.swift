#if DEBUG
import Foundation
import Synchronization

/// Crash points that tests set through the environment of a worker they start, to hit a window that
/// killing the process from outside reaches only by chance. They exist in debug builds only (the
/// `DEBUG` condition SwiftPM sets there): `swift build --build-tests`, which the tests run, has them; a
/// release build (`swift build -c release`, the Dockerfile's) has none, and the variables below do
/// nothing there. Unset, each costs a branch on a constant.
///
/// - `LIVEDELIVERY_FAULT_KILL_BEFORE_RECORDING=N`: once the answers about to be recorded bring the pushes
///   APNs accepted to N or more, the process sends itself SIGKILL, as `kill -9` would, before any of them
///   is written: APNs has them, the database still holds them as in flight (`CrashTests`).
enum FaultPoints {
    static let killBeforeRecording: Int? = ProcessInfo.processInfo.environment[
        "LIVEDELIVERY_FAULT_KILL_BEFORE_RECORDING"
    ].flatMap { Int($0) }
    private static let accepted = Atomic<Int>(0)

    /// Called with the number of accepted pushes among the answers the recorder is about to write.
    static func beforeRecording(accepted count: Int) {
        guard let limit = killBeforeRecording, count > 0 else { return }
        if accepted.add(count, ordering: .relaxed).newValue >= limit {
            kill(getpid(), SIGKILL)
        }
    }
}
#else
/// A release build has no fault point: no environment variable makes it kill itself. The callers'
/// `killBeforeRecording != nil` is a constant `false` here, which the optimizer removes with the call.
enum FaultPoints {
    @inline(__always) static var killBeforeRecording: Int? { nil }

    @inline(__always) static func beforeRecording(accepted count: Int) {}
}
#endif
