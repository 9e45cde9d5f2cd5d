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
    /// `CURLOPT_HTTPHEADER`, freed in `deinit` (after libcurl is done with the transfer).
    let headerList: HeaderList
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

        var hasContentType = false
        var hasAccept = false
        for (name, value) in request.headers {
            guard !name.isEmpty, name.utf8.allSatisfy(Self.isTokenCharacter) else {
                throw invalid("a header name is empty or not an HTTP token")
            }
            guard !value.utf8.contains(where: Self.isForbiddenInValue) else {
                throw invalid("the value of a header contains CR, LF or NUL")
            }
            if Self.equalsIgnoringCase(name, "content-type") { hasContentType = true }
            if Self.equalsIgnoringCase(name, "accept") { hasAccept = true }
        }
        // Remove what libcurl would add on its own: no 100-continue round trip, no form
        // content type for POSTFIELDS, no "accept: */*".
        var removals: [StaticString] = ["Expect:"]
        if !hasContentType { removals.append("Content-Type:") }
        if !hasAccept { removals.append("Accept:") }
        headerList = HeaderList(request.headers, removals: removals)

        self.id = id
        self.method = method
        self.url = request.url
        self.sendsBody = method == "POST" || (!request.body.isEmpty && method != "GET" && method != "HEAD")
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: max(request.body.count, 1), alignment: 1)
        request.body.withUnsafeBytes { bytes in
            if bytes.count > 0 { buffer.copyMemory(from: bytes) }
        }
        self.body = buffer
        self.bodyCount = request.body.count
    }

    deinit {
        headerList.deallocate()
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

    private static func equalsIgnoringCase(_ name: String, _ lowercased: String) -> Bool {
        name.utf8.count == lowercased.utf8.count
            && zip(name.utf8, lowercased.utf8).allSatisfy { asciiLowercased($0) == $1 }
    }

    fileprivate static func asciiLowercased(_ byte: UInt8) -> UInt8 {
        byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z") ? byte + 32 : byte
    }
}

/// A `curl_slist` for `CURLOPT_HTTPHEADER` built in one allocation: the nodes first, then their
/// NUL-terminated lines (`name: value`, names in lower case; `name;` for an empty value, which
/// libcurl sends as a header with no value, where `name:` would remove it). libcurl only reads the
/// list, so it need not come from `curl_slist_append`, which costs two allocations per line.
struct HeaderList {
    private let storage: UnsafeMutableRawPointer?

    /// `headers` are valid (token names, no CR, LF or NUL in values); `removals` are lines as given.
    init(_ headers: [(name: String, value: String)], removals: [StaticString]) {
        let count = headers.count + removals.count
        let nodes = count * MemoryLayout<curl_slist>.stride
        var size = nodes
        for (name, value) in headers { size += name.utf8.count + (value.isEmpty ? 1 : 2 + value.utf8.count) + 1 }
        for line in removals { size += line.utf8CodeUnitCount + 1 }
        guard count > 0 else {
            storage = nil
            return
        }
        let storage = UnsafeMutableRawPointer.allocate(byteCount: size, alignment: MemoryLayout<curl_slist>.alignment)
        let node = storage.bindMemory(to: curl_slist.self, capacity: count)
        var text = (storage + nodes).assumingMemoryBound(to: UInt8.self)
        var index = 0
        func link(_ start: UnsafeMutablePointer<UInt8>) {
            (node + index).initialize(
                to: curl_slist(
                    data: UnsafeMutableRawPointer(start).assumingMemoryBound(to: CChar.self),
                    next: index + 1 < count ? node + index + 1 : nil))
            index += 1
        }
        func write<Bytes: Sequence<UInt8>>(_ bytes: Bytes) {
            for byte in bytes {
                text.pointee = byte
                text += 1
            }
        }
        for (name, value) in headers {
            let start = text
            write(name.utf8.lazy.map(RequestContext.asciiLowercased))
            if value.isEmpty {
                write(CollectionOfOne(UInt8(ascii: ";")))
            } else {
                write(": ".utf8)
                write(value.utf8)
            }
            write(CollectionOfOne(0))
            link(start)
        }
        for line in removals {
            let start = text
            write(UnsafeBufferPointer(start: line.utf8Start, count: line.utf8CodeUnitCount))
            write(CollectionOfOne(0))
            link(start)
        }
        self.storage = storage
    }

    /// The head of the list (nil when empty).
    var head: UnsafeMutablePointer<curl_slist>? { storage?.assumingMemoryBound(to: curl_slist.self) }

    /// The lines, in order (for tests).
    var lines: [String] {
        var lines: [String] = []
        var node = head
        while let current = node {
            lines.append(String(cString: current.pointee.data))
            node = current.pointee.next
        }
        return lines
    }

    func deallocate() { storage?.deallocate() }
}
