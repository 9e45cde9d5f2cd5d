import Foundation
import Synchronization
import TestSupport

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The built `livedelivery` executable, found next to the test bundle (`.build/<config>/livedelivery`).
///
/// `swift build --build-tests` builds it with the tests. `LIVEDELIVERY_BIN` overrides the search.
enum LiveDeliveryBinary {
    static func path() throws -> String {
        if let explicit = ProcessInfo.processInfo.environment["LIVEDELIVERY_BIN"], !explicit.isEmpty {
            return explicit
        }
        var candidates: [URL] = []
        // The test runner executable (…/.build/debug/LiveDeliveryPackageTests.xctest) or bundle.
        for start in [Bundle.main.bundleURL, Bundle.main.executableURL, URL(fileURLWithPath: CommandLine.arguments[0])]
        {
            guard var directory = start?.resolvingSymlinksInPath() else { continue }
            for _ in 0..<4 {
                directory = directory.deletingLastPathComponent()
                candidates.append(directory.appendingPathComponent("livedelivery"))
            }
        }
        let root = TestEnvironment.projectRoot.appendingPathComponent(".build")
        candidates += ["debug", "release"].map { root.appendingPathComponent($0).appendingPathComponent("livedelivery") }
        for candidate in candidates where FileManager.default.isExecutableFile(atPath: candidate.path) {
            var isDirectory: ObjCBool = false
            if FileManager.default.fileExists(atPath: candidate.path, isDirectory: &isDirectory), !isDirectory.boolValue {
                return candidate.path
            }
        }
        throw HarnessError("the livedelivery executable was not found next to the tests; run `swift build --build-tests` (looked in \(candidates.map(\.path).prefix(3)))")
    }
}

struct HarnessError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// One `livedelivery` child process with its output captured to a file.
///
/// Started with `posix_spawn`, not Foundation's `Process`: a child started from a Swift concurrency (Dispatch)
/// thread would inherit that thread's signal mask, in which SIGTERM and SIGINT are blocked, so the worker's
/// graceful shutdown could never be observed. The child gets an empty mask and default signal handlers, and a
/// dedicated thread waits for it (`waitpid` blocks).
final class ChildProcess: Sendable {
    let name: String
    let logURL: URL
    let pid: Int32
    private let exit = ExitStatusBox()

    /// Starts `livedelivery ARGS` with `environment` added to (overriding) the test process's environment.
    init(name: String, arguments: [String], environment: [String: String], logDirectory: URL) throws {
        self.name = name
        logURL = logDirectory.appendingPathComponent("\(name).log")
        let executable = try LiveDeliveryBinary.path()
        var merged = ProcessInfo.processInfo.environment
        // The tests' own server URLs must not leak into a child that is meant to use other ones.
        for key in merged.keys where key.hasPrefix("LIVEDELIVERY_") && key != "LIVEDELIVERY_BIN" { merged[key] = nil }
        merged.merge(environment) { $1 }
        pid = try spawn(
            executable, arguments: [executable] + arguments, environment: merged.map { "\($0)=\($1)" },
            outputPath: logURL.path)
        let exit = self.exit
        let pid = self.pid
        let waiter = Thread {
            var status: Int32 = 0
            while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
            // Exited: the exit code; killed by a signal: 128 + the signal, as shells report it.
            let code = (status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
            exit.value.withLock { $0 = code }
        }
        waiter.name = "e2e-wait-\(name)"
        waiter.start()
    }

    var exitStatus: Int32? { exit.value.withLock { $0 } }
    var isRunning: Bool { exitStatus == nil }

    /// The captured output so far (for failure messages).
    var output: String { (try? String(contentsOf: logURL, encoding: .utf8)) ?? "" }

    /// The last lines of the output.
    func tail(_ lines: Int = 30) -> String {
        output.split(separator: "\n", omittingEmptySubsequences: false).suffix(lines).joined(separator: "\n")
    }

    func signal(_ number: Int32) {
        guard isRunning else { return }
        _ = kill(pid, number)
    }

    /// Waits (bounded) for the process to exit and returns its status.
    @discardableResult
    func waitForExit(timeout: Duration = .seconds(60)) async throws -> Int32 {
        try await eventuallyValue("\(name) to exit", timeout: timeout, every: .milliseconds(50)) { exitStatus }
    }

    /// SIGTERM, then waits; the exit status.
    func terminate(timeout: Duration = .seconds(60)) async throws -> Int32 {
        signal(SIGTERM)
        return try await waitForExit(timeout: timeout)
    }

    /// SIGKILL, then waits for the kernel to reap it.
    func kill9() async throws {
        signal(SIGKILL)
        try await waitForExit(timeout: .seconds(30))
    }

    /// Kills it if still running (test cleanup); never throws.
    func stop() async {
        guard isRunning else { return }
        signal(SIGKILL)
        _ = try? await waitForExit(timeout: .seconds(10))
    }

    /// Resident set size in kilobytes (`VmRSS` in /proc/<pid>/status), when available.
    var residentKilobytes: Int? {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return nil }
        for line in text.split(separator: "\n") where line.hasPrefix("VmRSS:") {
            return Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "")
        }
        return nil
    }
}

/// The exit status, set by the termination handler (another thread) and read by the tests.
private final class ExitStatusBox: Sendable {
    let value = Mutex<Int32?>(nil)
}

/// `posix_spawn` with stdout and stderr appended to `outputPath`, stdin from /dev/null, an empty signal mask and
/// default handlers for the signals a worker cares about.
private func spawn(_ executable: String, arguments: [String], environment: [String], outputPath: String) throws -> Int32 {
    var fileActions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&fileActions)
    defer { posix_spawn_file_actions_destroy(&fileActions) }
    posix_spawn_file_actions_addopen(&fileActions, 0, "/dev/null", O_RDONLY, 0)
    posix_spawn_file_actions_addopen(&fileActions, 1, outputPath, O_WRONLY | O_CREAT | O_APPEND, 0o644)
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
    guard result == 0 else { throw HarnessError("posix_spawn \(executable) failed: \(String(cString: strerror(result)))") }
    return pid
}
