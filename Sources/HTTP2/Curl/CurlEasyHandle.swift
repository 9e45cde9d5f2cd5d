import CCurl
import CShims

/// Owns one `CURL*` easy handle and its error buffer.
///
/// Lives on the client's event-loop thread only: libcurl handles must never be used from two
/// threads, so this type is deliberately not `Sendable`.
final class CurlEasyHandle {
    let raw: UnsafeMutableRawPointer
    /// `CURLOPT_ERRORBUFFER` storage (`CURL_ERROR_SIZE` bytes), re-attached after every reset.
    let errorBuffer: UnsafeMutablePointer<CChar>
    /// The method (and whether it sends a body) whose options, and the loop's fixed ones, are
    /// set, so that the next request of the same shape sets only its own; nil after a reset.
    var configuredShape: String?

    init() throws(HTTP2Error) {
        guard let raw = curl_easy_init() else {
            throw HTTP2Error(code: .other, message: "curl_easy_init failed", mayHaveBeenSent: false)
        }
        self.raw = raw
        errorBuffer = .allocate(capacity: Int(CURL_ERROR_SIZE))
        errorBuffer.initialize(repeating: 0, count: Int(CURL_ERROR_SIZE))
    }

    deinit {
        curl_easy_cleanup(raw)
        errorBuffer.deallocate()
    }

    /// Back to libcurl's defaults; the multi handle keeps the connections.
    func reset() {
        curl_easy_reset(raw)
        errorBuffer[0] = 0
        configuredShape = nil
    }

    func set(_ option: CURLoption, _ value: Int) throws(HTTP2Error) {
        try check(CShims_curl_easy_setopt_long(raw, option, value), option)
    }

    func set(_ option: CURLoption, _ value: Bool) throws(HTTP2Error) {
        try check(CShims_curl_easy_setopt_long(raw, option, value ? 1 : 0), option)
    }

    func set(_ option: CURLoption, int64 value: Int64) throws(HTTP2Error) {
        try check(CShims_curl_easy_setopt_off_t(raw, option, curl_off_t(value)), option)
    }

    /// libcurl copies string options (all but `CURLOPT_POSTFIELDS`, which we pass as a pointer).
    func set(_ option: CURLoption, _ value: String) throws(HTTP2Error) {
        let result = value.withCString { CShims_curl_easy_setopt_string(raw, option, $0) }
        try check(result, option)
    }

    func set(_ option: CURLoption, pointer: UnsafeMutableRawPointer?) throws(HTTP2Error) {
        try check(CShims_curl_easy_setopt_ptr(raw, option, pointer), option)
    }

    func set(_ option: CURLoption, slist: UnsafeMutablePointer<curl_slist>?) throws(HTTP2Error) {
        try check(CShims_curl_easy_setopt_slist(raw, option, slist), option)
    }

    func setWriteFunction(_ callback: CShims_curl_data_callback) throws(HTTP2Error) {
        try check(CShims_curl_easy_setopt_write_function(raw, callback), CURLOPT_WRITEFUNCTION)
    }

    func setHeaderFunction(_ callback: CShims_curl_data_callback) throws(HTTP2Error) {
        try check(CShims_curl_easy_setopt_header_function(raw, callback), CURLOPT_HEADERFUNCTION)
    }

    /// Registers the connections this handle opens in a multi handle's socket set.
    func trackSockets(in set: OpaquePointer) throws(HTTP2Error) {
        try check(CShims_curl_easy_track_sockets(raw, set), CURLOPT_SOCKOPTFUNCTION)
    }

    func info(_ info: CURLINFO) -> Int {
        var value = 0
        return CShims_curl_easy_getinfo_long(raw, info, &value) == CURLE_OK ? value : 0
    }

    func info(int64 info: CURLINFO) -> Int64 {
        var value: curl_off_t = 0
        return CShims_curl_easy_getinfo_off_t(raw, info, &value) == CURLE_OK ? Int64(value) : 0
    }

    func infoPointer(_ info: CURLINFO) -> UnsafeMutableRawPointer? {
        var value: UnsafeMutableRawPointer? = nil
        return CShims_curl_easy_getinfo_ptr(raw, info, &value) == CURLE_OK ? value : nil
    }

    private func check(_ result: CURLcode, _ option: CURLoption) throws(HTTP2Error) {
        guard result == CURLE_OK else {
            throw HTTP2Error(
                code: .other,
                curlCode: Int32(bitPattern: result.rawValue),
                message: "curl_easy_setopt(\(option.rawValue)): \(String(cString: curl_easy_strerror(result)))",
                mayHaveBeenSent: false
            )
        }
    }
}

@available(*, unavailable)
extension CurlEasyHandle: Sendable {}
