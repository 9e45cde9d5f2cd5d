import CCurl

/// One request on its way through the event loop: the C data libcurl reads while it runs, and the
/// response as it arrives.
///
/// `@unchecked Sendable` because its mutable state has a strict hand-over: the calling task sets
/// ``continuation`` and then appends the context to the loop's lock-protected queue; from then on
/// only the event-loop thread touches it (``timeoutMilliseconds``, ``continuation``, the easy
/// handle, ``status``, ``headers``, ``body``), and the loop resumes the continuation exactly once.
/// The cancellation handler only passes the reference back to the loop through the same queue.
final class RequestContext: @unchecked Sendable {
    let id: UInt64
    let method: String
    let url: String
    /// `CURLOPT_HTTPHEADER` list, freed in `deinit` (after libcurl is done with the transfer).
    let headerList: UnsafeMutablePointer<curl_slist>?
    /// The body for `CURLOPT_POSTFIELDS`: libcurl does not copy it, so it lives as long as we do.
    let body: UnsafeMutableRawBufferPointer
    /// Bytes of ``body`` in use (the buffer has at least one byte so its pointer is never null).
    let bodyCount: Int
    let sendsBody: Bool

    var timeoutMilliseconds = 0
    var continuation: CheckedContinuation<Result<HTTP2Response, HTTP2Error>, Never>?

    // Event-loop thread only.
    var easy: CurlEasyHandle?
    var responseHeaders: [(name: String, value: String)] = []
    var responseBody: [UInt8] = []

    init(id: UInt64, request: HTTP2Request) throws(HTTP2Error) {
        func invalid(_ message: String) -> HTTP2Error {
            HTTP2Error(code: .invalidRequest, message: message, mayHaveBeenSent: false)
        }
        guard !request.url.isEmpty, !request.url.utf8.contains(where: Self.isForbiddenInValue) else {
            throw invalid("the URL is empty or contains control characters")
        }
        let method = request.method.uppercased()
        guard !method.isEmpty, method.utf8.allSatisfy(Self.isTokenCharacter) else {
            throw invalid("the method is not an HTTP token")
        }

        var list: UnsafeMutablePointer<curl_slist>? = nil
        var hasContentType = false
        var hasAccept = false
        for (name, value) in request.headers {
            guard !name.isEmpty, name.utf8.allSatisfy(Self.isTokenCharacter) else {
                curl_slist_free_all(list)
                throw invalid("a header name is empty or not an HTTP token")
            }
            guard !value.utf8.contains(where: Self.isForbiddenInValue) else {
                curl_slist_free_all(list)
                throw invalid("the value of a header contains CR, LF or NUL")
            }
            let lowered = name.lowercased()
            if lowered == "content-type" { hasContentType = true }
            if lowered == "accept" { hasAccept = true }
            // libcurl sends "name;" as a header with an empty value ("name:" would remove it).
            list = Self.append(list, value.isEmpty ? "\(lowered);" : "\(lowered): \(value)")
        }
        // Remove what libcurl would add on its own: no 100-continue round trip, no form
        // content type for POSTFIELDS, no "accept: */*".
        list = Self.append(list, "Expect:")
        if !hasContentType { list = Self.append(list, "Content-Type:") }
        if !hasAccept { list = Self.append(list, "Accept:") }

        self.id = id
        self.method = method
        self.url = request.url
        self.headerList = list
        self.sendsBody = method == "POST" || (!request.body.isEmpty && method != "GET" && method != "HEAD")
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: max(request.body.count, 1), alignment: 1)
        request.body.withUnsafeBytes { bytes in
            if bytes.count > 0 { buffer.copyMemory(from: bytes) }
        }
        self.body = buffer
        self.bodyCount = request.body.count
    }

    deinit {
        curl_slist_free_all(headerList)
        body.deallocate()
    }

    // MARK: Callbacks (event-loop thread)

    /// One header line from `CURLOPT_HEADERFUNCTION`, with its CRLF.
    func receiveHeaderLine(_ line: UnsafeRawBufferPointer) {
        var end = line.count
        while end > 0, line[end - 1] == UInt8(ascii: "\n") || line[end - 1] == UInt8(ascii: "\r") { end -= 1 }
        guard end > 0 else { return }  // blank line: end of a header block
        let bytes = UnsafeRawBufferPointer(rebasing: line[0..<end])
        if bytes.starts(with: "HTTP/".utf8) {
            // A new status line (an interim 1xx response came first): keep only the final headers.
            responseHeaders.removeAll(keepingCapacity: true)
            return
        }
        guard let colon = bytes.firstIndex(of: UInt8(ascii: ":")) else { return }
        let name = String(decoding: bytes[..<colon].lazy.map(Self.asciiLowercased), as: UTF8.self)
        var start = colon + 1
        var stop = bytes.count
        while start < stop, bytes[start] == UInt8(ascii: " ") || bytes[start] == UInt8(ascii: "\t") { start += 1 }
        while stop > start, bytes[stop - 1] == UInt8(ascii: " ") || bytes[stop - 1] == UInt8(ascii: "\t") { stop -= 1 }
        let value = String(decoding: UnsafeRawBufferPointer(rebasing: bytes[start..<stop]), as: UTF8.self)
        responseHeaders.append((name: name, value: value))
    }

    /// Body bytes from `CURLOPT_WRITEFUNCTION`.
    func receiveBody(_ bytes: UnsafeRawBufferPointer) {
        responseBody.append(contentsOf: bytes)
    }

    // MARK: Helpers

    private static func append(
        _ list: UnsafeMutablePointer<curl_slist>?,
        _ line: String
    ) -> UnsafeMutablePointer<curl_slist>? {
        // curl_slist_append copies the string; it returns NULL only when out of memory.
        line.withCString { curl_slist_append(list, $0) } ?? list
    }

    private static func isForbiddenInValue(_ byte: UInt8) -> Bool {
        byte == 0 || byte == UInt8(ascii: "\r") || byte == UInt8(ascii: "\n")
    }

    /// RFC 9110 `tchar`.
    private static func isTokenCharacter(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"):
            true
        default:
            "!#$%&'*+-.^_`|~".utf8.contains(byte)
        }
    }

    private static func asciiLowercased(_ byte: UInt8) -> UInt8 {
        byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z") ? byte + 32 : byte
    }
}
