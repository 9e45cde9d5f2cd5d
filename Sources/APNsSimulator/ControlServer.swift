import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix

/// The control API: plain HTTP/1.1 with JSON bodies, on its own port.
///
/// | Method and path | Does |
/// |---|---|
/// | `GET /healthz` | `{"status":"ok"}` |
/// | `GET /stats` | connection and request counters |
/// | `GET /pushes?token=&activity=&channel=&limit=` | recorded requests with APNs' answer and the device verdict |
/// | `GET /devices` | known tokens |
/// | `GET /devices/<token>` | what the phone behind the token shows (404 if unknown) |
/// | `GET /activities/<id>` | one activity |
/// | `POST /tokens/<token>` `{"bundleID","environment"}` | bind a token to an app and environment |
/// | `POST /tokens/<token>/unregister` `{"timestamp": ms}`? | 410 `Unregistered` from now on |
/// | `POST /tokens/<token>/expire` | 410 `ExpiredToken` from now on |
/// | `GET /channels?bundle=` · `GET /channels/<id>` · `DELETE /channels/<id>` | broadcast channels; delete one as Apple would |
/// | `POST /channels/limit` `{"limit": N}` | live channels an app may have |
/// | `POST /apps/<bundleID>/broadcast` `{"enabled": Bool}` | the app's broadcast capability (off deletes its channels) |
/// | `POST /faults` ``FaultRule`` · `GET /faults` · `DELETE /faults` | inject, list, clear faults |
/// | `POST /reset` | forget records, devices, channels and faults |
///
/// A channel id in a path is percent-encoded (`/` as `%2F`) or in base64url (`-` and `_` for `+` and `/`).
enum ControlServer {
    static func bind(
        group: any EventLoopGroup,
        host: String,
        port: Int,
        store: SimulatorStore,
        configuration: SimulatorConfiguration
    ) async throws -> any Channel {
        let router = ControlRouter(store: store, configuration: configuration)
        return try await ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: 256)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline()
                    try channel.pipeline.syncOperations.addHandler(ControlHandler(router: router))
                }
            }
            .bind(host: host, port: port)
            .get()
    }
}

struct ControlResponse {
    var status: HTTPResponseStatus
    var body: Data
}

/// Routes control requests to the store.
struct ControlRouter: Sendable {
    let store: SimulatorStore
    let configuration: SimulatorConfiguration

    private static let encoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .iso8601
        encoder.outputFormatting = [.sortedKeys]
        return encoder
    }()

    func route(method: HTTPMethod, uri: String, body: Data) -> ControlResponse {
        let components = URLComponents(string: uri)
        let path = components?.percentEncodedPath ?? uri
        let query = Dictionary(
            (components?.queryItems ?? []).compactMap { item in item.value.map { (item.name, $0) } },
            uniquingKeysWith: { _, last in last })
        let segments = path.split(separator: "/").map { $0.removingPercentEncoding ?? String($0) }

        switch (method, segments.first, segments.count) {
        case (.GET, "healthz", 1):
            return json(["status": "ok"])
        case (.GET, "stats", 1):
            return json(store.statistics)
        case (.GET, "pushes", 1):
            return json(
                store.pushes(
                    token: query["token"], activity: query["activity"], channel: query["channel"],
                    limit: query["limit"].flatMap { Int($0) }))
        case (.GET, "devices", 1):
            return json(store.tokens())
        case (.GET, "devices", 2):
            guard let view = store.device(token: segments[1]) else { return notFound("unknown token") }
            return json(view)
        case (.GET, "activities", 2):
            guard let view = store.activity(id: segments[1]) else { return notFound("unknown activity") }
            return json(view)
        case (.POST, "tokens", 2):
            guard
                let registration = try? JSONDecoder().decode(
                    Registration.self, from: body.isEmpty ? Data("{}".utf8) : body)
            else { return badRequest("body is {\"bundleID\": String?, \"environment\": \"production\"|\"sandbox\"?}") }
            store.register(token: segments[1], bundleID: registration.bundleID, environment: registration.environment)
            return json(store.device(token: segments[1]))
        case (.POST, "tokens", 3) where segments[2] == "unregister":
            let milliseconds = (try? JSONDecoder().decode(Unregistration.self, from: body))?.timestamp
            store.markUnregistered(
                token: segments[1], at: milliseconds.map { Date(timeIntervalSince1970: Double($0) / 1000) })
            return json(store.device(token: segments[1]))
        case (.POST, "tokens", 3) where segments[2] == "rotate":
            guard let rotation = try? JSONDecoder().decode(Rotation.self, from: body),
                rotation.token.count == 64, rotation.token.allSatisfy(\.isHexDigit)
            else { return badRequest("body is {\"token\": \"<64 hex digits>\"}") }
            guard let activityID = store.rotate(token: segments[1], to: rotation.token.lowercased()) else {
                return notFound("no activity has this update token yet")
            }
            return json(store.activity(id: activityID))
        case (.POST, "tokens", 3) where segments[2] == "expire":
            store.markExpired(token: segments[1])
            return json(store.device(token: segments[1]))
        case (.GET, "channels", 1):
            return json(store.channels(bundleID: query["bundle"]))
        case (.POST, "channels", 2) where segments[1] == "limit":
            guard let limit = try? JSONDecoder().decode(ChannelLimit.self, from: body), limit.limit >= 0 else {
                return badRequest("body is {\"limit\": Int >= 0}")
            }
            store.channelLimit = limit.limit
            return json(limit)
        case (.GET, "channels", 2):
            guard let view = store.channel(id: Self.channelID(segments[1])) else { return notFound("unknown channel") }
            return json(view)
        case (.DELETE, "channels", 2):
            guard let view = store.deleteChannel(id: Self.channelID(segments[1])) else {
                return notFound("unknown channel")
            }
            return json(view)
        case (.POST, "apps", 3) where segments[2] == "broadcast":
            guard var capability = try? JSONDecoder().decode(BroadcastCapability.self, from: body) else {
                return badRequest("body is {\"enabled\": Bool}")
            }
            capability.bundleID = segments[1]
            store.setBroadcast(enabled: capability.enabled, bundleID: segments[1])
            return json(capability)
        case (.POST, "faults", 1):
            guard let rule = try? JSONDecoder().decode(FaultRule.self, from: body) else {
                return badRequest(
                    "body is a fault rule: {status, reason, count | percent, latencyMs, goaway, drop, stall, token, "
                        + "kind, channel}")
            }
            store.addFault(rule)
            return json(store.faults())
        case (.GET, "faults", 1):
            return json(store.faults())
        case (.DELETE, "faults", 1):
            store.clearFaults()
            return json(store.faults())
        case (.POST, "reset", 1):
            store.reset(configuration: configuration)
            return json(["status": "reset"])
        default:
            return notFound("no such control endpoint")
        }
    }

    private struct Registration: Decodable {
        var bundleID: String?
        var environment: SimulatorConfiguration.Environment?
    }

    private struct Rotation: Decodable {
        var token: String
    }

    private struct Unregistration: Decodable {
        var timestamp: Int64?
    }

    private struct ChannelLimit: Codable {
        var limit: Int
    }

    private struct BroadcastCapability: Codable {
        var bundleID: String?
        var enabled: Bool
    }

    /// A channel id from a path segment: base64url is read as the standard alphabet.
    private static func channelID(_ segment: String) -> String {
        segment.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
    }

    private func json(_ value: some Encodable) -> ControlResponse {
        do {
            return ControlResponse(status: .ok, body: try Self.encoder.encode(value))
        } catch {
            return ControlResponse(status: .internalServerError, body: Data("{\"error\":\"encoding\"}".utf8))
        }
    }

    private func notFound(_ message: String) -> ControlResponse {
        ControlResponse(status: .notFound, body: (try? Self.encoder.encode(["error": message])) ?? Data())
    }

    private func badRequest(_ message: String) -> ControlResponse {
        ControlResponse(status: .badRequest, body: (try? Self.encoder.encode(["error": message])) ?? Data())
    }
}

final class ControlHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let router: ControlRouter
    private var head: HTTPRequestHead?
    private var body = Data()

    init(router: ControlRouter) { self.router = router }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            self.head = head
            body = Data()
        case .body(let buffer):
            body.append(contentsOf: buffer.readableBytesView)
        case .end:
            guard let head else { return }
            let response = router.route(method: head.method, uri: head.uri, body: body)
            var headers = HTTPHeaders()
            headers.add(name: "content-type", value: "application/json")
            headers.add(name: "content-length", value: String(response.body.count))
            let keepAlive = head.isKeepAlive
            if !keepAlive { headers.add(name: "connection", value: "close") }
            context.write(
                wrapOutboundOut(
                    .head(HTTPResponseHead(version: head.version, status: response.status, headers: headers))),
                promise: nil)
            context.write(wrapOutboundOut(.body(.byteBuffer(ByteBuffer(bytes: response.body)))), promise: nil)
            let done = context.writeAndFlush(wrapOutboundOut(.end(nil)))
            if !keepAlive {
                let loopBound = NIOLoopBound(context, eventLoop: context.eventLoop)
                done.whenComplete { _ in loopBound.value.close(promise: nil) }
            }
            self.head = nil
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }
}
