import CCurl
import CShims

/// Owns the `CURLM*` multi handle: its connection pool, and every transfer's progress.
///
/// Only ``wakeup()`` may be called from other threads (libcurl documents `curl_multi_wakeup` as
/// thread-safe); everything else runs on the event-loop thread. The event loop calls
/// ``wakeup()`` only while it holds its lock and the loop has not stopped, so a wakeup never races
/// ``cleanup()``. Hence `@unchecked Sendable`.
final class CurlMultiHandle: @unchecked Sendable {
    let raw: UnsafeMutableRawPointer
    /// The connections' sockets (see ``track(_:)`` and ``corked(_:)``); freed after the multi handle,
    /// which closes them through it.
    private let sockets: OpaquePointer
    private var cleanedUp = false

    init() throws(HTTP2Error) {
        guard let sockets = CShims_curl_socket_set_create() else {
            throw HTTP2Error(code: .other, message: "out of memory for the socket set", mayHaveBeenSent: false)
        }
        guard let raw = curl_multi_init() else {
            CShims_curl_socket_set_destroy(sockets)
            throw HTTP2Error(code: .other, message: "curl_multi_init failed", mayHaveBeenSent: false)
        }
        self.raw = raw
        self.sockets = sockets
    }

    deinit {
        cleanup()
    }

    func set(_ option: CURLMoption, _ value: Int) throws(HTTP2Error) {
        let result = CShims_curl_multi_setopt_long(raw, option, value)
        guard result == CURLM_OK else { throw HTTP2Error(multiCode: result, during: "curl_multi_setopt") }
    }

    /// Makes the connections `easy` opens part of this handle's socket set.
    func track(_ easy: CurlEasyHandle) throws(HTTP2Error) {
        try easy.trackSockets(in: sockets)
    }

    /// Runs `body` with every connection corked (`TCP_CORK`), and uncorks them after it: libcurl
    /// 7.88 writes each HTTP/2 frame with its own `send`, so a pass that starts a hundred streams
    /// would otherwise push a few hundred tiny segments through the network stack one by one.
    /// Uncorking sends what was held back at once. Costs two `setsockopt` per connection, so the
    /// loop uses it only when a pass has several transfers to drive.
    func corked<T>(_ body: () -> T) -> T {
        guard CShims_curl_socket_set_count(sockets) > 0 else { return body() }
        CShims_curl_socket_set_cork(sockets, 1)
        defer { CShims_curl_socket_set_cork(sockets, 0) }
        return body()
    }

    /// Interrupts a `curl_multi_poll` in progress (or makes the next one return at once).
    func wakeup() {
        _ = curl_multi_wakeup(raw)
    }

    /// Event-loop thread only, after every easy handle is removed.
    func cleanup() {
        guard !cleanedUp else { return }
        cleanedUp = true
        curl_multi_cleanup(raw)
        CShims_curl_socket_set_destroy(sockets)
    }
}

extension HTTP2Error {
    init(multiCode: CURLMcode, during call: String) {
        self.init(
            code: .other,
            message: "\(call): \(String(cString: curl_multi_strerror(multiCode)))",
            mayHaveBeenSent: false
        )
    }
}
