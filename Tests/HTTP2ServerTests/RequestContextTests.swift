import Testing

@testable import HTTP2

@Suite struct RequestContextTests {
    private func feed(_ lines: [String], to context: RequestContext) {
        for line in lines {
            var bytes = Array(line.utf8)
            bytes.withUnsafeMutableBytes { context.receiveHeaderLine(UnsafeRawBufferPointer($0)) }
        }
    }

    @Test func headerLinesSkipStatusLinesAndLowercaseNames() throws {
        let context = try RequestContext(id: 1, request: HTTP2Request(url: "https://localhost/"))
        feed(["HTTP/2 100\r\n", "X-Interim: 1\r\n", "\r\n"], to: context)
        feed(["HTTP/2 200\r\n", "Apns-ID:  abc \r\n", "content-length: 0\r\n", "x-empty:\r\n", "\r\n"], to: context)
        #expect(context.responseHeaders.map(\.name) == ["apns-id", "content-length", "x-empty"])
        #expect(context.responseHeaders.map(\.value) == ["abc", "0", ""])
    }

    @Test func invalidRequestsAreRejected() {
        #expect(throws: HTTP2Error.self) { try RequestContext(id: 1, request: HTTP2Request(url: "")) }
        #expect(throws: HTTP2Error.self) {
            try RequestContext(id: 1, request: HTTP2Request(url: "https://x/", headers: [(":path", "/")]))
        }
        #expect(throws: HTTP2Error.self) {
            try RequestContext(id: 1, request: HTTP2Request(method: "PO ST", url: "https://x/"))
        }
    }

    @Test func headerListIsOneListOfLowerCaseLinesThenTheRemovals() throws {
        let context = try RequestContext(
            id: 1,
            request: HTTP2Request(
                method: "POST", url: "https://localhost/",
                headers: [("Authorization", "bearer x.y.z"), ("apns-ID", "abc"), ("X-Empty", "")], body: [1]))
        #expect(
            context.headerList.lines == [
                "authorization: bearer x.y.z", "apns-id: abc", "x-empty;", "Expect:", "Content-Type:", "Accept:",
            ])
        let typed = try RequestContext(
            id: 2,
            request: HTTP2Request(
                url: "https://localhost/", headers: [("Content-TYPE", "application/json"), ("accept", "*/*")]))
        #expect(typed.headerList.lines == ["content-type: application/json", "accept: */*", "Expect:"])
        let bare = try RequestContext(id: 3, request: HTTP2Request(url: "https://localhost/"))
        #expect(bare.headerList.lines == ["Expect:", "Content-Type:", "Accept:"])
    }
}
