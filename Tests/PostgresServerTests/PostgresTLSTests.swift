import Foundation
import TestSupport
import Testing

@testable import Postgres

/// libpq's TLS against the main database (scripts/services: a test CA, a server certificate for
/// `localhost`, and the login `livedelivery_cert`, which logs in by its client certificate alone).
@Suite("PostgreSQL over TLS", .timeLimit(.minutes(6)))
struct PostgresTLSTests {
    /// Whether this session's link is encrypted, as the server sees it.
    static func sessionIsEncrypted(_ client: PostgresClient) async throws -> Bool {
        try await client.query("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()")[0].decode(Bool.self, "ssl")
    }

    @Test("sslmode=verify-full with the test CA: the session is encrypted")
    func verifiedLink() async throws {
        let encrypted = try await PostgresTestSupport.withClient(url: TestTLS.postgresURL(PostgresTestSupport.ownerURL))
        {
            try await Self.sessionIsEncrypted($0)
        }
        #expect(encrypted)
    }

    @Test("a certificate for another host, or from another CA: refused with libpq's reason")
    func unverifiableLinksAreRefused() async throws {
        for (host, ca, reason) in [
            ("127.0.0.1", "ca.pem", "does not match host name \"127.0.0.1\""),
            ("localhost", "other-ca.pem", "certificate verify failed"),
        ] {
            let url = TestTLS.postgresURL(PostgresTestSupport.ownerURL, host: host, ca: ca)
            let error = await #expect(throws: PostgresError.self, "\(host), \(ca)") {
                try await PostgresTestSupport.withClient(url: url) { try await $0.query("SELECT 1") }
            }
            #expect(error?.code == .connectionFailed)
            #expect(error?.message?.contains(reason) == true, "\(String(describing: error?.message))")
            #expect(error.map { !"\($0)".contains("livedelivery_owner:") } ?? false, "no password in the error")
        }
        // libpq's default, sslmode=prefer, checks nothing: it takes the certificate for another name (and
        // would take plain text): what check-config and the worker warn of.
        #expect(try await PostgresTestSupport.withClient { try await Self.sessionIsEncrypted($0) })
    }

    @Test("a login by client certificate: accepted with it, refused without it or over plain text")
    func clientCertificateLogin() async throws {
        let (user, encrypted) = try await PostgresTestSupport.withClient(
            url: TestTLS.certificateLoginURL(database: "livedelivery")
        ) { client in
            (
                try await client.query("SELECT current_user AS u")[0].decode(String.self, "u"),
                try await Self.sessionIsEncrypted(client)
            )
        }
        #expect(user == "livedelivery_cert" && encrypted)
        let withoutCertificate = TestTLS.certificateLoginURL(database: "livedelivery", clientCertificate: false)
        let refused = await #expect(throws: PostgresError.self) {
            try await PostgresTestSupport.withClient(url: withoutCertificate) { try await $0.query("SELECT 1") }
        }
        #expect(
            refused?.message?.contains("requires a valid client certificate") == true, "\(String(describing: refused))")
        let plain = "postgresql://livedelivery_cert@127.0.0.1:\(TestTLS.postgresPort)/livedelivery?sslmode=disable"
        let rejected = await #expect(throws: PostgresError.self) {
            try await PostgresTestSupport.withClient(url: plain) { try await $0.query("SELECT 1") }
        }
        #expect(rejected?.message?.contains("no encryption") == true, "\(String(describing: rejected))")
    }
}
