/// The one error type of the simulator module.
public struct SimulatorError: Error, Sendable, CustomStringConvertible {
    /// What went wrong, as a value that may grow.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Base: String { case invalidConfiguration, certificate, bind, alreadyShutDown }
        private let base: Base
        private init(_ base: Base) { self.base = base }

        /// A flag, key, shape or certificate option is unusable.
        public static let invalidConfiguration = Code(.invalidConfiguration)
        /// The self-signed certificate could not be made, or the given one could not be loaded.
        public static let certificate = Code(.certificate)
        /// A listener could not bind its address.
        public static let bind = Code(.bind)
        /// The simulator was already shut down.
        public static let alreadyShutDown = Code(.alreadyShutDown)

        public var description: String { base.rawValue }
    }

    public let code: Code
    /// A short explanation without secrets.
    public let message: String
    /// Only a bind failure (a port still in use) may go away on its own.
    public var isRetriable: Bool { code == .bind }

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { "SimulatorError.\(code): \(message)" }
}
