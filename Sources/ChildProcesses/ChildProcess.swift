import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A child process with its output (stdout and stderr) appended to a file, for tests and benchmarks
/// that run real `livedelivery` workers, `pgbench` and the like.
///
/// Started with `posix_spawn`, not Foundation's `Process`: a child started from a Swift concurrency
/// (Dispatch) thread inherits that thread's signal mask, in which SIGTERM, SIGINT and SIGALRM are
/// blocked, so a worker's graceful shutdown could never be observed and `pgbench -T` would never
/// stop. The child gets an empty mask and default handlers. A dedicated thread waits for it
/// (`waitpid` blocks) and resumes whoever awaits its exit.
package final class ChildProcess: Sendable {
    package let name: String
    package let pid: Int32
    /// Where stdout and stderr go.
    package let outputPath: String
    private let state = Mutex(State())

    private struct State {
        var status: Int32?
        var waiters: [UUID: CheckedContinuation<Int32?, Never>] = [:]
    }

    /// Starts `executable` with `arguments` (not including argv[0]) and exactly `environment`.
    package init(
        name: String,
        executable: String,
        arguments: [String],
        environment: [String: String],
        outputPath: String,
        truncateOutput: Bool = false
    ) throws {
        self.name = name
        self.outputPath = outputPath
        pid = try spawn(
            executable, arguments: [executable] + arguments, environment: environment.map { "\($0)=\($1)" },
            outputPath: outputPath, truncate: truncateOutput)
        let pid = self.pid
        // The thread holds the object until the child exits, so exit is always observed.
        let waiter = Thread { [self] in
            var raw: Int32 = 0
            while waitpid(pid, &raw, 0) < 0 && errno == EINTR {}
            // Exited: its exit code; killed by a signal: 128 + the signal, as shells report it.
            let code = (raw & 0x7f) == 0 ? (raw >> 8) & 0xff : 128 + (raw & 0x7f)
            let waiters = self.state.withLock { state in
                state.status = code
                defer { state.waiters = [:] }
                return Array(state.waiters.values)
            }
            for waiter in waiters { waiter.resume(returning: code) }
        }
        waiter.name = "wait-\(name)"
        waiter.start()
    }

    package var exitStatus: Int32? { state.withLock { $0.status } }
    package var isRunning: Bool { exitStatus == nil }

    /// The captured output so far.
    package var output: String { (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? "" }

    /// The last lines of the output (for failure messages).
    package func tail(_ lines: Int = 30) -> String {
        output.split(separator: "\n", omittingEmptySubsequences: false).suffix(lines).joined(separator: "\n")
    }

    /// Sends a signal if the process still runs.
    package func signal(_ number: Int32) {
        guard isRunning else { return }
        _ = kill(pid, number)
    }

    /// Waits for the exit and returns its status; nil if the waiting task is cancelled first.
    package func waitForExit() async -> Int32? {
        let id = UUID()
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Int32?, Never>) in
                let now: Int32?? = state.withLock { state in
                    if let status = state.status { return .some(status) }
                    if Task.isCancelled { return .some(nil) }
                    state.waiters[id] = continuation
                    return .none
                }
                if let now { continuation.resume(returning: now) }
            }
        } onCancel: {
            state.withLock { $0.waiters.removeValue(forKey: id) }?.resume(returning: nil)
        }
    }

    /// Waits (bounded) for the exit and returns its status.
    @discardableResult
    package func waitForExit(timeout: Duration) async throws -> Int32 {
        try await withThrowingTaskGroup(of: Int32?.self) { group in
            group.addTask { await self.waitForExit() }
            group.addTask {
                try await Task.sleep(for: timeout)
                return nil
            }
            defer { group.cancelAll() }
            if let first = try await group.next(), let status = first { return status }
            throw ChildProcessError(description: "\(name) did not exit within \(timeout)")
        }
    }

    /// SIGTERM, then waits (bounded); the exit status.
    package func terminate(timeout: Duration = .seconds(60)) async throws -> Int32 {
        signal(SIGTERM)
        return try await waitForExit(timeout: timeout)
    }

    /// SIGKILL, then waits for the kernel to reap it.
    package func kill9() async throws {
        signal(SIGKILL)
        try await waitForExit(timeout: .seconds(30))
    }

    /// Kills it if still running (clean-up); never throws.
    package func stop() async {
        guard isRunning else { return }
        signal(SIGKILL)
        _ = try? await waitForExit(timeout: .seconds(10))
    }

    /// Resident and peak resident set size in kilobytes (VmRSS, VmHWM in /proc/<pid>/status).
    package var memoryKilobytes: (resident: Int, peak: Int)? {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return nil }
        func value(_ key: String) -> Int {
            guard let line = text.split(separator: "\n").first(where: { $0.hasPrefix(key) }) else { return 0 }
            return Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "") ?? 0
        }
        return (value("VmRSS:"), value("VmHWM:"))
    }

    /// CPU time used so far (user + system, from `/proc/<pid>/stat`); nil once the process is gone.
    package var cpuSeconds: Double? { ProcessCPU.ownSeconds(pid: pid) }

    /// CPU time the whole machine spent busy so far (all cores, from `/proc/stat`), in seconds.
    package static var machineBusySeconds: Double? {
        guard let text = try? String(contentsOfFile: "/proc/stat", encoding: .utf8),
            let line = text.split(separator: "\n").first, line.hasPrefix("cpu ")
        else { return nil }
        let ticks = line.split(separator: " ").dropFirst().compactMap { Double($0) }
        guard ticks.count >= 5 else { return nil }
        // user nice system idle iowait irq softirq steal …: busy is all but idle and iowait.
        return (ticks.reduce(0, +) - ticks[3] - ticks[4]) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }
}

package struct ChildProcessError: Error, CustomStringConvertible {
    package var description: String
}

/// `posix_spawn` with stdout and stderr to `outputPath`, stdin from /dev/null, an empty signal mask and
/// default handlers for the signals the children care about.
private func spawn(
    _ executable: String, arguments: [String], environment: [String], outputPath: String, truncate: Bool
) throws -> Int32 {
    var fileActions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&fileActions)
    defer { posix_spawn_file_actions_destroy(&fileActions) }
    posix_spawn_file_actions_addopen(&fileActions, 0, "/dev/null", O_RDONLY, 0)
    posix_spawn_file_actions_addopen(
        &fileActions, 1, outputPath, O_WRONLY | O_CREAT | (truncate ? O_TRUNC : O_APPEND), 0o644)
    posix_spawn_file_actions_adddup2(&fileActions, 1, 2)
    var attributes = posix_spawnattr_t()
    posix_spawnattr_init(&attributes)
    defer { posix_spawnattr_destroy(&attributes) }
    var emptyMask = sigset_t()
    sigemptyset(&emptyMask)
    posix_spawnattr_setsigmask(&attributes, &emptyMask)
    var defaults = sigset_t()
    sigemptyset(&defaults)
    for number in [SIGTERM, SIGINT, SIGHUP, SIGPIPE, SIGALRM, SIGCHLD, SIGQUIT, SIGUSR1, SIGUSR2] {
        sigaddset(&defaults, number)
    }
    posix_spawnattr_setsigdefault(&attributes, &defaults)
    posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))

    let argv = arguments.map { strdup($0) } + [nil]
    let envp = environment.map { strdup($0) } + [nil]
    defer {
        for pointer in argv { free(pointer) }
        for pointer in envp { free(pointer) }
    }
    var pid: pid_t = 0
    let result = posix_spawn(&pid, executable, &fileActions, &attributes, argv, envp)
    guard result == 0 else {
        throw ChildProcessError(description: "cannot start \(executable): \(String(cString: strerror(result)))")
    }
    return pid
}
