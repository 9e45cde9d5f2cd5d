import LiveDelivery
import Postgres
import RabbitMQ

/// What kind of failure an admin command met, for its exit status (`livedelivery --help` lists them).
package enum AdminFailure: Sendable, Hashable {
    /// The operation itself failed (a publish not confirmed, a row not found, an SQL error).
    case operation
    /// The configuration is missing or invalid (a URL, a key, an option the report cannot take).
    case configuration
    /// A server (PostgreSQL or RabbitMQ) could not be reached or dropped the connection.
    case unreachable

    /// Classifies an error of the admin commands. A refused login counts as unreachable: the command
    /// could not get a session, which is what a script retrying later wants to know.
    package init(_ error: any Error) {
        switch error {
        case let error as LiveDeliveryError:
            self = error.code == .invalidConfiguration ? .configuration : .operation
        case let error as PostgresError:
            if error.code == .invalidConfiguration {
                self = .configuration
            } else if error.code == .connectionFailed || error.code == .connectionClosed
                || error.sqlState?.errorClass == "08" || error.sqlState == .cannotConnectNow
                || error.sqlState == .adminShutdown
            {
                self = .unreachable
            } else {
                self = .operation
            }
        case let error as RabbitMQError:
            if error.code == .invalidURL {
                self = .configuration
            } else if error.isConnectionLevel {
                self = .unreachable
            } else {
                self = .operation
            }
        default:
            self = .operation
        }
    }
}
