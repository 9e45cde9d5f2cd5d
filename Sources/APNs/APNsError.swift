/// The one error type of the APNs module: thrown only while setting a client up. Sends never throw; they
/// return an ``APNsOutcome``.
package struct APNsError: Error, Sendable, CustomStringConvertible {
    package struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Base: String { case invalidConfiguration, invalidKey, transport }
        private let base: Base
        private init(_ base: Base) { self.base = base }

        /// A setting is out of range or contradictory.
        package static let invalidConfiguration = Code(.invalidConfiguration)
        /// A signing key is unreadable or not a P-256 private key.
        package static let invalidKey = Code(.invalidKey)
        /// The HTTP/2 transport could not be created.
        package static let transport = Code(.transport)

        package var description: String { base.rawValue }
    }

    package let code: Code
    /// Explanation without keys, tokens or payloads.
    package let message: String
    /// Setup errors never fix themselves.
    package var isRetriable: Bool { false }

    init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    package var description: String { "APNsError.\(code): \(message)" }
}

/// Logger metadata keys of the APNs module.
package enum APNsLoggingKeys {
    package static let apnsID = "apns.id"
    package static let status = "apns.status"
    package static let reason = "apns.reason"
    package static let bundleID = "apns.bundle_id"
    /// The first 8 characters of the device token, never more.
    package static let tokenPrefix = "apns.token_prefix"
    package static let keyID = "apns.key_id"
    package static let error = "apns.error"
}
