/// Logger metadata keys used by the HTTP2 module.
enum HTTP2LoggingKeys {
    static let requestID = "http2.request_id"
    static let status = "http2.status"
    static let errorCode = "http2.error"
    static let curlCode = "http2.curl_code"
    static let inFlight = "http2.in_flight"
    static let maxConnectionsPerHost = "http2.max_connections_per_host"
    static let maxConcurrentStreams = "http2.max_concurrent_streams"
    static let curlVersion = "http2.curl_version"
}
