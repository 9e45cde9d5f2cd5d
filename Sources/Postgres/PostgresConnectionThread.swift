import Foundation
import Synchronization

/// The one thread a `PostgresConnection` runs all its libpq calls on.
///
/// A plain thread with a job list and a condition variable: it sleeps until a job arrives, runs jobs in order,
/// and exits once stopped and drained. (Measured cheaper per statement than a serial `DispatchQueue`, whose
/// worker hand-offs cost more CPU when many connections are busy on few cores.)
final class PostgresConnectionThread: @unchecked Sendable {
    // `jobs` and `isStopped` are guarded by `condition`; that is what makes the class Sendable.
    private let condition = NSCondition()
    private var jobs: [@Sendable () -> Void] = []
    private var isStopped = false
    /// `pthread_self()` of the thread once it runs (0 before): lets a job know it is already on this thread.
    private let threadID = Atomic<UInt>(0)

    init(name: String) {
        let thread = Thread { [self] in loop() }
        thread.name = name
        thread.start()
    }

    func execute(_ job: @escaping @Sendable () -> Void) {
        condition.lock()
        jobs.append(job)
        condition.signal()
        condition.unlock()
    }

    /// Lets the thread exit after the jobs already queued.
    func stop() {
        condition.lock()
        isStopped = true
        condition.signal()
        condition.unlock()
    }

    /// True when called from this connection's own thread (e.g. in a task that prefers this executor).
    var isCurrent: Bool {
        Self.currentThreadID() == threadID.load(ordering: .relaxed)
    }

    private static func currentThreadID() -> UInt {
        #if canImport(Darwin)
        UInt(bitPattern: pthread_self())
        #else
        UInt(pthread_self())
        #endif
    }

    private func loop() {
        threadID.store(Self.currentThreadID(), ordering: .relaxed)
        var batch: [@Sendable () -> Void] = []
        while true {
            condition.lock()
            while jobs.isEmpty && !isStopped { condition.wait() }
            if jobs.isEmpty && isStopped {
                condition.unlock()
                return
            }
            swap(&batch, &jobs)
            condition.unlock()
            for job in batch { job() }
            batch.removeAll(keepingCapacity: true)
        }
    }
}

/// Tasks that prefer this executor (`withTaskExecutorPreference`) run on the connection's thread, so the
/// statements they issue on that connection need no thread hop at all.
extension PostgresConnectionThread: TaskExecutor {
    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        execute { [self] in job.runSynchronously(on: asUnownedTaskExecutor()) }
    }
}
