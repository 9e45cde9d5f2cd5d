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

/// One `livedelivery` child process with its output captured to files.
final class ChildProcess: Sendable {
    let name: String
    let logURL: URL
    private let process: Process
    private let exit = ExitStatusBox()

    var pid: Int32 { process.processIdentifier }

    /// Starts `livedelivery ARGS` with `environment` added to (overriding) the test process's environment.
    init(name: String, arguments: [String], environment: [String: String], logDirectory: URL) throws {
        self.name = name
        logURL = logDirectory.appendingPathComponent("\(name).log")
        _ = FileManager.default.createFile(atPath: logURL.path, contents: nil)
        let log = try FileHandle(forWritingTo: logURL)
        process = Process()
        process.executableURL = URL(fileURLWithPath: try LiveDeliveryBinary.path())
        process.arguments = arguments
        var merged = ProcessInfo.processInfo.environment
        // The tests' own server URLs must not leak into a child that is meant to use other ones.
        for key in merged.keys where key.hasPrefix("LIVEDELIVERY_") && key != "LIVEDELIVERY_BIN" { merged[key] = nil }
        process.environment = merged.merging(environment) { $1 }
        process.standardOutput = log
        process.standardError = log
        process.standardInput = FileHandle.nullDevice
        let exit = self.exit
        process.terminationHandler = { finished in
            exit.value.withLock { $0 = finished.terminationStatus }
            try? log.close()
        }
        try process.run()
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
        _ = kill(process.processIdentifier, number)
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
