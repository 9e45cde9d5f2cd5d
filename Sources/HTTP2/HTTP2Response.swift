/// A complete HTTP response: any status, including 4xx and 5xx.
package struct HTTP2Response: Sendable {
    /// The HTTP status code.
    package var status: Int
    /// Response header fields in order, names lower case, without the status line.
    package var headers: [(name: String, value: String)]
    /// The response body.
    package var body: [UInt8]
    /// The protocol version the response came over; ``HTTPVersion/http2`` for `https` URLs.
    package var httpVersion: HTTPVersion

    package init(status: Int, headers: [(name: String, value: String)], body: [UInt8], httpVersion: HTTPVersion) {
        self.status = status
        self.headers = headers
        self.body = body
        self.httpVersion = httpVersion
    }

    /// The value of the first header field called `name` (case-insensitive), or `nil`.
    package func header(_ name: String) -> String? {
        let lowered = name.lowercased()
        return headers.first { $0.name == lowered }?.value
    }
}

/// An HTTP protocol version.
package struct HTTPVersion: Hashable, Sendable, CustomStringConvertible {
    package var major: Int
    package var minor: Int

    package init(major: Int, minor: Int) {
        self.major = major
        self.minor = minor
    }

    // swift-format-ignore: AlwaysUseLowerCamelCase
    package static let http1_0 = HTTPVersion(major: 1, minor: 0)
    // swift-format-ignore: AlwaysUseLowerCamelCase
    package static let http1_1 = HTTPVersion(major: 1, minor: 1)
    package static let http2 = HTTPVersion(major: 2, minor: 0)
    package static let http3 = HTTPVersion(major: 3, minor: 0)

    package var description: String { minor == 0 && major >= 2 ? "HTTP/\(major)" : "HTTP/\(major).\(minor)" }
}
