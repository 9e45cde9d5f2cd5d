package import Logging
import Synchronization

/// An HTTP/2 client over libcurl's multi interface: many concurrent requests multiplexed over a
/// few long-lived TLS connections per host.
///
/// One dedicated thread owns all libcurl state; ``execute(_:)`` hands the request over and
/// suspends until the response (or an error) is back, without blocking the cooperative pool.
/// Connections are opened on demand and replaced by libcurl when they die (server restart,
/// GOAWAY): the requests on a dying connection fail with a retriable ``HTTP2Error``, later ones
/// open a new connection.
///
/// Call ``shutdown()`` when done; dropping the last reference also stops the thread, after the
/// requests in flight finish.
package final class HTTP2Client: Sendable {
    /// Counters since the client started.
    package struct Statistics: Hashable, Sendable {
        /// Connections opened (sum of `CURLINFO_NUM_CONNECTS` over finished transfers).
        package var connectionsOpened: Int
        /// Transfers that ended with a response (any status).
        package var requestsCompleted: Int
        /// Transfers that ended with an ``HTTP2Error`` (including cancelled ones).
        package var requestsFailed: Int
        /// Requests holding one of the ``Configuration/maxRequestsInFlight`` slots right now.
        package var inFlight: Int
    }

    package let configuration: Configuration
    private let loops: [CurlEventLoop]
    private let nextRequestID = Atomic<UInt64>(0)

    /// Starts the client's thread; no connection is opened until the first request.
    package init(configuration: Configuration = Configuration(), logger: Logger) throws(HTTP2Error) {
        try configuration.validate()
        self.configuration = configuration
        let count = configuration.resolvedEventLoops
        var loops: [CurlEventLoop] = []
        for index in 0..<count {
            loops.append(try CurlEventLoop(configuration: configuration.share(index, of: count), logger: logger))
        }
        self.loops = loops
        for loop in loops { loop.start() }
    }

    deinit {
        for loop in loops { loop.requestShutdown() }
    }

    /// Sends `request` and returns the complete response, whatever its status.
    ///
    /// Suspends while ``Configuration/maxRequestsInFlight`` requests are in flight. Cancelling the
    /// calling task aborts the transfer (resetting its stream) and throws ``HTTP2Error/Code/cancelled``.
    /// - Throws: ``HTTP2Error`` when no complete response arrived.
    package func execute(_ request: HTTP2Request) async throws(HTTP2Error) -> HTTP2Response {
        let started = ContinuousClock.now
        let timeout = request.timeout ?? configuration.defaultRequestTimeout
        let id = nextRequestID.wrappingAdd(1, ordering: .relaxed).newValue
        let context = try RequestContext(id: id, request: request)
        if Task.isCancelled { throw .cancelledError(mayHaveBeenSent: false) }

        // The loop with the fewest requests, the first on a tie: a quiet client keeps reusing one
        // connection, a busy one spreads over every loop's connections.
        let loop = loops.count == 1 ? loops[0] : loops.min { $0.load < $1.load }!
        loop.assign()
        defer { loop.unassign() }
        if case .failed(let error) = await loop.acquireSlot(id: id) { throw error }
        // The wait for a slot counts against the request's timeout.
        let remaining = (timeout - (ContinuousClock.now - started)).milliseconds
        guard remaining > 0 else {
            loop.releaseSlot()
            throw HTTP2Error(
                code: .timedOut,
                message: "timed out waiting for one of \(configuration.maxRequestsInFlight) in-flight slots",
                mayHaveBeenSent: false
            )
        }
        context.timeoutMilliseconds = remaining

        let result = await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                context.continuation = continuation
                loop.submit(context)
            }
        } onCancel: {
            loop.cancel(context)
        }
        return try result.get()
    }

    /// A snapshot of the counters.
    package var statistics: Statistics {
        loops.map(\.statistics).reduce(
            Statistics(connectionsOpened: 0, requestsCompleted: 0, requestsFailed: 0, inFlight: 0)
        ) {
            Statistics(
                connectionsOpened: $0.connectionsOpened + $1.connectionsOpened,
                requestsCompleted: $0.requestsCompleted + $1.requestsCompleted,
                requestsFailed: $0.requestsFailed + $1.requestsFailed, inFlight: $0.inFlight + $1.inFlight)
        }
    }

    /// Stops taking requests (they throw ``HTTP2Error/Code/shutdown``), fails those waiting for a
    /// slot, waits for the ones in flight (each bounded by its timeout), then closes the
    /// connections and stops the thread. Safe to call more than once.
    package func shutdown() async {
        // Every loop stops taking requests first, then each drains.
        for loop in loops { loop.requestShutdown() }
        for loop in loops { await loop.shutdown() }
    }
}
