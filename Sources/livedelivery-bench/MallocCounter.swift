import ChildProcesses
import Foundation
import ServerFixtures

#if canImport(Glibc)
import Glibc
#endif

/// Counts the `malloc` calls of running processes, every thread, with a uprobe on libc's `malloc` (`perf stat -e
/// probe_libc:malloc -p …`): what the whole worker allocates against real servers, where `livedelivery-bench
/// events` counts only its own code's heap blocks under valgrind. Needs root and `perf` (Debian's `linux-perf`).
///
/// Each probed call traps into the kernel, so a round counted this way runs slower than one that is not: its times
/// and CPU figures are not comparable with other rounds'. The count is: it moves by a few per cent between runs (the
/// batches' sizes follow the timing), where times move by up to 2×.
struct MallocCounter {
    private let perf: ChildProcess
    private static let event = "probe_libc:malloc"

    /// Starts counting the calls of `pids`; throws, saying what is missing, where it cannot.
    static func start(pids: [Int32]) async throws -> MallocCounter {
        guard getuid() == 0 else { throw BenchmarkError(description: "counting malloc calls needs root (a uprobe)") }
        let perf = "/usr/bin/perf"
        guard FileManager.default.isExecutableFile(atPath: perf) else {
            throw BenchmarkError(description: "counting malloc calls needs perf: apt-get install linux-perf")
        }
        guard let pid = pids.first, let libc = libcPath(of: pid) else {
            throw BenchmarkError(description: "no libc.so.6 in the workers' memory maps")
        }
        // The probe stays defined once added (a kernel object, not a process): add it only when it is missing.
        if !(try await runProgram(perf, ["probe", "-l"]).contains(event)) {
            do {
                _ = try await runProgram(perf, ["probe", "-q", "-x", libc, "--add", "malloc"])
            } catch {
                throw BenchmarkError(description: "perf could not add a uprobe on malloc in \(libc): \(error)")
            }
        }
        let output = NSTemporaryDirectory() + "livedelivery-bench-perf-\(getpid()).csv"
        let process = try ChildProcess(
            name: "perf-stat", executable: perf,
            arguments: ["stat", "-x", ",", "-e", event, "-p", pids.map(String.init).joined(separator: ",")],
            environment: ["PATH": "/usr/bin:/bin"], outputPath: output, truncateOutput: true)
        return MallocCounter(perf: process)
    }

    /// Stops counting; the calls counted since ``start(pids:)``.
    func stop() async throws -> Int {
        perf.signal(SIGINT)
        _ = try await perf.waitForExit(timeout: .seconds(30))
        defer { try? FileManager.default.removeItem(atPath: perf.outputPath) }
        // CSV: count, unit, event, …
        for line in perf.output.split(separator: "\n") {
            let fields = line.split(separator: ",", omittingEmptySubsequences: false)
            if fields.count > 2, fields[2].hasPrefix(Self.event), let count = Int(fields[0]) { return count }
        }
        throw BenchmarkError(description: "perf stat printed no count: \(perf.tail(5))")
    }

    /// The libc a process has mapped.
    private static func libcPath(of pid: Int32) -> String? {
        for line in (LocalServers.procFile("/proc/\(pid)/maps") ?? "").split(separator: "\n") {
            if let path = line.split(separator: " ", omittingEmptySubsequences: true).last,
                path.hasSuffix("/libc.so.6")
            {
                return String(path)
            }
        }
        return nil
    }
}
