package import Foundation
package import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOHTTP2
import NIOPosix
import NIOSSL

/// apns-sim: a TLS HTTP/2 server that answers `POST /3/device/<token>`, broadcasts and channel management as
/// APNs does, with simulated phones behind the tokens and a JSON control API on a second port.
package enum APNsSimulator {
    /// Starts both listeners and returns once they accept connections.
    package static func start(_ configuration: SimulatorConfiguration, logger: Logger) async throws -> RunningSimulator
    {
        let certificate: (certificatePath: String, keyPath: String)
        if let files = configuration.certificate {
            certificate = (files.certificatePath, files.privateKeyPath)
        } else {
            let generated = try SelfSignedCertificate(hostNames: configuration.certificateHostNames)
            let directory = FileManager.default.temporaryDirectory
                .appendingPathComponent("apns-sim-\(UUID().uuidString.prefix(8))")
            do {
                try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
                let certificateURL = directory.appendingPathComponent("certificate.pem")
                let keyURL = directory.appendingPathComponent("private-key.pem")
                try Data(generated.certificatePEM.utf8).write(to: certificateURL)
                try Data(generated.privateKeyPEM.utf8).write(to: keyURL)
                certificate = (certificateURL.path, keyURL.path)
            } catch {
                throw SimulatorError(.certificate, "cannot write the generated certificate: \(error)")
            }
        }
        let sslContext: NIOSSLContext
        do {
            let chain = try NIOSSLCertificate.fromPEMFile(certificate.certificatePath)
            let key = try NIOSSLPrivateKey(file: certificate.keyPath, format: .pem)
            var tls = TLSConfiguration.makeServerConfiguration(
                certificateChain: chain.map { .certificate($0) }, privateKey: .privateKey(key))
            tls.applicationProtocols = ["h2"]
            tls.minimumTLSVersion = .tlsv12
            sslContext = try NIOSSLContext(configuration: tls)
        } catch {
            throw SimulatorError(.certificate, "cannot load the certificate or its key: \(error)")
        }

        let group = MultiThreadedEventLoopGroup(numberOfThreads: max(1, configuration.threads ?? System.coreCount))
        let store = SimulatorStore(configuration: configuration)
        let processor = RequestProcessor(configuration: configuration, store: store)
        let connectionIDs = ConnectionIDs()
        do {
            let apnsChannel = try await makeAPNsServer(
                group: group, configuration: configuration, sslContext: sslContext, processor: processor,
                connectionIDs: connectionIDs)
            if let warning = configuration.controlHostWarning { logger.warning("\(warning)") }
            let controlChannel = try await ControlServer.bind(
                group: group, host: configuration.controlHost, port: configuration.controlPort, store: store,
                configuration: configuration)
            let simulator = RunningSimulator(
                group: group, channels: [apnsChannel, controlChannel], store: store, configuration: configuration,
                host: configuration.host, port: apnsChannel.localAddress?.port ?? configuration.port,
                controlPort: controlChannel.localAddress?.port ?? configuration.controlPort,
                certificatePEMPath: certificate.certificatePath, privateKeyPEMPath: certificate.keyPath)
            logger.info(
                "apns-sim listening",
                metadata: [
                    SimulatorLoggingKeys.port: "\(simulator.port)",
                    SimulatorLoggingKeys.controlPort: "\(simulator.controlPort)",
                    SimulatorLoggingKeys.environment: "\(configuration.environment.rawValue)",
                ])
            return simulator
        } catch {
            try? await group.shutdownGracefully()
            throw error is SimulatorError
                ? error : SimulatorError(.bind, "cannot listen on \(configuration.host): \(error)")
        }
    }

    private static func makeAPNsServer(
        group: MultiThreadedEventLoopGroup,
        configuration: SimulatorConfiguration,
        sslContext: NIOSSLContext,
        processor: RequestProcessor,
        connectionIDs: ConnectionIDs
    ) async throws -> any Channel {
        var connectionConfiguration = NIOHTTP2Handler.ConnectionConfiguration()
        connectionConfiguration.initialSettings = [
            HTTP2Setting(parameter: .maxConcurrentStreams, value: max(1, configuration.streamsBeforeAuthentication)),
            HTTP2Setting(parameter: .maxHeaderListSize, value: 16384),
        ]
        connectionConfiguration.maximumRecentlyResetStreams = 10_000
        connectionConfiguration.maximumConnectionGlitches = 100_000
        var streamConfiguration = NIOHTTP2Handler.StreamConfiguration()
        streamConfiguration.streamResetFrameRateLimit.maximumCount = 1_000_000
        streamConfiguration.streamErrorRateLimit.maximumCount = 1_000_000
        let maxStreams =
            configuration.maxConcurrentStreams > configuration.streamsBeforeAuthentication
            ? configuration.maxConcurrentStreams : 0
        let connectionSettings = connectionConfiguration
        let streamSettings = streamConfiguration

        return try await ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: 1024)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.tcpOption(.tcp_nodelay), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let connection = ConnectionState(id: connectionIDs.next())
                    try channel.pipeline.syncOperations.addHandler(ConnectionCountingHandler(store: processor.store))
                    try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: sslContext))
                    _ = try channel.pipeline.syncOperations.configureHTTP2Pipeline(
                        mode: .server, connectionConfiguration: connectionSettings,
                        streamConfiguration: streamSettings
                    ) { stream in
                        stream.eventLoop.makeCompletedFuture {
                            try stream.pipeline.syncOperations.addHandler(
                                APNsStreamHandler(
                                    processor: processor, connection: connection, maxConcurrentStreams: maxStreams))
                        }
                    }
                    try channel.pipeline.syncOperations.addHandler(ConnectionErrorHandler())
                }
            }
            .bind(host: configuration.host, port: configuration.port)
            .get()
    }
}

/// Closes a connection on a connection-level error (TLS failure, protocol error) instead of logging noise.
final class ConnectionErrorHandler: ChannelInboundHandler, Sendable {
    typealias InboundIn = HTTP2Frame

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }
}

/// Hands out connection numbers for the records.
final class ConnectionIDs: Sendable {
    private let counter = NIOLockedValueBox(0)
    func next() -> Int {
        counter.withLockedValue { value in
            value += 1
            return value
        }
    }
}

/// A started simulator: its ports, its certificate, and the same controls as the HTTP control API.
package final class RunningSimulator: Sendable {
    /// Host the APNs listener is bound to (the control API's is the configuration's `controlHost`).
    package let host: String
    /// APNs (TLS HTTP/2) port.
    package let port: Int
    /// Control API (HTTP/1.1 JSON) port.
    package let controlPort: Int
    /// The served certificate (PEM): pass it to clients as their CA file.
    package let certificatePEMPath: String
    /// The served certificate's private key (PEM): pass it with the certificate to restart on the same identity.
    package let privateKeyPEMPath: String

    private let group: MultiThreadedEventLoopGroup
    private let channels: [any Channel]
    private let store: SimulatorStore
    private let configuration: SimulatorConfiguration
    private let isShutDown = NIOLockedValueBox(false)

    init(
        group: MultiThreadedEventLoopGroup,
        channels: [any Channel],
        store: SimulatorStore,
        configuration: SimulatorConfiguration,
        host: String,
        port: Int,
        controlPort: Int,
        certificatePEMPath: String,
        privateKeyPEMPath: String
    ) {
        self.group = group
        self.channels = channels
        self.store = store
        self.configuration = configuration
        self.host = host
        self.port = port
        self.controlPort = controlPort
        self.certificatePEMPath = certificatePEMPath
        self.privateKeyPEMPath = privateKeyPEMPath
    }

    /// `https://<host>:<port>`, the base URL for an APNs client.
    package var baseURL: String { "https://\(host):\(port)" }
    /// `http://<controlHost>:<controlPort>`.
    package var controlURL: String { "http://\(configuration.controlHost):\(controlPort)" }
    /// The certificate files, to start another simulator with the same identity (restart tests).
    package var certificateFiles: SimulatorConfiguration.CertificateFiles {
        .init(certificatePath: certificatePEMPath, privateKeyPath: privateKeyPEMPath)
    }

    /// Recorded requests, oldest first, optionally for one token (also matching the update token a
    /// push-to-start issued), one activity (also the broadcasts that reached it) or one channel (the
    /// `apns-channel-id` of the request, or the channel it created); `limit` keeps the newest.
    package func pushes(
        token: String? = nil,
        activity: String? = nil,
        channel: String? = nil,
        limit: Int? = nil
    ) -> [PushRecord] {
        store.pushes(token: token, activity: activity, channel: channel, limit: limit)
    }

    /// Kept records whose ``PushRecord/sequence`` is above `sequence`, oldest first: what arrived since a
    /// reader last saw that sequence (a long run reads its records as they come, beyond `recordLimit`).
    package func pushes(after sequence: Int) -> [PushRecord] { store.pushes(after: sequence) }

    /// What the phone behind a token shows.
    package func device(token: String) -> DeviceView? { store.device(token: token) }
    /// One activity's view.
    package func activity(id: String) -> ActivityView? { store.activity(id: id) }
    /// Tells APNs a token belongs to an app and environment (else the first push binds it).
    package func register(token: String, bundleID: String?, environment: SimulatorConfiguration.Environment? = nil) {
        store.register(token: token, bundleID: bundleID, environment: environment)
    }
    /// From now on the token gets 410 `Unregistered` with this time (default: now).
    package func markUnregistered(token: String, at date: Date? = nil) {
        store.markUnregistered(token: token, at: date)
    }
    /// From now on the token gets 410 `ExpiredToken`.
    package func markExpired(token: String) { store.markExpired(token: token) }
    /// The phone rotated the update token of the activity behind `old` to `new` (as ActivityKit
    /// does): later pushes to `new` update the same activity. Returns its id; nil when `old` has no
    /// activity yet.
    @discardableResult
    package func rotate(token old: String, to new: String) -> String? { store.rotate(token: old, to: new) }
    /// Broadcast channels, deleted ones too, oldest first; optionally one app's.
    package func channels(bundleID: String? = nil) -> [ChannelView] { store.channels(bundleID: bundleID) }
    /// One channel.
    package func channel(id: String) -> ChannelView? { store.channel(id: id) }
    /// Deletes a channel as Apple may: later broadcasts to it get `ChannelNotRegistered`. Nil when unknown.
    @discardableResult
    package func deleteChannel(id: String) -> ChannelView? { store.deleteChannel(id: id) }
    /// Turns an app's broadcast capability on or off (`FeatureNotEnabled` while off); off deletes all its
    /// channels, as Apple does.
    package func setBroadcast(enabled: Bool, bundleID: String) {
        store.setBroadcast(enabled: enabled, bundleID: bundleID)
    }
    /// Live channels an app may have (`CannotCreateChannelConfig` beyond); a reset restores the configured one.
    package var channelLimit: Int {
        get { store.channelLimit }
        set { store.channelLimit = newValue }
    }
    /// Adds a fault rule (see ``FaultRule``).
    package func injectFault(_ rule: FaultRule) { store.addFault(rule) }
    /// Removes every fault rule.
    package func clearFaults() { store.clearFaults() }
    /// Forgets records, devices, channels and faults.
    package func reset() { store.reset(configuration: configuration) }
    /// Connection and request counters.
    package var statistics: SimulatorStatistics { store.statistics }

    /// Closes both listeners and every connection.
    package func shutdown() async throws {
        let first = isShutDown.withLockedValue { value in
            defer { value = true }
            return !value
        }
        guard first else { return }
        for channel in channels { try? await channel.close() }
        try await group.shutdownGracefully()
    }
}

/// Logger metadata keys of the simulator.
package enum SimulatorLoggingKeys {
    package static let port = "apns_sim.port"
    package static let controlPort = "apns_sim.control_port"
    package static let environment = "apns_sim.environment"
}
