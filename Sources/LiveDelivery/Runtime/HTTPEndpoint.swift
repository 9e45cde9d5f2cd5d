import Foundation
package import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import ServiceLifecycle
import Synchronization

/// A tiny HTTP/1.1 listener: `GET /metrics` (Prometheus text), `/healthz` (the process runs;
/// JSON with each dependency's state) and `/readyz` (200 only while the broker and the database
/// are reachable and events are consumed, else 503).
package final class HTTPEndpoint: Service {
    let host: String
    let port: Int
    let portFile: String?
    let metrics: WorkerMetrics
    let health: WorkerHealth
    let logger: Logger
    private let boundPort = Mutex<Int?>(nil)
    private let bound: AsyncStream<Int>
    private let boundContinuation: AsyncStream<Int>.Continuation

    package init(
        host: String, port: Int, portFile: String?, metrics: WorkerMetrics, health: WorkerHealth, logger: Logger
    ) {
        self.host = host
        self.port = port
        self.portFile = portFile
        self.metrics = metrics
        self.health = health
        self.logger = logger
        (bound, boundContinuation) = AsyncStream.makeStream(of: Int.self, bufferingPolicy: .bufferingNewest(1))
    }

    /// The port once listening (port 0 picks a free one).
    package func waitUntilListening() async -> Int? {
        if let port = boundPort.withLock({ $0 }) { return port }
        for await port in bound { return port }
        return boundPort.withLock { $0 }
    }

    package func run() async throws {
        let metrics = self.metrics
        let health = self.health
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.backlog, value: 64)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.pipeline.configureHTTPServerPipeline().flatMap {
                    channel.pipeline.addHandler(HealthHandler(metrics: metrics, health: health))
                }
            }
            .bind(host: host, port: port).get()
        let actualPort = channel.localAddress?.port ?? port
        boundPort.withLock { $0 = actualPort }
        boundContinuation.yield(actualPort)
        boundContinuation.finish()
        if let portFile {
            try? Data("\(actualPort)\n".utf8).write(to: URL(fileURLWithPath: portFile), options: .atomic)
        }
        logger.info("HTTP endpoint listening", metadata: [LiveDeliveryLoggingKeys.httpPort: "\(actualPort)"])
        try? await gracefulShutdown()
        health.update { $0.shuttingDown = true }
        try? await channel.close().get()
    }
}

private final class HealthHandler: ChannelInboundHandler, @unchecked Sendable {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    let metrics: WorkerMetrics
    let health: WorkerHealth
    private var head: HTTPRequestHead?

    init(metrics: WorkerMetrics, health: WorkerHealth) {
        self.metrics = metrics
        self.health = health
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head): self.head = head
        case .body: break
        case .end:
            guard let head else { return }
            self.head = nil
            respond(to: head, context: context)
        }
    }

    private func respond(to head: HTTPRequestHead, context: ChannelHandlerContext) {
        let path = head.uri.split(separator: "?").first.map(String.init) ?? head.uri
        var status: HTTPResponseStatus = .ok
        var contentType = "application/json"
        var body: [UInt8]
        let snapshot = health.snapshot
        switch (head.method, path) {
        case (.GET, "/metrics"):
            contentType = "text/plain; version=0.0.4"
            body = metrics.exposition()
        case (.GET, "/healthz"):
            body = Array(Self.json(snapshot, status: "ok").utf8)
        case (.GET, "/readyz"):
            status = snapshot.ready ? .ok : .serviceUnavailable
            body = Array(Self.json(snapshot, status: snapshot.ready ? "ready" : "not_ready").utf8)
        default:
            status = .notFound
            body = Array("{\"error\":\"not found\"}".utf8)
        }
        var headers = HTTPHeaders()
        headers.add(name: "content-type", value: contentType)
        headers.add(name: "content-length", value: "\(body.count)")
        let keepAlive = head.isKeepAlive
        if !keepAlive { headers.add(name: "connection", value: "close") }
        context.write(
            wrapOutboundOut(.head(HTTPResponseHead(version: head.version, status: status, headers: headers))),
            promise: nil)
        var buffer = context.channel.allocator.buffer(capacity: body.count)
        buffer.writeBytes(body)
        context.write(wrapOutboundOut(.body(.byteBuffer(buffer))), promise: nil)
        let done = context.writeAndFlush(wrapOutboundOut(.end(nil)))
        if !keepAlive {
            let channel = context.channel
            done.whenComplete { _ in channel.close(promise: nil) }
        }
    }

    static func json(_ snapshot: WorkerHealth.Snapshot, status: String) -> String {
        let paused = snapshot.pausedApps.map { "\"\($0)\"" }.joined(separator: ",")
        return """
            {"status":"\(status)","database":\(snapshot.database),"broker":\(snapshot.broker),\
            "consuming":\(snapshot.consuming),"shuttingDown":\(snapshot.shuttingDown),"pausedApps":[\(paused)]}
            """
    }
}
