package import Logging

/// The nodes of one RabbitMQ cluster (or a single broker), in the order to try them.
///
/// A client connects to the first node that accepts (``RabbitMQConnection/connect(to:startingAt:logger:)``)
/// and, when that connection is lost, to another: a quorum queue lives on several nodes, so any of
/// them serves its consumers and confirms its publishes once a majority of its members has the message.
///
/// `description` redacts every password.
package struct AMQPEndpoints: Sendable, Hashable, CustomStringConvertible {
    package private(set) var nodes: [AMQPConfiguration]

    /// At least one node.
    package init(_ nodes: [AMQPConfiguration]) {
        precondition(!nodes.isEmpty, "AMQPEndpoints needs at least one node")
        self.nodes = nodes
    }

    /// Parses AMQP URLs, each ``AMQPConfiguration/init(url:)``. An error names the URL by its
    /// position (1-based), never by its text, which holds a password.
    package init(urls: [String]) throws(RabbitMQError) {
        let urls = urls.map { $0.trimmingWhitespace }.filter { !$0.isEmpty }
        guard !urls.isEmpty else { throw RabbitMQError(code: .invalidURL, context: "no AMQP URL given") }
        var nodes: [AMQPConfiguration] = []
        for (index, url) in urls.enumerated() {
            do {
                nodes.append(try AMQPConfiguration(url: url))
            } catch {
                var error = error
                let reason = error.context ?? "not a valid AMQP URL"
                error.context = urls.count == 1 ? reason : "URL \(index + 1) of \(urls.count): \(reason)"
                throw error
            }
        }
        self.init(nodes)
    }

    /// Parses a comma-separated list of AMQP URLs (a comma inside one is written `%2C`).
    package init(urls: String) throws(RabbitMQError) {
        try self.init(urls: urls.split(separator: ",", omittingEmptySubsequences: false).map(String.init))
    }

    /// Applies `change` to every node (a connection name, a heartbeat, …).
    package func map(_ change: (inout AMQPConfiguration) -> Void) -> AMQPEndpoints {
        AMQPEndpoints(
            nodes.map { node in
                var node = node
                change(&node)
                return node
            })
    }

    package var description: String { nodes.map(\.description).joined(separator: ", ") }

    /// Tries the nodes in turn from `first` (wrapping around) until `open` succeeds; returns what it
    /// opened and the node's index. When every node fails, throws the last node's error, its context
    /// saying that all were tried.
    func first<Opened>(
        startingAt first: Int, logger: Logger,
        _ open: (AMQPConfiguration) async throws(RabbitMQError) -> Opened
    ) async throws(RabbitMQError) -> (Opened, node: Int) {
        var lastError = RabbitMQError(code: .connectFailed, context: "no node tried")
        for offset in 0..<nodes.count {
            let index = (first + offset) % nodes.count
            do {
                return (try await open(nodes[index]), index)
            } catch {
                guard nodes.count > 1 else { throw error }
                logger.debug(
                    "RabbitMQ node unreachable; trying the next",
                    metadata: [
                        RabbitMQLoggingKeys.host: "\(nodes[index].host)",
                        RabbitMQLoggingKeys.port: "\(nodes[index].port)",
                        RabbitMQLoggingKeys.error: "\(error.code)",
                    ])
                lastError = error
            }
        }
        let tried = "none of the \(nodes.count) nodes accepted a connection"
        lastError.context = lastError.context.map { "\(tried); the last: \($0)" } ?? tried
        throw lastError
    }
}

extension RabbitMQConnection {
    /// Connects to the first node of `endpoints` that accepts, trying them from `first` on; returns
    /// the connection and the node's index in `endpoints.nodes`.
    package static func connect(
        to endpoints: AMQPEndpoints, startingAt first: Int = 0, logger: Logger
    ) async throws(RabbitMQError) -> (connection: RabbitMQConnection, node: Int) {
        try await endpoints.first(startingAt: first, logger: logger) { node throws(RabbitMQError) in
            try await connect(node, logger: logger)
        }
    }
}

extension RabbitMQPublisher {
    /// Connects a confirming publisher to the first node of `endpoints` that accepts, trying them
    /// from `first` on; returns the publisher and the node's index in `endpoints.nodes`.
    package static func connect(
        to endpoints: AMQPEndpoints, startingAt first: Int = 0, logger: Logger
    ) async throws(RabbitMQError) -> (publisher: RabbitMQPublisher, node: Int) {
        try await endpoints.first(startingAt: first, logger: logger) { node throws(RabbitMQError) in
            try await connect(node, logger: logger)
        }
    }
}

extension String {
    fileprivate var trimmingWhitespace: String {
        var text = Substring(self)
        while text.first?.isWhitespace == true { text.removeFirst() }
        while text.last?.isWhitespace == true { text.removeLast() }
        return String(text)
    }
}
