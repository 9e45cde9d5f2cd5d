import APNsSimulator
import ArgumentParser
import Crypto
import DeviceAgent
import Foundation
import LiveDeliveryCore
import Logging
import RabbitMQ

/// `apns-sim`: a faithful APNs simulator (TLS HTTP/2) with simulated devices and a JSON control API.
@main
struct APNsSimCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "apns-sim",
        abstract:
            "Simulates APNs (device pushes, broadcasts and channels over TLS HTTP/2) and the phones behind the tokens.",
        version: LiveDeliveryVersion.description,
        subcommands: [Serve.self, KeyGen.self, Token.self],
        defaultSubcommand: Serve.self
    )
}

struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "serve", abstract: "Runs the simulator.")

    @Option(help: "Address to listen on.")
    var host: String = "127.0.0.1"

    @Option(help: "APNs (TLS HTTP/2) port; 0 picks a free one.")
    var port: Int = 2197

    @Option(name: .customLong("control-port"), help: "Control API (HTTP/1.1 JSON) port; 0 picks a free one.")
    var controlPort: Int = 2198

    @Option(
        name: .customLong("control-host"),
        help: """
            Address the control API listens on. It is unauthenticated (reset, faults, full device tokens): \
            another address than loopback is warned about.
            """)
    var controlHost: String = "127.0.0.1"

    @Option(help: "Certificate chain to serve (PEM). Without it a self-signed one is generated.")
    var certificate: String?

    @Option(name: .customLong("private-key"), help: "The certificate's private key (PEM).")
    var privateKey: String?

    @Option(
        name: .customLong("certificate-host"),
        help: "A name the generated certificate is for (default localhost and 127.0.0.1). Repeatable.")
    var certificateHosts: [String] = []

    @Option(
        name: .customLong("key"),
        help: "An accepted provider key, KEYID=TEAMID:/path/key.pem (public key or the .p8 private key). Repeatable.")
    var keys: [String] = []

    @Flag(
        name: .customLong("accept-any-key"), help: "Accept any well-formed ES256 token without checking its signature.")
    var acceptAnyKey = false

    @Option(help: "The environment this simulator plays: production or sandbox.")
    var environment: String = "production"

    @Option(
        name: .customLong("priority10-budget"),
        help: "Priority-10 pushes per activity per hour before silent throttling.")
    var priority10Budget: Int?

    @Option(
        name: .customLong("content-state-shape"),
        help: "The app's content-state shape (JSON), e.g. Config/apns-sim/delivery-attributes.json.")
    var contentStateShape: String?

    @Option(
        name: .customLong("channel-limit"),
        help: "Live broadcast channels an app may have before CannotCreateChannelConfig (Apple: 10000).")
    var channelLimit: Int = 10_000

    @Option(name: .customLong("max-streams"), help: "Streams per connection once authenticated.")
    var maxStreams: Int = 1000

    @Option(
        name: .customLong("streams-before-auth"),
        help: "Streams per connection before the first valid provider token (Apple: 1).")
    var streamsBeforeAuth: Int = 1

    @Option(name: .customLong("record-limit"), help: "Requests kept for the control API.")
    var recordLimit: Int = 100_000

    @Option(help: "Event-loop threads (default: one per core).")
    var threads: Int?

    @Option(name: .customLong("log-level"), help: "trace, debug, info, notice, warning, error, critical.")
    var logLevel: String = "info"

    @Option(
        name: .customLong("agent-knows"),
        help: ArgumentHelp(
            "Runs the device agent: the app on the phones, which knows what these JSON-lines event files say.",
            discussion: """
                Repeat it for several files. When a push-to-start starts an activity, the agent publishes the \
                `activity.token` report the app would make (its activity id and update token, with the order id \
                of the start's order number), with publisher confirms, to the events exchange on the broker of \
                $LIVEDELIVERY_AMQP_URL. A start for an order the files do not name is not reported.
                """))
    var agentKnows: [String] = []

    @Option(
        name: .customLong("agent-exchange"),
        help: "The events exchange the agent publishes to (default: $LIVEDELIVERY_AMQP_EXCHANGE, else delivery.events)."
    )
    var agentExchange: String?

    func run() async throws {
        var logger = Logger(label: "apns-sim")
        logger.logLevel = Logger.Level(rawValue: logLevel) ?? .info

        var configuration = SimulatorConfiguration()
        configuration.host = host
        configuration.port = port
        configuration.controlPort = controlPort
        configuration.controlHost = controlHost
        switch (certificate, privateKey) {
        case (let certificate?, let privateKey?):
            configuration.certificate = .init(certificatePath: certificate, privateKeyPath: privateKey)
        case (nil, nil):
            break
        default:
            throw ValidationError("--certificate and --private-key go together")
        }
        if !certificateHosts.isEmpty { configuration.certificateHostNames = certificateHosts }
        configuration.keys = try keys.map { try SimulatorConfiguration.AcceptedKey(argument: $0) }
        configuration.acceptUnknownKeys = acceptAnyKey
        guard let environment = SimulatorConfiguration.Environment(rawValue: environment) else {
            throw ValidationError("--environment is production or sandbox")
        }
        configuration.environment = environment
        configuration.priority10BudgetPerHour = priority10Budget
        configuration.contentStateShape = try contentStateShape.map { try ContentStateShape(contentsOfFile: $0) }
        guard channelLimit >= 0 else { throw ValidationError("--channel-limit is 0 or more") }
        configuration.channelLimit = channelLimit
        configuration.maxConcurrentStreams = maxStreams
        configuration.streamsBeforeAuthentication = streamsBeforeAuth
        configuration.recordLimit = recordLimit
        configuration.threads = threads
        if configuration.keys.isEmpty && !acceptAnyKey {
            logger.warning("no --key given: every provider token will be refused (InvalidProviderToken)")
        }

        let agent = try deviceAgent(logger: logger)
        let (starts, startsContinuation) = AsyncStream.makeStream(of: PushRecord.self)
        if agent != nil { configuration.onActivityStarted = { startsContinuation.yield($0) } }
        let agentTask = agent.map { agent in Task { await agent.run(starts) } }

        let simulator = try await APNsSimulator.start(configuration, logger: logger)
        print("apns-sim: APNs at \(simulator.baseURL), control API at \(simulator.controlURL)")
        print("apns-sim: certificate \(simulator.certificatePEMPath) (give it to clients as their CA file)")
        fflush(nil)
        await waitForTermination()
        try await simulator.shutdown()
        startsContinuation.finish()
        await agentTask?.value
    }

    /// The device agent `--agent-knows` asks for, on the broker of `$LIVEDELIVERY_AMQP_URL` (a URL holds a
    /// password, so it is read from the environment, never from the command line).
    private func deviceAgent(logger: Logger) throws -> DeviceAgent? {
        guard !agentKnows.isEmpty else { return nil }
        let environment = ProcessInfo.processInfo.environment
        guard let urls = environment["LIVEDELIVERY_AMQP_URL"], !urls.isEmpty else {
            throw ValidationError("--agent-knows needs $LIVEDELIVERY_AMQP_URL: the broker the app's reports go to")
        }
        let knowledge = try DeviceAgent.Knowledge(files: agentKnows.map { URL(fileURLWithPath: $0) })
        let exchange =
            agentExchange ?? environment["LIVEDELIVERY_AMQP_EXCHANGE"].flatMap { $0.isEmpty ? nil : $0 }
            ?? "delivery.events"
        logger.info(
            "device agent: knows \(knowledge.devices.count) push-to-start tokens and \(knowledge.orders.count) orders; reports to exchange \(exchange)"
        )
        return DeviceAgent(
            knowledge: knowledge, endpoints: try AMQPEndpoints(urls: urls.split(separator: ",").map(String.init)),
            exchange: exchange, logger: logger)
    }

    private func waitForTermination() async {
        signal(SIGINT, SIG_IGN)
        signal(SIGTERM, SIG_IGN)
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let once = Once(continuation)
            let queue = DispatchQueue(label: "apns-sim.signals")
            for number in [SIGINT, SIGTERM] {
                let source = DispatchSource.makeSignalSource(signal: number, queue: queue)
                source.setEventHandler { once.resume() }
                source.resume()
                Once.keep(source)
            }
        }
    }
}

/// Resumes a continuation once, whichever signal comes first.
private final class Once: @unchecked Sendable {
    // Touched only from the signal sources' serial queue (and `keep` before they can fire).
    private var continuation: CheckedContinuation<Void, Never>?
    nonisolated(unsafe) private static var sources: [any DispatchSourceSignal] = []

    init(_ continuation: CheckedContinuation<Void, Never>) { self.continuation = continuation }

    func resume() {
        continuation?.resume()
        continuation = nil
    }

    static func keep(_ source: any DispatchSourceSignal) { sources.append(source) }
}

struct KeyGen: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "keygen",
        abstract: "Writes a new P-256 provider key (.p8, PKCS#8 PEM) for use with the simulator.")

    @Option(help: "Where to write the .p8 file.")
    var out: String

    func run() async throws {
        let key = P256.Signing.PrivateKey()
        // Its owner's alone from the first byte: created 0600, never widened afterwards.
        guard
            FileManager.default.createFile(
                atPath: out, contents: Data(key.pemRepresentation.utf8), attributes: [.posixPermissions: 0o600])
        else { throw ValidationError("cannot write \(out)") }
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: out)
        print("wrote \(out); start the simulator with --key KEYID=TEAMID:\(out)")
    }
}

struct Token: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "token",
        abstract: "Prints a provider token (ES256 JWT, valid for an hour) for curl or h2load.")

    @Option(name: .customLong("key-id"), help: "The key id (JWT kid).")
    var keyID: String

    @Option(name: .customLong("team-id"), help: "The team id (JWT iss).")
    var teamID: String

    @Option(help: "The .p8 private key.")
    var key: String

    func run() async throws {
        let privateKey = try P256.Signing.PrivateKey(pemRepresentation: String(contentsOfFile: key, encoding: .utf8))
        func base64URL(_ data: Data) -> String {
            data.base64EncodedString().replacingOccurrences(of: "+", with: "-")
                .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
        }
        let header = base64URL(Data(#"{"alg":"ES256","kid":"\#(keyID)"}"#.utf8))
        let claims = base64URL(Data(#"{"iss":"\#(teamID)","iat":\#(Int(Date().timeIntervalSince1970))}"#.utf8))
        let signature = try privateKey.signature(for: Data((header + "." + claims).utf8))
        print(header + "." + claims + "." + base64URL(signature.rawRepresentation))
    }
}
