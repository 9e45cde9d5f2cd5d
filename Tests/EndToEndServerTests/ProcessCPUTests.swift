import ChildProcesses
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The worker bench splits the machine's CPU by process with ``ProcessCPU``. A PostgreSQL backend that
/// ends during a round is counted only through the postmaster's children's time; this checks that
/// reading, with this test process standing in for the postmaster.
@Suite
struct ProcessCPUTests {
    @Test func aProcessIncludesTheTimeOfChildrenItReaped() async throws {
        let me = try String(contentsOfFile: "/proc/self/comm", encoding: .utf8)
            .trimmingCharacters(in: .whitespacesAndNewlines)
        let before = ProcessCPU.seconds(ofCommands: [me])
        let reapedBefore = Self.reapedChildrenSeconds()

        // A child that only computes, then exits and is reaped by this process.
        let child = try ChildProcess(
            name: "cpu-child", executable: "/bin/sh",
            arguments: ["-c", "i=0; while [ $i -lt 400000 ]; do i=$((i+1)); done"],
            environment: [:],
            outputPath: FileManager.default.temporaryDirectory.appendingPathComponent(
                "livedelivery-cpu-child-\(getpid()).log"
            ).path, truncateOutput: true)
        let status = try await child.waitForExit(timeout: .seconds(120))
        #expect(status == 0)

        let reaped = Self.reapedChildrenSeconds() - reapedBefore
        let counted = ProcessCPU.seconds(ofCommands: [me]) - before
        #expect(reaped > 0.05, "the child computed for a while")
        // Own time only grows, so whatever else this process did, the reading grew by at least the
        // children's time (to within a clock tick of the two counters' rounding).
        #expect(counted >= reaped - 0.02, "counted \(counted) s, children reaped \(reaped) s")
        #expect(ProcessCPU.seconds(ofCommands: ["no-such-command"]) == 0)
    }

    /// The kernel's own account of this process's ended children (`getrusage(RUSAGE_CHILDREN)`).
    private static func reapedChildrenSeconds() -> Double {
        var usage = rusage()
        getrusage(RUSAGE_CHILDREN.rawValue, &usage)
        func seconds(_ time: timeval) -> Double { Double(time.tv_sec) + Double(time.tv_usec) / 1e6 }
        return seconds(usage.ru_utime) + seconds(usage.ru_stime)
    }
}
