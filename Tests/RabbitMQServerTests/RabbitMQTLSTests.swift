import Foundation
import RabbitMQ
import TestSupport
import Testing

/// amqps against the main broker's TLS port (scripts/services: a test CA, a server certificate for
/// `localhost`, and a port that wants a client certificate).
@Suite("RabbitMQ over TLS", .timeLimit(.minutes(2)))
struct RabbitMQTLSTests {
    @Test("amqps with the server verified and a client certificate: messages go through the encrypted link")
    func verifiedLinkCarriesMessages() async throws {
        let url = TestTLS.amqpsURL()
        let configuration = try TestBroker.configuration(url)
        #expect(configuration.useTLS && configuration.verifyPeer)
        let queue = TestEnvironment.uniqueName("rmq-tls")
        let connection = try await TestBroker.connect(url)
        let publisher = try await TestBroker.publisher(url)
        try await connection.declareQueue(queue, durable: false, arguments: temporaryQueueArguments)
        try await publisher.publish(routingKey: queue, body: Array("over TLS".utf8))
        #expect(try await connection.declareQueue(queue, passive: true).messageCount == 1)
        // The broker saw this connection arrive over TLS.
        let listing = try await TestEnvironment.services([
            "rabbitmqctl", "list_connections", "--silent", "client_properties", "ssl", "ssl_protocol",
        ])
        #expect(listing.split(separator: "\n").contains { $0.contains("RabbitMQTests") && $0.contains("true") })
        try await connection.deleteQueue(queue)
        await publisher.close()
        await connection.close()
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
