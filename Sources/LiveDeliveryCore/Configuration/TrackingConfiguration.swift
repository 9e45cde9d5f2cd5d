/// The policy and the content mapping together: everything ``OrderTracker`` needs.
public struct TrackingConfiguration: Sendable, Hashable {
    public var policy: Policy
    public var mapping: ContentMapping

    public init(policy: Policy, mapping: ContentMapping) {
        self.policy = policy
        self.mapping = mapping
    }
}

/// The shipped configuration files and how to read them. The core does no I/O: callers read the
/// files (the worker at start-up, `livedelivery render`, the tests) and pass the bytes.
public enum DefaultConfiguration {
    /// The folder, relative to the package root, holding the shipped files.
    public static let directoryName = "Config"
    public static let policyFileName = "policy.json"
    public static let mappingFileName = "content-mapping.json"

    /// Reads both files; every problem of both is reported together. A missing policy file
    /// (`policyJSON == nil`) means the built-in defaults; the mapping is required.
    public static func load(
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
