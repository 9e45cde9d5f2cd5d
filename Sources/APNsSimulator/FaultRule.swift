/// A fault injected through the control API (`POST /faults`) or ``RunningSimulator/injectFault(_:)``.
///
/// A rule matches the next `count` requests (default 1), or each request with probability `percent`/100
/// when `percent` is given, optionally only requests to one `token`, of one `kind` (`device`, `broadcast`,
/// `channels`) or naming one `channel` (the `apns-channel-id` header). What it does, in this order:
/// wait `latencyMs`; then `drop` the TCP connection, `stall` (never answer), send `goaway` (with
/// `reason` in its debug data) and close the connection, or answer `status` with `{"reason": reason}`
/// (and a `retry-after` header of `retryAfter` seconds, when given, as APNs may send with 429 or 503).
/// A rule with only `latencyMs` delays the request and then lets it through.
package struct FaultRule: Sendable, Codable, Hashable {
    package var status: Int?
    package var reason: String?
    package var count: Int?
    package var percent: Double?
    package var latencyMs: Int?
    package var goaway: Bool?
    package var drop: Bool?
    package var stall: Bool?
    package var token: String?
    package var retryAfter: Int?
    package var kind: APNsRequestKind?
    package var channel: String?

    package init(
        status: Int? = nil,
        reason: String? = nil,
        count: Int? = nil,
        percent: Double? = nil,
        latencyMs: Int? = nil,
        goaway: Bool = false,
        drop: Bool = false,
        stall: Bool = false,
        token: String? = nil,
        retryAfter: Int? = nil,
        kind: APNsRequestKind? = nil,
        channel: String? = nil
    ) {
        self.status = status
        self.reason = reason
        self.count = count
        self.percent = percent
        self.latencyMs = latencyMs
        self.goaway = goaway ? true : nil
        self.drop = drop ? true : nil
        self.stall = stall ? true : nil
        self.token = token
        self.retryAfter = retryAfter
        self.kind = kind
        self.channel = channel
    }

    /// Whether the rule does anything beyond a delay.
    var interrupts: Bool { status != nil || goaway == true || drop == true || stall == true }
}
