import ChildProcesses
import Foundation
import TestSupport
import WorkerHarness

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
        candidates += ["debug", "release"].map {
            root.appendingPathComponent($0).appendingPathComponent("livedelivery")
        }
        for candidate in candidates where FileManager.default.isExecutableFile(atPath: candidate.path) {
            var isDirectory: ObjCBool = false
            if FileManager.default.fileExists(atPath: candidate.path, isDirectory: &isDirectory), !isDirectory.boolValue
            {
                return candidate.path
            }
        }
        throw HarnessError(
            "the livedelivery executable was not found next to the tests; run `swift build --build-tests` (looked in \(candidates.map(\.path).prefix(3)))"
        )
    }
}

extension ChildProcess {
    /// Starts `livedelivery ARGS` with `environment` added to (overriding) the test process's environment,
    /// its output in `logDirectory/NAME.log`.
    static func livedelivery(
        name: String, arguments: [String], environment: [String: String], logDirectory: URL
    ) throws -> ChildProcess {
        // The tests' own server URLs must not leak into a child that is meant to use other ones.
        try ChildProcess(
            name: name, executable: try LiveDeliveryBinary.path(), arguments: arguments,
            environment: WorkerDeployment.childEnvironment(environment),
            outputPath: logDirectory.appendingPathComponent("\(name).log").path)
    }
}
