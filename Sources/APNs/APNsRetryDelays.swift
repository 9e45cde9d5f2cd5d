/// Delays suggested to the worker in ``APNsOutcome/retryLater(reason:status:after:)``, per cause (a
/// `Retry-After` header wins when present). Apart from the client's configuration so that the
/// classification needs nothing else (scripts/fuzz compiles it alone).
package struct APNsRetryDelays: Sendable, Hashable {
    /// 429 `TooManyRequests`.
    package var tooManyRequests: Duration = .seconds(10)
    /// 429 `TooManyProviderTokenUpdates` (the shared token will be accepted again).
    package var tooManyProviderTokenUpdates: Duration = .seconds(5)
    /// 500, 503 and other 5xx.
    package var serverError: Duration = .seconds(30)
    /// Timeouts, lost connections, `IdleTimeout`.
    package var transport: Duration = .seconds(1)

    package init() {}
}
