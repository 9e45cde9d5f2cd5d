/// One HTTP request for ``HTTP2Client/execute(_:)``.
///
/// Only the headers given here are sent besides the ones HTTP/2 requires (`:method`, `:path`,
/// `:scheme`, `:authority`) and `content-length`; in particular no `content-type`, `accept` or
/// `expect` is added.
package struct HTTP2Request: Sendable {
    /// The method, upper case. Default `POST`.
    package var method: String
    /// An absolute `https://` URL. (`http://` works too but speaks HTTP/1.1: this client never uses h2c.)
    package var url: String
    /// Header fields in order. Names are sent lower case; names may not start with `:` and values
    /// may not contain CR, LF or NUL.
    package var headers: [(name: String, value: String)]
    /// The request body; sent for every method except `GET` and `HEAD` when not empty, and always for `POST`.
    package var body: [UInt8]
    /// The whole-request timeout; `nil` uses ``HTTP2Client/Configuration/defaultRequestTimeout``.
    package var timeout: Duration?

    package init(
        method: String = "POST",
        url: String,
        headers: [(name: String, value: String)] = [],
        body: [UInt8] = [],
        timeout: Duration? = nil
    ) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
        self.timeout = timeout
    }
}
