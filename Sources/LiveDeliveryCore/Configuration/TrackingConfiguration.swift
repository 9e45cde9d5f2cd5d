/// The policy and the content mapping together: everything ``OrderTracker`` needs.
package struct TrackingConfiguration: Sendable, Hashable {
    package var policy: Policy
    package var mapping: ContentMapping

    package init(policy: Policy, mapping: ContentMapping) {
        self.policy = policy
        self.mapping = mapping
    }
}

/// The shipped configuration files and how to read them. The core does no I/O: callers read the
/// files (the worker at start-up, `livedelivery render`, the tests) and pass the bytes.
package enum DefaultConfiguration {
    /// The folder, relative to the package root, holding the shipped files.
    package static let directoryName = "Config"
    package static let policyFileName = "policy.json"
    package static let mappingFileName = "content-mapping.json"

    /// Reads both files; every problem of both is reported together. A missing policy file
    /// (`policyJSON == nil`) means the built-in defaults; the mapping is required.
    package static func load(
        policyJSON: [UInt8]?, mappingJSON: [UInt8]
    ) throws(LiveDeliveryCoreError) -> TrackingConfiguration {
        var problems: [String] = []
        var policy = Policy()
        if let policyJSON {
            do {
                policy = try Policy.decode(policyJSON, file: policyFileName)
            } catch {
                problems += error.problems
            }
        }
        var mapping: ContentMapping?
        do {
            mapping = try ContentMapping.decode(mappingJSON, file: mappingFileName)
        } catch {
            problems += error.problems
        }
        guard problems.isEmpty, let mapping else {
            throw LiveDeliveryCoreError(code: .invalidConfiguration, problems: problems)
        }
        return TrackingConfiguration(policy: policy, mapping: mapping)
    }
}
