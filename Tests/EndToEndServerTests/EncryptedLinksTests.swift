import ChildProcesses
import Foundation
import Postgres
import TestSupport
import Testing
import WorkerHarness

/// A worker whose every link is encrypted and verified (docs/operations.md, Encrypted links): amqps with a
/// client certificate, PostgreSQL with `sslmode=verify-full` and a login by certificate, APNs over TLS.
@Suite(.timeLimit(.minutes(5)))
struct EncryptedLinksTests {
    @Test("a worker on encrypted, verified links delivers, and check-config names each link that is not")
    func workerOnEncryptedLinks() async throws {
        try await Fixture.with("tls-links") { fixture in
            let encrypted = [
                "LIVEDELIVERY_AMQP_URL": TestTLS.amqpsURL(),
                "LIVEDELIVERY_POSTGRES_URL": TestTLS.certificateLoginURL(database: fixture.deployment.databaseName),
            ]
            var environment = fixture.environment(worker: "check").merging(encrypted) { $1 }
            let (status, output) = try await CheckConfigTests.run(
                ["check-config", "--connect"], environment: environment, in: fixture.directory)
            #expect(status == 0, "\(output)")
            #expect(output.contains("check-config: all 3 targets reached"), "\(output)")
            #expect(!output.contains("warning:") && !output.contains("note:"), "\(output)")

            // The same servers over plain text or unverified: each link named, as a note on loopback, and
            // as a warning over the network.
            environment["LIVEDELIVERY_AMQP_URL"] = TestTLS.amqpsURL(host: "127.0.0.1") + "&verify=verify_none"
            environment["LIVEDELIVERY_POSTGRES_URL"] = fixture.postgresURL
            let (_, plain) = try await CheckConfigTests.run(
                ["check-config"], environment: environment, in: fixture.directory)
            #expect(
                plain.contains(
                    "note: the broker link to 127.0.0.1:\(TestTLS.amqpsPort) is encrypted but checks no "
                        + "certificate (verify=verify_none)"), "\(plain)")
            #expect(
                plain.contains(
                    "note: the database link may fall back to plain text and accepts any certificate "
                        + "(sslmode=prefer): set sslmode=verify-full"), "\(plain)")
            environment["LIVEDELIVERY_POSTGRES_URL"] = "postgresql://u:p@db.example.net:5432/db?sslmode=require"
            let (_, remote) = try await CheckConfigTests.run(
                ["check-config"], environment: environment, in: fixture.directory)
            #expect(
                remote.contains(
                    "warning: the database link is encrypted but accepts any certificate (sslmode=require)"),
                "\(remote)")

            let worker = try await fixture.startWorker("w1", extraEnvironment: encrypted)
            let scenario = Scenario.deliveries(orders: 5, prefix: fixture.name)
            try await fixture.publish(scenario.events)
            try await fixture.waitUntilSettled(eventIDs: Set(scenario.events.map(\.eventID)))
            try await fixture.waitUntilAllEnded(scenario)
            try await fixture.verifyConverged(scenario)
            // The database saw the worker's sessions arrive encrypted, as the certificate's login (only the
            // superuser sees other logins' TLS state).
            let sessions = try await TestEnvironment.asSuperuser(on: fixture.deployment.serverPostgresURL) {
                connection in
                try await connection.query(
                    """
                    SELECT s.ssl::text AS ssl FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid)
                    WHERE a.usename = 'livedelivery_cert' AND a.datname = \(fixture.deployment.databaseName)
                    """
                ).map { try $0.decode(String.self, "ssl") }
            }
            #expect(!sessions.isEmpty && sessions.allSatisfy { $0 == "true" }, "\(sessions)")
            #expect(
                !worker.process.output.contains("plain text") && !worker.process.output.contains("any certificate"),
                "\(worker.process.tail(20))")
        }
    }
}
