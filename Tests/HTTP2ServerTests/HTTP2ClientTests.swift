import Foundation
import HTTP2
import Logging
import Testing

/// Runs `body` against a fresh nghttpd (HTTP/2 over TLS, `--echo-upload`) and a client trusting
/// its certificate; stops both and removes the temporary files whatever happens.
func withServerAndClient<T>(
    echo: Bool = true,
    configure: (inout HTTP2Client.Configuration) -> Void = { _ in },
    _ body: (NGHTTPDServer, HTTP2Client) async throws -> T
) async throws -> T {
    let fixture = try await TLSFixture.make()
    defer { fixture.remove() }
    let server = try await NGHTTPDServer.start(fixture: fixture, echo: echo)
    var configuration = HTTP2Client.Configuration()
    configuration.caFile = fixture.certificatePath
    configure(&configuration)
    let client = try HTTP2Client(configuration: configuration, logger: Logger(label: "HTTP2Tests"))
    do {
        let result = try await body(server, client)
        await client.shutdown()
        await server.stop()
        return result
    } catch {
        await client.shutdown()
        await server.stop()
        throw error
    }
}

@Suite("HTTP2Client against nghttpd over TLS", .timeLimit(.minutes(6)))
struct HTTP2ClientTests {
    @Test func getAndPostRoundTripOverHTTP2() async throws {
        try await withServerAndClient { server, client in
            let get = try await client.execute(HTTP2Request(method: "GET", url: server.baseURL + "/index.txt"))
            #expect(get.status == 200)
            #expect(get.httpVersion == .http2)
            #expect(String(decoding: get.body, as: UTF8.self) == TLSFixture.indexText)
            #expect(get.header("Content-Type") == "text/plain")
            #expect(get.header("content-length") == "\(TLSFixture.indexText.utf8.count)")
            #expect(get.headers.allSatisfy { $0.name == $0.name.lowercased() && !$0.name.hasPrefix("HTTP/") })

            let body = Array(#"{"aps":{"event":"update","content-state":{"step":2}}}"#.utf8)
            let post = try await client.execute(
                HTTP2Request(
                    url: server.baseURL + "/3/device/abc",
                    headers: [("content-type", "application/json"), ("apns-push-type", "liveactivity")],
                    body: body
                )
            )
            #expect(post.status == 200)
            #expect(post.httpVersion == .http2)
            #expect(post.body == body)
            #expect(post.header("NGHTTPD-Response") == "echo")
            #expect(client.statistics.requestsCompleted == 2)
            #expect(client.statistics.connectionsOpened == 1)
        }
    }

    @Test func thousandConcurrentRequestsShareTheConfiguredConnections() async throws {
        try await withServerAndClient(configure: { $0.maxConnectionsPerHost = 2 }) { server, client in
            let url = server.baseURL + "/echo"
            let mismatches = try await withThrowingTaskGroup(of: Int.self) { group in
                for index in 0..<1000 {
                    group.addTask {
                        let body = Array("request \(index) ".utf8) + [UInt8](repeating: UInt8(index % 256), count: 300)
                        let response = try await client.execute(HTTP2Request(url: url, body: body))
                        return response.status == 200 && response.body == body ? 0 : 1
                    }
                }
                return try await group.reduce(0, +)
            }
            #expect(mismatches == 0)
            let statistics = client.statistics
            #expect(statistics.requestsCompleted == 1000)
            #expect(statistics.requestsFailed == 0)
            #expect(statistics.inFlight == 0)
            #expect(statistics.connectionsOpened >= 1)
            #expect(statistics.connectionsOpened <= 2)
        }
    }

    @Test func requestsBeyondTheInFlightLimitWaitForASlot() async throws {
        // A request's timeout counts its wait for a slot: 200 behind 3 slots on a loaded machine can wait longer than
        // the default 30 s, and what is tested is that they wait, not how fast.
        try await withServerAndClient(configure: {
            $0.maxRequestsInFlight = 3
            $0.defaultRequestTimeout = .seconds(600)
        }) { server, client in
            let url = server.baseURL + "/echo"
            let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
                for index in 0..<200 {
                    group.addTask {
                        try await client.execute(HTTP2Request(url: url, body: Array("\(index)".utf8))).status
                    }
                }
                return try await group.reduce(into: [Int]()) { $0.append($1) }
            }
            #expect(statuses == Array(repeating: 200, count: 200))
            #expect(client.statistics.inFlight == 0)
        }
    }

    @Test func notFoundIsAResponseNotAnError() async throws {
        try await withServerAndClient { server, client in
            let response = try await client.execute(HTTP2Request(method: "GET", url: server.baseURL + "/missing"))
            #expect(response.status == 404)
            #expect(response.httpVersion == .http2)
            #expect(client.statistics.requestsFailed == 0)
        }
    }

    @Test func headAndCustomMethodsWork() async throws {
        try await withServerAndClient { server, client in
            let head = try await client.execute(HTTP2Request(method: "HEAD", url: server.baseURL + "/index.txt"))
            #expect(head.status == 200)
            #expect(head.body.isEmpty)
            let put = try await client.execute(
                HTTP2Request(method: "PUT", url: server.baseURL + "/upload", body: Array("put body".utf8))
            )
            #expect(put.status == 200)
            #expect(put.body == Array("put body".utf8))
        }
    }

    @Test func shutdownRejectsNewRequests() async throws {
        try await withServerAndClient { server, client in
            _ = try await client.execute(HTTP2Request(method: "GET", url: server.baseURL + "/index.txt"))
            await client.shutdown()
            let error = await #expect(throws: HTTP2Error.self) {
                try await client.execute(HTTP2Request(method: "GET", url: server.baseURL + "/index.txt"))
            }
            #expect(error?.code == .shutdown)
            #expect(error?.mayHaveBeenSent == false)
        }
    }

    @Test func invalidHeadersAreRejectedBeforeSending() async throws {
        let client = try HTTP2Client(logger: Logger(label: "HTTP2Tests"))
        let error = await #expect(throws: HTTP2Error.self) {
            try await client.execute(
                HTTP2Request(url: "https://localhost:1/", headers: [("x-injected", "a\r\nevil: 1")])
            )
        }
        #expect(error?.code == .invalidRequest)
        #expect(error?.description.contains("evil") == false)
        await client.shutdown()
    }
}

@Suite("HTTP2Client failures", .timeLimit(.minutes(6)))
struct HTTP2ClientFailureTests {
    let logger = Logger(label: "HTTP2Tests")

    @Test func closedPortGivesCouldNotConnect() async throws {
        let port = try freeLoopbackPort()
        let client = try HTTP2Client(logger: logger)
        let error = await #expect(throws: HTTP2Error.self) {
            try await client.execute(HTTP2Request(url: "https://127.0.0.1:\(port)/", body: [1, 2, 3]))
        }
        #expect(error?.code == .couldNotConnect)
        #expect(error?.mayHaveBeenSent == false)
        #expect(error?.isRetriable == true)
        #expect(client.statistics.requestsFailed == 1)
        await client.shutdown()
    }

    @Test func wrongCertificateAuthorityGivesTLSError() async throws {
        let fixture = try await TLSFixture.make()
        defer { fixture.remove() }
        let server = try await NGHTTPDServer.start(fixture: fixture)
        var configuration = HTTP2Client.Configuration()
        configuration.caFile = fixture.otherCertificatePath
        let client = try HTTP2Client(configuration: configuration, logger: logger)
        let error = await #expect(throws: HTTP2Error.self) {
            try await client.execute(HTTP2Request(method: "GET", url: server.baseURL + "/index.txt"))
        }
        #expect(error?.code == .tls)
        #expect(error?.isRetriable == false)
        #expect(error?.mayHaveBeenSent == false)
        await client.shutdown()
        await server.stop()
    }

    @Test func stalledServerTimesOut() async throws {
        let stalled = try StalledServer()
        defer { stalled.close() }
        let client = try HTTP2Client(logger: logger)
        let error = await #expect(throws: HTTP2Error.self) {
            try await client.execute(
                HTTP2Request(url: "https://127.0.0.1:\(stalled.port)/", body: [1], timeout: .milliseconds(300))
            )
        }
        #expect(error?.code == .timedOut)
        #expect(error?.isRetriable == true)
        await client.shutdown()
    }

    @Test func cancellingTheTaskAbortsTheTransfer() async throws {
        let stalled = try StalledServer()
        defer { stalled.close() }
        let client = try HTTP2Client(logger: logger)
        let task = Task {
            try await client.execute(
                HTTP2Request(url: "https://127.0.0.1:\(stalled.port)/", body: [1], timeout: .seconds(60))
            )
        }
        // The server has the connection: the transfer is running inside libcurl.
        var connections = stalled.accepted.makeAsyncIterator()
        _ = await connections.next()
        task.cancel()
        let result = await task.result
        #expect(throws: HTTP2Error.self) { try result.get() }
        if case .failure(let error as HTTP2Error) = result {
            #expect(error.code == .cancelled)
            #expect(error.isRetriable == false)
        }
        #expect(client.statistics.inFlight == 0)
        await client.shutdown()
    }

    @Test func alreadyCancelledTaskDoesNotSend() async throws {
        let client = try HTTP2Client(logger: logger)
        let task = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return try await client.execute(HTTP2Request(url: "https://127.0.0.1:1/", body: [1]))
        }
        let result = await task.result
        if case .failure(let error as HTTP2Error) = result {
            #expect(error.code == .cancelled)
            #expect(error.mayHaveBeenSent == false)
        } else {
            Issue.record("expected HTTP2Error.cancelled, got \(result)")
        }
        #expect(client.statistics.requestsFailed == 0)
        await client.shutdown()
    }

    /// Requests on a connection whose server dies fail with a retriable error; once the server is
    /// back on the same port, new requests succeed on a new connection.
    @Test func serverRestartGivesRetriableErrorsThenRecovers() async throws {
        try await withServerAndClient { server, client in
            let url = server.baseURL + "/echo"
            _ = try await client.execute(HTTP2Request(url: url, body: [1]))
            #expect(client.statistics.connectionsOpened == 1)

            // Stopped, the server keeps its sockets but answers nothing: requests stay in flight.
            server.pause()
            let unreadBefore = try await server.unreadBytes()
            let failures = try await withThrowingTaskGroup(of: HTTP2Error?.self) { group in
                for index in 0..<20 {
                    group.addTask {
                        do throws(HTTP2Error) {
                            _ = try await client.execute(HTTP2Request(url: url, body: Array("\(index)".utf8)))
                            return nil
                        } catch {
                            return error
                        }
                    }
                }
                // Kill the server once requests have reached its socket (the kernel then resets
                // the connection) – polling the observable condition, not guessing a delay.
                while try await server.unreadBytes() <= unreadBefore { try await Task.sleep(for: .milliseconds(5)) }
                await server.stop()
                return try await group.reduce(into: [HTTP2Error?]()) { $0.append($1) }
            }
            #expect(failures.count == 20)
            for failure in failures {
                #expect(failure != nil)
                #expect(failure?.isRetriable == true, "\(String(describing: failure))")
            }
            // At least the requests the server had received were in flight when it died.
            #expect(failures.contains { $0?.mayHaveBeenSent == true })

            try await server.restart()
            let response = try await client.execute(HTTP2Request(url: url, body: Array("after restart".utf8)))
            #expect(response.status == 200)
            #expect(response.body == Array("after restart".utf8))
            #expect(client.statistics.connectionsOpened >= 2)
        }
    }

    /// Without `--echo-upload`, nghttpd answers a POST before reading its body; curl then resets
    /// each finished stream, and after about a thousand resets on a connection nghttp2 1.52 sends
    /// GOAWAY(INTERNAL_ERROR) while up to 100 other streams are open. libcurl retries the streams
    /// above the GOAWAY's last-stream-id on a new connection; nothing may fail except retriably.
    @Test func goawayMidFlightIsSurvived() async throws {
        // No request may time out on a loaded machine (the default is 30 s): the timeout is far above any request's.
        try await withServerAndClient(echo: false, configure: { $0.defaultRequestTimeout = .seconds(600) }) {
            server, client in
            let url = server.baseURL + "/empty"
            let body = [UInt8](repeating: UInt8(ascii: "x"), count: 300)
            let outcomes = try await withThrowingTaskGroup(of: (ok: Bool, retriable: Bool).self) { group in
                for _ in 0..<200 {
                    group.addTask {
                        var ok = true
                        var retriable = true
                        for _ in 0..<20 {
                            do throws(HTTP2Error) {
                                let response = try await client.execute(HTTP2Request(url: url, body: body))
                                if response.status != 200 { ok = false }
                            } catch {
                                ok = false
                                if !error.isRetriable { retriable = false }
                            }
                        }
                        return (ok, retriable)
                    }
                }
                return try await group.reduce(into: [(ok: Bool, retriable: Bool)]()) { $0.append($1) }
            }
            #expect(outcomes.allSatisfy { $0.retriable })
            // GOAWAY happened: more connections than the two the client keeps. Alone, nghttpd always gets there;
            // under the whole test run's load it sometimes does not, and the storm then tests no GOAWAY at all.
            withKnownIssue("nghttpd sent no GOAWAY under this machine's load", isIntermittent: true) {
                #expect(client.statistics.connectionsOpened > 2)
            }
            // The client still serves requests. nghttpd goes on counting resets, so one request may meet
            // the next GOAWAY; it fails retriably and the next attempt goes through, as for any caller.
            var after: HTTP2Response?
            for _ in 0..<3 where after == nil {
                do throws(HTTP2Error) {
                    after = try await client.execute(HTTP2Request(url: url, body: body))
                } catch {
                    #expect(error.isRetriable, "\(error)")
                }
            }
            #expect(after?.status == 200)
        }
    }
}
