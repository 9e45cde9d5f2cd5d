import RabbitMQ
import Testing

@Suite struct AMQPConfigurationTests {
    @Test func parsesFullURL() throws {
        let configuration = try AMQPConfiguration(
            url: "amqp://live%40user:s%3Acret@broker.example:5673/orders%2Fv1?heartbeat=7&connection_timeout=2500"
                + "&connection_name=worker-1&channel_max=16")
        #expect(configuration.host == "broker.example")
        #expect(configuration.port == 5673)
        #expect(configuration.user == "live@user")
        #expect(configuration.password == "s:cret")
        #expect(configuration.vhost == "orders/v1")
        #expect(configuration.heartbeat == .seconds(7))
        #expect(configuration.connectTimeout == .milliseconds(2500))
        #expect(configuration.connectionName == "worker-1")
        #expect(configuration.channelMax == 16)
        #expect(!configuration.useTLS)
    }

    @Test func percentEncodedSlashIsTheDefaultVhost() throws {
        #expect(try AMQPConfiguration(url: "amqp://u:p@127.0.0.1:56720/%2F").vhost == "/")
        #expect(try AMQPConfiguration(url: "amqp://u:p@127.0.0.1:56720/%2f").vhost == "/")
        #expect(try AMQPConfiguration(url: "amqp://u:p@127.0.0.1:56720").vhost == "/")
        #expect(try AMQPConfiguration(url: "amqp://u:p@127.0.0.1:56720/").vhost == "/")
    }

    @Test func defaults() throws {
        let plain = try AMQPConfiguration(url: "amqp://")
        #expect(plain.host == "localhost")
        #expect(plain.port == 5672)
        #expect(plain.user == "guest")
        #expect(plain.password == "guest")
        let tls = try AMQPConfiguration(url: "amqps://broker")
        #expect(tls.useTLS)
        #expect(tls.port == 5671)
        #expect(tls.caFile == "/etc/ssl/certs/ca-certificates.crt")
        #expect(tls.verifyPeer)
    }

    @Test func tlsOptions() throws {
        let configuration = try AMQPConfiguration(
            url:
                "amqps://u:p@[::1]:5671/vh?cacertfile=/tmp/ca.pem&certfile=/tmp/c.pem&keyfile=/tmp/k.pem&verify=verify_none"
        )
        #expect(configuration.host == "::1")
        #expect(configuration.caFile == "/tmp/ca.pem")
        #expect(configuration.clientCertificateFile == "/tmp/c.pem")
        #expect(configuration.clientKeyFile == "/tmp/k.pem")
        #expect(!configuration.verifyPeer)
    }

    @Test(arguments: [
        "http://u:p@host/", "amqp://u:p@host/a/b", "amqp://u:p@host/?heartbeat=abc", "amqp://u:p@host/?verify=maybe",
        "amqp://u:p@host:99999/", "not a url at all",
    ])
    func rejectsInvalidURLs(_ url: String) {
        #expect {
            try AMQPConfiguration(url: url)
        } throws: { error in
            (error as? RabbitMQError)?.code == .invalidURL
        }
    }

    @Test func descriptionAndErrorsNeverContainThePassword() throws {
        let configuration = try AMQPConfiguration(url: "amqp://user:TopSecret42@host:5672/%2F?heartbeat=5")
        #expect(!configuration.description.contains("TopSecret42"))
        #expect(configuration.description.contains("user:***@host:5672/%2F"))
        #expect(!"\(configuration)".contains("TopSecret42"))
        do {
            _ = try AMQPConfiguration(url: "amqp://user:TopSecret42@host/a/b")
            Issue.record("expected an error")
        } catch {
            #expect(!error.description.contains("TopSecret42"))
            #expect(!error.debugDescription.contains("TopSecret42"))
        }
    }
}

@Suite struct AMQPEndpointsTests {
    @Test func aCommaSeparatedListIsTheClustersNodes() throws {
        let endpoints = try AMQPEndpoints(
            urls: "amqp://u:s3cret@10.0.0.1:5672/%2F, amqp://u:s3cret@10.0.0.2:5673/%2F,amqps://u:s3cret@[::1]/ld")
        #expect(endpoints.nodes.map(\.host) == ["10.0.0.1", "10.0.0.2", "::1"])
        #expect(endpoints.nodes.map(\.port) == [5672, 5673, 5671])
        #expect(endpoints.nodes[2].vhost == "ld")
        #expect(!endpoints.description.contains("s3cret"))
        #expect(endpoints.description.split(separator: ", ").allSatisfy { $0.contains(":***@") })
    }

    @Test func aBadURLIsNamedByItsPositionNeverByItsText() {
        let error = #expect(throws: RabbitMQError.self) {
            try AMQPEndpoints(urls: "amqp://u:s3cret@a/%2F,amqp//u:s3cret@b")
        }
        #expect(error?.code == .invalidURL)
        #expect(error?.context?.hasPrefix("URL 2 of 2:") == true, "\(String(describing: error?.context))")
        #expect(error.map { !"\($0)".contains("s3cret") && !$0.debugDescription.contains("s3cret") } == true)
        #expect(throws: RabbitMQError.self) { try AMQPEndpoints(urls: " , ") }
    }
}
