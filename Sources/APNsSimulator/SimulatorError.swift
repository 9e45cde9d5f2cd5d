/// The one error type of the simulator module.
package struct SimulatorError: Error, Sendable, CustomStringConvertible {
    /// What went wrong, as a value that may grow.
    package struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Base: String { case invalidConfiguration, certificate, bind, alreadyShutDown }
        private let base: Base
        private init(_ base: Base) { self.base = base }

        /// A flag, key, shape or certificate option is unusable.
        package static let invalidConfiguration = Code(.invalidConfiguration)
        /// The self-signed certificate could not be made, or the given one could not be loaded.
        package static let certificate = Code(.certificate)
        /// A listener could not bind its address.
        package static let bind = Code(.bind)
        /// The simulator was already shut down.
        package static let alreadyShutDown = Code(.alreadyShutDown)

        package var description: String { base.rawValue }
    }

    package let code: Code
    /// A short explanation without secrets.
    package let message: String
    /// Only a bind failure (a port still in use) may go away on its own.
    package var isRetriable: Bool { code == .bind }

    package init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    package var description: String { "SimulatorError.\(code): \(message)" }
}
