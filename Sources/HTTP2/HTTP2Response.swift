/// A complete HTTP response: any status, including 4xx and 5xx.
public struct HTTP2Response: Sendable {
    /// The HTTP status code.
    public var status: Int
    /// Response header fields in order, names lower case, without the status line.
    public var headers: [(name: String, value: String)]
    /// The response body.
    public var body: [UInt8]
    /// The protocol version the response came over; ``HTTPVersion/http2`` for `https` URLs.
    public var httpVersion: HTTPVersion

    public init(status: Int, headers: [(name: String, value: String)], body: [UInt8], httpVersion: HTTPVersion) {
        self.status = status
        self.headers = headers
        self.body = body
        self.httpVersion = httpVersion
    }

    /// The value of the first header field called `name` (case-insensitive), or `nil`.
    public func header(_ name: String) -> String? {
        let lowered = name.lowercased()
        return headers.first { $0.name == lowered }?.value
    }
}

/// An HTTP protocol version.
public struct HTTPVersion: Hashable, Sendable, CustomStringConvertible {
    public var major: Int
    public var minor: Int

    public init(major: Int, minor: Int) {
        self.major = major
        self.minor = minor
    }

    public static let http1_0 = HTTPVersion(major: 1, minor: 0)
    public static let http1_1 = HTTPVersion(major: 1, minor: 1)
    public static let http2 = HTTPVersion(major: 2, minor: 0)
    public static let http3 = HTTPVersion(major: 3, minor: 0)

    public var description: String { minor == 0 && major >= 2 ? "HTTP/\(major)" : "HTTP/\(major).\(minor)" }
}
