import HTTP2
import Logging
import Testing

@Suite struct HTTP2ErrorTests {
    @Test func responseHeaderLookupIsCaseInsensitive() {
        let response = HTTP2Response(
            status: 200,
            headers: [("apns-id", "ABC"), ("apns-unique-id", "DEF")],
            body: [],
            httpVersion: .http2
        )
        #expect(response.header("APNS-ID") == "ABC")
        #expect(response.header("apns-unique-id") == "DEF")
        #expect(response.header("missing") == nil)
    }

    @Test func versionDescriptions() {
        #expect(HTTPVersion.http2.description == "HTTP/2")
        #expect(HTTPVersion.http1_1.description == "HTTP/1.1")
    }

    @Test func configurationIsValidated() {
        var configuration = HTTP2Client.Configuration()
        configuration.maxConnectionsPerHost = 0
        #expect(throws: HTTP2Error.self) {
            _ = try HTTP2Client(configuration: configuration, logger: .init(label: "HTTP2Tests"))
        }
    }
}
