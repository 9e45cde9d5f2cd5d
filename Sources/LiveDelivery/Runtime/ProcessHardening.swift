import CProcessControl
import Foundation

/// What `livedelivery run` does so that its secrets (the APNs keys, the database and broker passwords)
/// stay inside it (docs/operations.md, Roles and privileges).
package enum ProcessHardening {
    /// Marks the process non-dumpable: a crash writes no core file that would carry the keys and
    /// passwords, and other processes of the same user can neither ptrace it nor read its memory. True
    /// when the process is non-dumpable afterwards.
    @discardableResult
    package static func makeNonDumpable() -> Bool {
        _ = livedelivery_make_non_dumpable()
        return livedelivery_is_dumpable() == 0
    }

    /// One sentence for each APNs key file that its group or others may read (a private key is its
    /// owner's alone: `chmod 600`). Files that cannot be read are `load`'s problem, not listed here.
    package static func keyFileWarnings(_ apps: [WorkerConfiguration.App]) -> [String] {
        var warnings: [String] = []
        for file in Set(apps.map(\.keyFile)).sorted() {
            guard let attributes = try? FileManager.default.attributesOfItem(atPath: file),
                let mode = (attributes[.posixPermissions] as? NSNumber)?.intValue, mode & 0o077 != 0
            else { continue }
            warnings.append(
                "the APNs key \(file) may be read by its group or others (mode \(String(mode & 0o777, radix: 8))): "
                    + "chmod 600 it, owned by the worker's user")
        }
        return warnings
    }
}
