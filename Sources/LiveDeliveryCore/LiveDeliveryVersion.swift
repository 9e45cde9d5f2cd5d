import Foundation

/// The product's version, and the source revision it was built from (`LIVEDELIVERY_REVISION` at run
/// time, set by the image build; `unknown` otherwise).
///
/// It lives in the core, the one module that `livedelivery` and `livedelivery-bench` both depend
/// on, so every executable prints the same string without depending on the worker. Reading the
/// environment is the only thing here that is not pure: the revision is a fact of the deployment,
/// not of the code.
package enum LiveDeliveryVersion {
    package static let version = "0.9.0"

    package static var revision: String {
        ProcessInfo.processInfo.environment["LIVEDELIVERY_REVISION"].flatMap { $0.isEmpty ? nil : $0 } ?? "unknown"
    }

    /// What `--version` prints: `0.9.0 (revision abc123)`, or `0.9.0` when the revision is unknown.
    package static var description: String {
        let revision = revision
        return revision == "unknown" ? version : "\(version) (revision \(revision))"
    }
}
