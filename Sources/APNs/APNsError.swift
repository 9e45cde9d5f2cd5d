/// The one error type of the APNs module: thrown only while setting a client up. Sends never throw; they
/// return an ``APNsOutcome``.
public struct APNsError: Error, Sendable, CustomStringConvertible {
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Base: String { case invalidConfiguration, invalidKey, transport }
        private let base: Base
        private init(_ base: Base) { self.base = base }

        /// A setting is out of range or contradictory.
        public static let invalidConfiguration = Code(.invalidConfiguration)
        /// A signing key is unreadable or not a P-256 private key.
        public static let invalidKey = Code(.invalidKey)
        /// The HTTP/2 transport could not be created.
        public static let transport = Code(.transport)

        public var description: String { base.rawValue }
    }

    public let code: Code
    /// Explanation without keys, tokens or payloads.
    public let message: String
    /// Setup errors never fix themselves.
    public var isRetriable: Bool { false }

    init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { "APNsError.\(code): \(message)" }
}

/// Logger metadata keys of the APNs module.
public enum APNsLoggingKeys {
    public static let apnsID = "apns.id"
    public static let status = "apns.status"
    public static let reason = "apns.reason"
    public static let bundleID = "apns.bundle_id"
    /// The first 8 characters of the device token, never more.
    public static let tokenPrefix = "apns.token_prefix"
    public static let attempt = "apns.attempt"
    public static let keyID = "apns.key_id"
    public static let error = "apns.error"
}
