import CProcessControl
import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What every `livedelivery` command that reads a secret (an APNs key, a database or broker password, a
/// `…_FILE` file) does so that its secrets stay inside it (docs/operations.md, Roles and privileges).
package enum ProcessHardening {
    /// Marks the process non-dumpable: a crash writes no core file that would carry the keys and
    /// passwords, and other processes of the same user can neither ptrace it nor read its memory. True
    /// when the process is non-dumpable afterwards. Call it before the first secret is read.
    @discardableResult
    package static func makeNonDumpable() -> Bool {
        _ = livedelivery_make_non_dumpable()
        return isNonDumpable
    }

    /// Whether the process is non-dumpable now.
    package static var isNonDumpable: Bool { livedelivery_is_dumpable() == 0 }

    /// One sentence for each APNs key file that its group or others may read (a private key is its
    /// owner's alone: `chmod 600`). The mode is the file's a symbolic link leads to (a Kubernetes secret
    /// volume mounts each key as a link to the file). Files that cannot be read are `load`'s problem, not
    /// listed here.
    package static func keyFileWarnings(_ apps: [WorkerConfiguration.App]) -> [String] {
        var warnings: [String] = []
        for file in Set(apps.map(\.keyFile)).sorted() {
            // stat(2) follows every link, where FileManager's attributes describe the link itself.
            var status = stat()
            guard stat(file, &status) == 0 else { continue }
            let mode = Int(status.st_mode) & 0o777
            guard mode & 0o077 != 0 else { continue }
            warnings.append(
                "the APNs key \(file) may be read by its group or others (mode \(String(mode, radix: 8))): "
                    + "chmod 600 it, owned by the worker's user")
        }
        return warnings
    }
}
