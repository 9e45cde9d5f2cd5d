import CCurl

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Process-wide libcurl set-up, done exactly once (Swift initialises globals once, thread-safely).
///
/// Also ignores SIGPIPE: with `CURLOPT_NOSIGNAL` set, OpenSSL writes to a closed socket can raise
/// it, and Swift on Linux does not ignore it for us.
enum CurlGlobal {
    private static let initResult: CURLcode = {
        signal(SIGPIPE, SIG_IGN)
        return curl_global_init(Int(CURL_GLOBAL_DEFAULT))
    }()

    static func initialize() throws(HTTP2Error) {
        let result = initResult
        guard result == CURLE_OK else {
            throw HTTP2Error(curlCode: result, errorBuffer: nil, mayHaveBeenSent: false)
        }
    }

    /// `libcurl/7.88.1 OpenSSL/3.0.x … nghttp2/1.52.0`.
    static var version: String { String(cString: curl_version()) }
}

extension HTTP2Error {
    /// Classifies a failed transfer's `CURLcode`.
    init(curlCode: CURLcode, errorBuffer: UnsafePointer<CChar>?, mayHaveBeenSent: Bool) {
        let code: Code
        switch curlCode {
        case CURLE_OPERATION_TIMEDOUT:
            code = .timedOut
        case CURLE_COULDNT_CONNECT, CURLE_COULDNT_RESOLVE_HOST, CURLE_COULDNT_RESOLVE_PROXY:
            code = .couldNotConnect
        case CURLE_SSL_CONNECT_ERROR, CURLE_PEER_FAILED_VERIFICATION, CURLE_SSL_CERTPROBLEM, CURLE_SSL_CIPHER,
            CURLE_SSL_CACERT_BADFILE, CURLE_SSL_ENGINE_NOTFOUND, CURLE_SSL_ENGINE_SETFAILED,
            CURLE_SSL_ENGINE_INITFAILED, CURLE_SSL_CRL_BADFILE, CURLE_SSL_ISSUER_ERROR,
            CURLE_SSL_PINNEDPUBKEYNOTMATCH, CURLE_SSL_INVALIDCERTSTATUS, CURLE_SSL_CLIENTCERT:
            code = .tls
        case CURLE_HTTP2, CURLE_HTTP2_STREAM:
            code = .http2
        case CURLE_SEND_ERROR:
            code = .sendFailed
        case CURLE_RECV_ERROR, CURLE_GOT_NOTHING, CURLE_PARTIAL_FILE:
            code = .receiveFailed
        default:
            code = .other
        }
        var message = ""
        if let errorBuffer, errorBuffer.pointee != 0 {
            message = String(cString: errorBuffer)
        } else {
            message = String(cString: curl_easy_strerror(curlCode))
        }
        self.init(code: code, curlCode: Int32(bitPattern: curlCode.rawValue), message: message, mayHaveBeenSent: mayHaveBeenSent)
    }
}
