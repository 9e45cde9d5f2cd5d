import Foundation
import RabbitMQ
import TestSupport
import Testing

/// amqps against the main broker's TLS port (scripts/services: a test CA, a server certificate for
/// `localhost`, and a port that wants a client certificate).
@Suite("RabbitMQ over TLS", .timeLimit(.minutes(6)))
struct RabbitMQTLSTests {
    @Test("amqps with the server verified and a client certificate: messages go through the encrypted link")
    func verifiedLinkCarriesMessages() async throws {
        var configuration = try TestBroker.configuration(TestTLS.amqpsURL())
        #expect(configuration.useTLS && configuration.verifyPeer)
        // Names of this test's own, so that the broker's listing tells them from other tests' connections.
        let name = TestEnvironment.uniqueName("RabbitMQTests-tls")
        let plainName = TestEnvironment.uniqueName("RabbitMQTests-plain")
        configuration.connectionName = name
        var plainConfiguration = try TestBroker.configuration()
        plainConfiguration.connectionName = plainName
        let queue = TestEnvironment.uniqueName("rmq-tls")
        let connection = try await RabbitMQConnection.connect(configuration, logger: TestBroker.logger)
        let publisher = try await RabbitMQPublisher.connect(configuration, logger: TestBroker.logger)
        let plain = try await RabbitMQConnection.connect(plainConfiguration, logger: TestBroker.logger)
        try await connection.declareQueue(queue, durable: false, arguments: temporaryQueueArguments)
        try await publisher.publish(routingKey: queue, body: Array("over TLS".utf8))
        #expect(try await connection.declareQueue(queue, passive: true).messageCount == 1)
        // The broker saw both connections arrive over TLS: its `ssl` column. A plain connection reads false
        // there, so the check tells the two apart.
        let ssl = try await Self.sslColumn()
        #expect(ssl[name] == [true, true], "\(ssl)")
        #expect(ssl[plainName] == [false], "\(ssl)")
        try await connection.deleteQueue(queue)
        await plain.close()
        await publisher.close()
        await connection.close()
    }

    /// The broker's `ssl` column of each open connection, by the name the client gave it (`connection_name`).
    static func sslColumn() async throws -> [String: [Bool]] {
        let rows = try await RabbitMQBroker.main.rows(["list_connections", "ssl", "client_properties"])
        var columns: [String: [Bool]] = [:]
        for row in rows {
            // client_properties: [name, type, value] triples.
            let properties = row["client_properties"] as? [[Any]] ?? []
            guard let name = properties.first(where: { $0.first as? String == "connection_name" })?.last as? String,
                let ssl = row["ssl"] as? Bool
            else { continue }
            columns[name, default: []].append(ssl)
        }
        return columns
    }

    @Test("a certificate for another host, or from another CA, or no client certificate: refused, saying TLS")
    func unverifiableLinksAreRefused() async throws {
        for (url, why) in [
            (TestTLS.amqpsURL(host: "127.0.0.1"), "the certificate names localhost, not 127.0.0.1"),
            (TestTLS.amqpsURL(ca: "other-ca.pem"), "another CA signed the server's certificate"),
        ] {
            let error = await #expect(throws: RabbitMQError.self, "\(why)") { try await TestBroker.connect(url) }
            #expect(error?.code == .tlsFailed, "\(why): \(String(describing: error))")
            #expect(error.map { !"\($0)".contains("livedelivery:livedelivery") } ?? false, "no password in the error")
        }
        // Without a client certificate the broker ends the handshake (fail_if_no_peer_cert).
        await #expect(throws: RabbitMQError.self) {
            try await TestBroker.connect(TestTLS.amqpsURL(clientCertificate: false))
        }
        // Turning verification off connects to the wrong name: what check-config and the worker warn of.
        let unverified = try await TestBroker.connect(TestTLS.amqpsURL(host: "127.0.0.1") + "&verify=verify_none")
        await unverified.close()
    }
}
