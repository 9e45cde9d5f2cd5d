import Foundation

extension HTTP2Client {
    /// Connection, concurrency, timeout and TLS settings for an ``HTTP2Client``.
    package struct Configuration: Sendable {
        /// Connections per host and port (`CURLMOPT_MAX_HOST_CONNECTIONS`). Requests beyond
        /// `maxConnectionsPerHost × maxConcurrentStreamsPerConnection` queue inside libcurl.
        package var maxConnectionsPerHost: Int = 2
        /// Streams per connection (`CURLMOPT_MAX_CONCURRENT_STREAMS`); the server's
        /// `SETTINGS_MAX_CONCURRENT_STREAMS` applies too.
        package var maxConcurrentStreamsPerConnection: Int = 100
        /// Requests accepted at once; beyond this ``HTTP2Client/execute(_:)`` suspends until one finishes.
        package var maxRequestsInFlight: Int = 1000
        /// Threads that drive libcurl, each with its own multi handle and its share of the
        /// connections and in-flight slots; `nil` means one per core, at most one per connection.
        ///
        /// One libcurl thread tops out at about 15,000 small requests per second on this hardware
        /// (libcurl 7.88 does a `send`, several allocations and a header parse per stream); a
        /// second one lets a client with two connections use a second core.
        package var eventLoops: Int? = nil
        /// Timeout for TCP connect plus TLS handshake (`CURLOPT_CONNECTTIMEOUT_MS`).
        package var connectTimeout: Duration = .seconds(10)
        /// Whole-request timeout when ``HTTP2Request/timeout`` is `nil` (`CURLOPT_TIMEOUT_MS`). It
        /// includes the wait for a free slot and the queueing inside libcurl.
        package var defaultRequestTimeout: Duration = .seconds(30)
        /// A PEM file of CA certificates to trust instead of the system store (`CURLOPT_CAINFO`).
        package var caFile: String? = nil
        /// Verify the server certificate chain (`CURLOPT_SSL_VERIFYPEER`). Only tests turn this off.
        package var verifyPeer: Bool = true
        /// Verify that the certificate names the host (`CURLOPT_SSL_VERIFYHOST`).
        package var verifyHost: Bool = true
        /// TCP keep-alive probes on idle connections after this long, and then at this interval
        /// (`CURLOPT_TCP_KEEPALIVE`, `TCP_KEEPIDLE`, `TCP_KEEPINTVL`, whole seconds); `nil` turns
        /// them off.
        ///
        /// This replaces HTTP/2 PINGs: libcurl 7.88 sends those only from `curl_easy_upkeep`,
        /// which serves the easy interface's private connection pool and does nothing for a multi
        /// handle's pool. Idle connections that turn out dead are replaced on next use, and libcurl
        /// does not reuse a connection idle longer than 118 s (`CURLOPT_MAXAGE_CONN`).
        package var tcpKeepAliveInterval: Duration? = .seconds(30)

        package init() {}

        func validate() throws(HTTP2Error) {
            func check(_ condition: Bool, _ what: String) throws(HTTP2Error) {
                guard condition else {
                    throw HTTP2Error(code: .invalidConfiguration, message: what, mayHaveBeenSent: false)
                }
            }
            try check(maxConnectionsPerHost >= 1, "maxConnectionsPerHost must be at least 1")
            try check(maxConcurrentStreamsPerConnection >= 1, "maxConcurrentStreamsPerConnection must be at least 1")
            try check(maxRequestsInFlight >= 1, "maxRequestsInFlight must be at least 1")
            if let eventLoops { try check(eventLoops >= 1, "eventLoops must be at least 1") }
            try check(connectTimeout.milliseconds >= 1, "connectTimeout must be at least 1 ms")
            try check(defaultRequestTimeout.milliseconds >= 1, "defaultRequestTimeout must be at least 1 ms")
            if let tcpKeepAliveInterval {
                try check(tcpKeepAliveInterval >= .seconds(1), "tcpKeepAliveInterval must be at least 1 s")
            }
        }
    }
}

extension HTTP2Client.Configuration {
    /// How many event loops to run: never more than there are connections or slots to share.
    var resolvedEventLoops: Int {
        let wanted = eventLoops ?? ProcessInfo.processInfo.activeProcessorCount
        return max(1, min(wanted, maxConnectionsPerHost, maxRequestsInFlight))
    }

    /// Loop `index`'s share of `count` loops: connections and slots split as evenly as they go.
    func share(_ index: Int, of count: Int) -> Self {
        func part(_ total: Int) -> Int { total / count + (index < total % count ? 1 : 0) }
        var configuration = self
        configuration.maxConnectionsPerHost = part(maxConnectionsPerHost)
        configuration.maxRequestsInFlight = part(maxRequestsInFlight)
        return configuration
    }
}

extension Duration {
    /// Whole milliseconds, rounded up, clamped to `Int`.
    var milliseconds: Int {
        let (seconds, attoseconds) = components
        let (product, overflow) = seconds.multipliedReportingOverflow(by: 1000)
        if overflow { return seconds < 0 ? .min : .max }
        let fraction = attoseconds / 1_000_000_000_000_000
        let remainder = attoseconds % 1_000_000_000_000_000
        return Int(product + fraction + (remainder > 0 ? 1 : 0))
    }
}
