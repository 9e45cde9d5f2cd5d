/// The one error of the core: a configuration that cannot be used. (Bad events are not errors but
/// ``EventRejection`` values; refused pushes are ``Decision``s.)
package struct LiveDeliveryCoreError: Error, Sendable, Hashable, CustomStringConvertible {
    package struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Value: Hashable, Sendable {
            case invalidConfiguration
        }

        private let value: Value
        private init(_ value: Value) { self.value = value }

        /// policy.json or content-mapping.json is missing, malformed or inconsistent.
        package static let invalidConfiguration = Code(.invalidConfiguration)

        package var description: String {
            switch value {
            case .invalidConfiguration: "invalid configuration"
            }
        }
    }

    package var code: Code
    /// Every problem found, each prefixed with its file and key path.
    package var problems: [String]

    package init(code: Code, problems: [String]) {
        self.code = code
        self.problems = problems
    }

    /// Configuration problems never go away by retrying.
    package var isRetriable: Bool { false }

    package var description: String {
        "\(code): " + (problems.count == 1 ? problems[0] : "\n  " + problems.joined(separator: "\n  "))
    }
}
