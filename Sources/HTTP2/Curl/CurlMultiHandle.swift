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
    private var cleanedUp = false

    init() throws(HTTP2Error) {
        guard let raw = curl_multi_init() else {
            throw HTTP2Error(code: .other, message: "curl_multi_init failed", mayHaveBeenSent: false)
        }
        self.raw = raw
    }

    deinit {
        cleanup()
    }

    func set(_ option: CURLMoption, _ value: Int) throws(HTTP2Error) {
        let result = CShims_curl_multi_setopt_long(raw, option, value)
        guard result == CURLM_OK else { throw HTTP2Error(multiCode: result, during: "curl_multi_setopt") }
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
