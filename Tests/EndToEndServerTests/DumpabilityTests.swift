import ChildProcesses
import Foundation
import TestSupport
import Testing
import WorkerHarness

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Every command that reads a secret is non-dumpable before it reads the first one (docs/operations.md, Roles
/// and privileges). The secret is a `…_FILE` whose file is a FIFO: the command blocks opening it until this
/// test opens the other end, then blocks reading it for as long as the test holds that end open without
/// writing, and meanwhile the test looks at the process. A non-dumpable process's /proc/PID/* files are owned
/// by root (proc(5)), so the command runs as `nobody` when the tests run as root.
@Suite(.timeLimit(.minutes(2)))
struct DumpabilityTests {
    @Test(
        "a command is non-dumpable when it opens its first secret file",
        arguments: [
            ["run"], ["migrate"], ["check-config"], ["sweep", "--once"], ["dead-letters", "list"], ["status"],
        ])
    func nonDumpableBeforeSecrets(_ command: [String]) async throws {
        #if os(Linux)
        // A child that got past the FIFO unseen (it cannot while the test holds the writing end) is tried again.
        for _ in 0..<3 {
            switch try await Self.look(command) {
            case .seen(let owner):
                #expect(
                    owner == "0",
                    "\(command) was dumpable when it read its secret file (/proc/PID/environ owned by uid \(owner))")
                return
            case .exitedBeforeOpening(let output):
                Issue.record("\(command) exited before reading its secret file:\n\(output)")
                return
            case .unseen:
                continue
            }
        }
        Issue.record("\(command) exited three times before it could be looked at")
        #endif
    }

    enum Look {
        /// The owner of the command's /proc/PID/environ while it was opening its secret file.
        case seen(owner: String)
        case exitedBeforeOpening(output: String)
        case unseen
    }

    /// Runs `command` with `postgres.url` in a FIFO and looks at it when it opens the FIFO.
    static func look(_ command: [String]) async throws -> Look {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent(TestEnvironment.uniqueName("dump"))
        try FileManager.default.createDirectory(
            at: folder, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o755])
        defer { try? FileManager.default.removeItem(at: folder) }
        let fifo = folder.appendingPathComponent("postgres_url").path
        #expect(mkfifo(fifo, 0o600) == 0)
        #expect(chmod(fifo, 0o666) == 0)

        let binary = try LiveDeliveryBinary.path()
        let asNobody = getuid() == 0
        let child = try ChildProcess(
            name: "dump-\(command[0])",
            executable: asNobody ? "/usr/bin/setpriv" : binary,
            arguments: (asNobody ? ["--reuid=65534", "--regid=65534", "--clear-groups", binary] : []) + command,
            environment: WorkerDeployment.childEnvironment([
                "LIVEDELIVERY_CONFIG_DIR": folder.appendingPathComponent("Config").path,
                "LIVEDELIVERY_POSTGRES_URL_FILE": fifo,
            ]),
            outputPath: folder.appendingPathComponent("output.log").path)

        // The command opens the FIFO and waits in its read there, or exits without having opened it.
        guard let writer = await Self.openForWriting(fifo, unlessExited: child) else {
            await child.stop()
            // It read the file (and names it in its error) before it could be stopped: not seen.
            return child.output.contains(fifo) ? .unseen : .exitedBeforeOpening(output: child.tail())
        }
        let attributes = try? FileManager.default.attributesOfItem(atPath: "/proc/\(child.pid)/environ")
        close(writer)
        await child.stop()
        guard let owner = attributes?[.ownerAccountID] as? NSNumber else { return .unseen }
        return .seen(owner: "\(owner)")
    }

    /// Opens `path` for writing, which waits for `child` to open it for reading; while the returned end stays
    /// open and unwritten, `child`'s read of the FIFO waits. Nil when `child` exits first.
    static func openForWriting(_ path: String, unlessExited child: ChildProcess) async -> Int32? {
        await withTaskGroup(of: Int32?.self) { group in
            group.addTask {
                await withCheckedContinuation { (continuation: CheckedContinuation<Int32?, Never>) in
                    Thread {
                        continuation.resume(returning: open(path, O_WRONLY))
                    }
                    .start()
                }
            }
            group.addTask {
                _ = await child.waitForExit()
                return nil
            }
            if let first = await group.next(), let writer = first {
                group.cancelAll()
                return writer
            }
            // The child is gone: open the reading end ourselves, so that a blocked open returns.
            let reader = open(path, O_RDONLY | O_NONBLOCK)
            for await case let writer? in group where writer >= 0 { close(writer) }
            close(reader)
            return nil
        }
    }
}
