import Crypto
import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOHPACK
import NIOHTTP2
import NIOPosix
import NIOSSL

/// A bare HTTP/2 client over TLS, so the simulator tests control every header, frame and connection
/// (the product's libcurl client would correct or pool them).
final class H2TestConnection: Sendable {
    struct Response: Sendable {
        var status: Int
        var headers: [String: String]
        var body: [UInt8]

        var reason: String? {
            ((try? JSONSerialization.jsonObject(with: Data(body))) as? [String: Any])?["reason"] as? String
        }
        var timestamp: Int64? {
            (((try? JSONSerialization.jsonObject(with: Data(body))) as? [String: Any])?["timestamp"] as? NSNumber)?
                .int64Value
        }
    }

    private let channel: any Channel
    private let multiplexer: NIOHTTP2Handler.StreamMultiplexer
    let goaways: NIOLockedValueBox<Int>
    /// SETTINGS_MAX_CONCURRENT_STREAMS values the server advertised, in order.
    let maxStreamsSettings: NIOLockedValueBox<[Int]>

    private init(
        channel: any Channel,
        multiplexer: NIOHTTP2Handler.StreamMultiplexer,
        goaways: NIOLockedValueBox<Int>,
        maxStreamsSettings: NIOLockedValueBox<[Int]>
    ) {
        self.channel = channel
        self.multiplexer = multiplexer
        self.goaways = goaways
        self.maxStreamsSettings = maxStreamsSettings
    }

    static let group = MultiThreadedEventLoopGroup.singleton

    static func connect(port: Int, caFile: String) async throws -> H2TestConnection {
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.trustRoots = .file(caFile)
        tls.applicationProtocols = ["h2"]
        let context = try NIOSSLContext(configuration: tls)
        let goaways = NIOLockedValueBox(0)
        let settings = NIOLockedValueBox<[Int]>([])
        let (channel, multiplexer) = try await ClientBootstrap(group: group)
            .connect(host: "127.0.0.1", port: port) { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(
                        try NIOSSLClientHandler(context: context, serverHostname: "localhost"))
                    let multiplexer = try channel.pipeline.syncOperations.configureHTTP2Pipeline(
                        mode: .client, connectionConfiguration: .init(), streamConfiguration: .init()
                    ) { stream in stream.eventLoop.makeSucceededVoidFuture() }
                    try channel.pipeline.syncOperations.addHandler(
                        RootFrameRecorder(goaways: goaways, maxStreams: settings))
                    return (channel, multiplexer)
                }
            }
        return H2TestConnection(
            channel: channel, multiplexer: multiplexer, goaways: goaways, maxStreamsSettings: settings)
    }

    func send(
        method: String = "POST",
        path: String,
        headers: [(String, String)],
        body: [UInt8]
    ) async throws -> Response {
        try await start(method: method, path: path, headers: headers, body: body).get()
    }

    /// Writes the request and returns once it is flushed; the future completes with the response.
    func start(
        method: String = "POST",
        path: String,
        headers: [(String, String)],
        body: [UInt8]
    ) async throws -> EventLoopFuture<Response> {
        let promise = channel.eventLoop.makePromise(of: Response.self)
        let stream = try await multiplexer.createStreamChannel { stream in
            stream.eventLoop.makeCompletedFuture {
                try stream.pipeline.syncOperations.addHandler(ResponseCollector(promise: promise))
            }
        }.get()
        var hpack = HPACKHeaders([
            (":method", method), (":path", path), (":scheme", "https"), (":authority", "localhost"),
        ])
        for (name, value) in headers { hpack.add(name: name, value: value) }
        stream.write(HTTP2Frame.FramePayload.headers(.init(headers: hpack, endStream: body.isEmpty)), promise: nil)
        if !body.isEmpty {
            stream.write(
                HTTP2Frame.FramePayload.data(.init(data: .byteBuffer(ByteBuffer(bytes: body)), endStream: true)),
                promise: nil)
        }
        stream.flush()  // runs on the event loop in call order, so a later request is written after this one
        return promise.futureResult
    }

    func close() async {
        try? await channel.close()
    }

    var isActive: Bool { channel.isActive }

    var closeFuture: EventLoopFuture<Void> { channel.closeFuture }
}

private final class ResponseCollector: ChannelInboundHandler {
    typealias InboundIn = HTTP2Frame.FramePayload
    private let promise: EventLoopPromise<H2TestConnection.Response>
    private var response = H2TestConnection.Response(status: 0, headers: [:], body: [])

    init(promise: EventLoopPromise<H2TestConnection.Response>) { self.promise = promise }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .headers(let headers):
            for (name, value, _) in headers.headers {
                if name == ":status" { response.status = Int(value) ?? 0 } else { response.headers[name] = value }
            }
            if headers.endStream { promise.succeed(response) }
        case .data(let data):
            if case .byteBuffer(let buffer) = data.data { response.body += Array(buffer.readableBytesView) }
            if data.endStream { promise.succeed(response) }
        default:
            break
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        promise.fail(ChannelError.ioOnClosedChannel)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        promise.fail(error)
    }
}

/// Records connection-level frames: GOAWAYs and the server's stream limit.
private final class RootFrameRecorder: ChannelInboundHandler, Sendable {
    typealias InboundIn = HTTP2Frame
    let goaways: NIOLockedValueBox<Int>
    let maxStreams: NIOLockedValueBox<[Int]>

    init(goaways: NIOLockedValueBox<Int>, maxStreams: NIOLockedValueBox<[Int]>) {
        self.goaways = goaways
        self.maxStreams = maxStreams
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data).payload {
        case .goAway:
            goaways.withLockedValue { $0 += 1 }
        case .settings(.settings(let settings)):
            for setting in settings where setting.parameter == .maxConcurrentStreams {
                maxStreams.withLockedValue { $0.append(setting.value) }
            }
        default:
            break
        }
        context.fireChannelRead(data)
    }
}

/// Provider keys and tokens for the tests.
struct TestKey: Sendable {
    let keyID: String
    let teamID: String
    let privateKey: P256.Signing.PrivateKey
    let pemPath: String

    /// A fresh P-256 key written as a `.p8` (PKCS#8 PEM) file in a temporary folder.
    init(keyID: String = "KEY" + String(UUID().uuidString.prefix(7)), teamID: String = "TEAM123456") throws {
        self.keyID = keyID
        self.teamID = teamID
        privateKey = P256.Signing.PrivateKey()
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("apns-tests-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let url = directory.appendingPathComponent("AuthKey_\(keyID).p8")
        try Data(privateKey.pemRepresentation.utf8).write(to: url)
        pemPath = url.path
    }

    func jwt(issuedAt: Date = Date(), team: String? = nil, signingKey: P256.Signing.PrivateKey? = nil) throws -> String
    {
        let header = #"{"alg":"ES256","kid":"\#(keyID)"}"#
        let claims = #"{"iss":"\#(team ?? teamID)","iat":\#(Int(issuedAt.timeIntervalSince1970))}"#
        let input = Self.base64URL(Data(header.utf8)) + "." + Self.base64URL(Data(claims.utf8))
        let signature = try (signingKey ?? privateKey).signature(for: Data(input.utf8))
        return input + "." + Self.base64URL(signature.rawRepresentation)
    }

    static func base64URL(_ data: Data) -> String {
        data.base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }
}
