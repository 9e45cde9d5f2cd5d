/// An error from ``HTTP2Client``: the transfer failed before a complete response arrived.
///
/// An HTTP status such as 404 or 500 is *not* an error: it comes back as an ``HTTP2Response``.
/// The description never contains the request body or header values; ``message`` is libcurl's
/// error text, which names at most the host and port.
package struct HTTP2Error: Error, Sendable, CustomStringConvertible {
    /// What went wrong, in the terms a caller can act on.
    package struct Code: Hashable, Sendable, CustomStringConvertible {
        fileprivate enum Base: String, Sendable {
            case timedOut, couldNotConnect, tls, http2, sendFailed, receiveFailed, cancelled, shutdown
            case invalidRequest, invalidConfiguration, other
        }

        fileprivate let base: Base

        /// The request timeout (or connect timeout) passed; queueing inside the client counts.
        package static let timedOut = Code(base: .timedOut)
        /// No TCP connection could be made (refused, unreachable, name not resolved).
        package static let couldNotConnect = Code(base: .couldNotConnect)
        /// The TLS handshake failed: certificate verification, protocol or cipher mismatch.
        package static let tls = Code(base: .tls)
        /// An HTTP/2 stream or framing error, including a GOAWAY or RST_STREAM from the server.
        package static let http2 = Code(base: .http2)
        /// Writing to the connection failed (for example the server closed it).
        package static let sendFailed = Code(base: .sendFailed)
        /// Reading from the connection failed or it closed before the response was complete.
        package static let receiveFailed = Code(base: .receiveFailed)
        /// The calling task was cancelled; the transfer was aborted.
        package static let cancelled = Code(base: .cancelled)
        /// The client is shutting down or shut down and takes no new requests.
        package static let shutdown = Code(base: .shutdown)
        /// The request cannot be sent as given (bad header name or value, empty URL).
        package static let invalidRequest = Code(base: .invalidRequest)
        /// ``HTTP2Client/Configuration`` holds a value out of range.
        package static let invalidConfiguration = Code(base: .invalidConfiguration)
        /// Any other libcurl failure; see ``HTTP2Error/curlCode``.
        package static let other = Code(base: .other)

        package var description: String { base.rawValue }
    }

    /// What went wrong.
    package let code: Code
    /// The raw `CURLcode`, or 0 when the error did not come from libcurl.
    package let curlCode: Int32
    /// libcurl's error text (its error buffer, or `curl_easy_strerror`), or our own explanation.
    package let message: String
    /// Whether the request may have reached the server, so a retry may duplicate it.
    ///
    /// `false` only when the client knows nothing was sent: no connection, a failed TLS
    /// handshake, or a transfer that never left the queue.
    package let mayHaveBeenSent: Bool

    package init(code: Code, curlCode: Int32 = 0, message: String, mayHaveBeenSent: Bool) {
        self.code = code
        self.curlCode = curlCode
        self.message = message
        self.mayHaveBeenSent = mayHaveBeenSent
    }

    /// Whether the same request may succeed if sent again (on a new or another connection).
    ///
    /// Timeouts, connection failures, HTTP/2 stream errors (GOAWAY, reset) and send/receive
    /// failures are retriable; a TLS handshake failure is retriable only when it is a connection
    /// reset during the handshake (`CURLE_SSL_CONNECT_ERROR`), not a certificate problem.
    /// Check ``mayHaveBeenSent`` before retrying non-idempotent requests.
    package var isRetriable: Bool {
        switch code.base {
        case .timedOut, .couldNotConnect, .http2, .sendFailed, .receiveFailed:
            true
        case .tls:
            curlCode == 35  // CURLE_SSL_CONNECT_ERROR: e.g. reset by peer during the handshake
        case .cancelled, .shutdown, .invalidRequest, .invalidConfiguration, .other:
            false
        }
    }

    package var description: String {
        var text = "HTTP2Error(\(code)"
        if curlCode != 0 { text += ", curl: \(curlCode)" }
        text += ", mayHaveBeenSent: \(mayHaveBeenSent), \(message))"
        return text
    }
}
