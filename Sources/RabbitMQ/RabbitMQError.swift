import CRabbitMQ

/// The one error type of the RabbitMQ module.
///
/// `description` never contains passwords, message bodies or headers: only the error kind, the
/// broker's reply code and text (which name queues/exchanges, not payloads) and the library status.
package struct RabbitMQError: Error, Sendable, CustomStringConvertible, CustomDebugStringConvertible {
    /// What went wrong. A struct over a private enum so that new codes are not a breaking change.
    package struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Base: String, Hashable, Sendable {
            case invalidURL, connectFailed, tlsFailed, authenticationFailed
            case connectionClosed, channelClosed, socketError, heartbeatTimeout, protocolError
            case consumerCancelled, publishNacked, unroutable, staleDelivery, alreadyClosed, resourceExhausted
        }
        private let base: Base
        private init(_ base: Base) { self.base = base }

        /// The AMQP URL (or configuration) is malformed. Not retriable.
        package static let invalidURL = Code(.invalidURL)
        /// TCP connect, name resolution or the connect timeout failed.
        package static let connectFailed = Code(.connectFailed)
        /// TLS setup, handshake or certificate verification failed.
        package static let tlsFailed = Code(.tlsFailed)
        /// The broker refused the credentials (`403 ACCESS_REFUSED` during login).
        package static let authenticationFailed = Code(.authenticationFailed)
        /// The broker sent `connection.close` (`replyCode`/`replyText`, e.g. 320 CONNECTION_FORCED).
        package static let connectionClosed = Code(.connectionClosed)
        /// The broker sent `channel.close` (`replyCode`/`replyText`, e.g. 404 NOT_FOUND, 406 PRECONDITION_FAILED).
        package static let channelClosed = Code(.channelClosed)
        /// The socket failed or was closed by the peer without `connection.close`.
        package static let socketError = Code(.socketError)
        /// Nothing was received for two heartbeat intervals.
        package static let heartbeatTimeout = Code(.heartbeatTimeout)
        /// The library could not decode what the broker sent, or was in an unexpected state.
        package static let protocolError = Code(.protocolError)
        /// The broker cancelled the consumer (`basic.cancel`: queue deleted, leader moved, …).
        package static let consumerCancelled = Code(.consumerCancelled)
        /// The broker answered a publish with `basic.nack`.
        package static let publishNacked = Code(.publishNacked)
        /// A `mandatory` publish was returned (`basic.return`, normally 312 NO_ROUTE).
        package static let unroutable = Code(.unroutable)
        /// The channel or connection that received this delivery is gone; the broker has requeued
        /// the message, so its tag must not (and cannot) be acknowledged any more.
        package static let staleDelivery = Code(.staleDelivery)
        /// The connection (or consumer) was closed by the application.
        package static let alreadyClosed = Code(.alreadyClosed)
        /// Out of memory, out of channel numbers, or a similar local limit.
        package static let resourceExhausted = Code(.resourceExhausted)

        package var description: String { base.rawValue }
    }

    /// A rabbitmq-c status code (`amqp_status_enum`, negative), with the library's text.
    package struct LibraryStatus: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        package var rawValue: Int32
        package init(rawValue: Int32) { self.rawValue = rawValue }
        package var description: String {
            guard let text = amqp_error_string2(rawValue) else { return "status \(rawValue)" }
            return "\(String(cString: text)) (\(rawValue))"
        }
    }

    package var code: Code
    /// The broker's reply code for `connectionClosed`, `channelClosed`, `unroutable`.
    package var replyCode: UInt16?
    /// The broker's reply text, e.g. "CONNECTION_FORCED - broker forced connection closure …".
    package var replyText: String?
    /// The raw rabbitmq-c status when the library reported the failure.
    package var libraryStatus: LibraryStatus?
    /// Short context without secrets or payloads, e.g. "queue.declare", "missing host".
    package var context: String?
    package var file: String
    package var line: Int

    package init(
        code: Code,
        replyCode: UInt16? = nil,
        replyText: String? = nil,
        libraryStatus: LibraryStatus? = nil,
        context: String? = nil,
        file: String = #fileID,
        line: Int = #line
    ) {
        self.code = code
        self.replyCode = replyCode
        self.replyText = replyText
        self.libraryStatus = libraryStatus
        self.context = context
        self.file = file
        self.line = line
    }

    /// Whether doing the same thing again (on a new connection where the connection is gone) may
    /// succeed: broker restarts, network failures, heartbeat timeouts, nacks, consumer cancels,
    /// resource errors (506 RESOURCE_ERROR, 541 INTERNAL_ERROR, 405 RESOURCE_LOCKED). Not
    /// retriable: bad URLs, refused credentials, unroutable messages, 404/406/403 channel errors.
    package var isRetriable: Bool {
        switch code {
        case .connectFailed, .socketError, .heartbeatTimeout, .consumerCancelled, .publishNacked, .staleDelivery,
            .protocolError:
            return true
        case .connectionClosed:
            // 320 CONNECTION_FORCED (shutdown, management close), 506 RESOURCE_ERROR, 541 INTERNAL_ERROR.
            return [320, 506, 541].contains(replyCode ?? 320)
        case .channelClosed:
            return replyCode == 405 || replyCode == 506 || replyCode == 541
        default:
            return false
        }
    }

    /// Whether the whole connection is unusable after this error (the application must connect again).
    package var isConnectionLevel: Bool {
        switch code {
        case .connectFailed, .tlsFailed, .authenticationFailed, .connectionClosed, .socketError, .heartbeatTimeout,
            .protocolError, .alreadyClosed:
            true
        default:
            false
        }
    }

    package var description: String {
        var text = "RabbitMQError.\(code)"
        if let context { text += " (\(context))" }
        if let replyCode {
            text += ": \(replyCode)"
            if let replyText { text += " \(replyText)" }
        } else if let replyText {
            text += ": \(replyText)"
        }
        if let libraryStatus { text += " [\(libraryStatus)]" }
        return text
    }

    package var debugDescription: String { "\(description) at \(file):\(line)" }
}

extension RabbitMQError {
    /// Classifies a rabbitmq-c status code.
    static func library(_ status: Int32, context: String? = nil, file: String = #fileID, line: Int = #line) -> Self {
        let code: Code
        switch status {
        case AMQP_STATUS_HEARTBEAT_TIMEOUT.rawValue:
            code = .heartbeatTimeout
        case AMQP_STATUS_HOSTNAME_RESOLUTION_FAILED.rawValue, AMQP_STATUS_TIMEOUT.rawValue:
            code = .connectFailed
        case AMQP_STATUS_SOCKET_ERROR.rawValue, AMQP_STATUS_CONNECTION_CLOSED.rawValue,
            AMQP_STATUS_SOCKET_CLOSED.rawValue, AMQP_STATUS_TCP_ERROR.rawValue,
            AMQP_STATUS_TCP_SOCKETLIB_INIT_ERROR.rawValue:
            code = .socketError
        case AMQP_STATUS_SSL_ERROR.rawValue, AMQP_STATUS_SSL_HOSTNAME_VERIFY_FAILED.rawValue,
            AMQP_STATUS_SSL_PEER_VERIFY_FAILED.rawValue, AMQP_STATUS_SSL_CONNECTION_FAILED.rawValue,
            AMQP_STATUS_SSL_SET_ENGINE_FAILED.rawValue:
            code = .tlsFailed
        case AMQP_STATUS_NO_MEMORY.rawValue, AMQP_STATUS_TABLE_TOO_BIG.rawValue:
            code = .resourceExhausted
        case AMQP_STATUS_BAD_URL.rawValue:
            code = .invalidURL
        default:
            code = .protocolError
        }
        return RabbitMQError(
            code: code, libraryStatus: LibraryStatus(rawValue: status), context: context, file: file,
            line: line)
    }
}
