import APNs
import Foundation
import LiveDelivery
import LiveDeliveryCore
import Logging
import Postgres
import Synchronization
import TestSupport
import Testing

let quietLogger = Logger(label: "livedelivery-reporting-test") { _ in SwiftLogNoOpLogHandler() }
let testApp = "com.example.delivery"

/// A fresh database `ld_rep_<unique>` on the main PostgreSQL, migrated with the project's sql/.
struct ReportDatabase {
    let name: String
    let url: String
    let client: PostgresClient

    static var migrationsDirectory: String { TestEnvironment.projectRoot.appendingPathComponent("sql").path }

    static func create() async throws -> ReportDatabase {
        let name = "ld_rep_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").prefix(16).lowercased()
        let admin = PostgresClient(
            configuration: try PostgresConfiguration(TestEnvironment.postgresURL), logger: quietLogger)
        do {
            try await admin.withConnection { try await $0.execute(unsafeSQL: "CREATE DATABASE \(name)") }
        } catch {
            await admin.shutdown()
            throw error
        }
        await admin.shutdown()
        var components = try #require(URLComponents(string: TestEnvironment.postgresURL))
        components.path = "/" + name
        let url = try #require(components.string)
        let client = PostgresClient(configuration: try PostgresConfiguration(url), logger: quietLogger)
        let database = ReportDatabase(name: name, url: url, client: client)
        do {
            try await Migrator(directory: migrationsDirectory).migrate(client: client, logger: quietLogger)
        } catch {
            await database.drop()
            throw error
        }
        return database
    }

    /// Runs `body` with a fresh database, dropped afterwards.
    static func with<Result>(_ body: (ReportDatabase) async throws -> Result) async throws -> Result {
        let database = try await create()
        do {
            let result = try await body(database)
            await database.drop()
            return result
        } catch {
            await database.drop()
            throw error
        }
    }

    func drop() async {
        await client.shutdown()
        guard
            let admin = try? PostgresClient(
                configuration: PostgresConfiguration(TestEnvironment.postgresURL), logger: quietLogger)
        else { return }
        _ = try? await admin.withConnection {
            try await $0.execute(unsafeSQL: "DROP DATABASE IF EXISTS \(name) WITH (FORCE)")
        }
        await admin.shutdown()
    }

    func count(_ query: PostgresQuery) async throws -> Int {
        try await client.query(query).first.map { try $0.decode(Int.self, at: 0) } ?? 0
    }

    func strings(_ query: PostgresQuery) async throws -> [String] {
        try await client.query(query).map { try $0.decode(String.self, at: 0) }
    }
}

/// The shipped policy and content mapping (Config/).
func shippedTracking() throws -> TrackingConfiguration {
    let folder = TestEnvironment.projectRoot.appendingPathComponent("Config")
    return try DefaultConfiguration.load(
        policyJSON: Array(try Data(contentsOf: folder.appendingPathComponent("policy.json"))),
        mappingJSON: Array(try Data(contentsOf: folder.appendingPathComponent("content-mapping.json"))))
}

/// A PushSending that answers from a script: the first matching rule wins, else 200.
final class ScriptedSender: PushSending {
    struct Rule: Sendable {
        var orderID: String
        var kind: PlannedPush.Kind
        var outcome: APNsOutcome
        var times: Int
    }

    private let rules = Mutex<[Rule]>([])
    private let sent = Mutex<[PlannedPush]>([])

    /// The next `times` pushes of this kind to this order get `outcome`.
    func fail(_ orderID: String, _ kind: PlannedPush.Kind, with outcome: APNsOutcome, times: Int = 1) {
        rules.withLock { $0.append(Rule(orderID: orderID, kind: kind, outcome: outcome, times: times)) }
    }

    var pushes: [PlannedPush] { sent.withLock { $0 } }

    func send(_ push: PlannedPush) async -> APNsOutcome {
        sent.withLock { $0.append(push) }
        return rules.withLock { rules in
            guard let index = rules.firstIndex(where: { $0.orderID == push.orderID && $0.kind == push.kind }) else {
                return .delivered(apnsID: UUID(uuidString: push.apnsID) ?? UUID())
            }
            rules[index].times -= 1
            let outcome = rules[index].outcome
            if rules[index].times == 0 { rules.remove(at: index) }
            return outcome
        }
    }

    func shutdown() async {}
}

/// The worker's parts on one database, with a scripted APNs.
struct Pipeline {
    let database: ReportDatabase
    let tracking: TrackingConfiguration
    let sender = ScriptedSender()
    let metrics = WorkerMetrics()
    let processor: EventProcessor
    let dispatcher: PushDispatcher

    init(database: ReportDatabase) throws {
        self.database = database
        self.tracking = try shippedTracking()
        self.processor = EventProcessor(
            client: database.client, tracking: tracking, metrics: metrics, logger: quietLogger)
        var configuration = WorkerConfiguration.Dispatcher()
        configuration.maxAttempts = 2
        self.dispatcher = PushDispatcher(
            configuration: configuration, workerID: "reporting-test", client: database.client, sender: sender,
            tracking: tracking, health: WorkerHealth(), metrics: metrics, logger: quietLogger)
    }

    /// Applies the events, then sends every due push.
    @discardableResult
    func apply(_ messages: InboundMessage...) async throws -> BatchOutcome {
        let outcome = try await processor.process(messages)
        try await drain()
        return outcome
    }

    /// Sends pushes until the outbox is empty (a push may wait for the next second: APNs timestamps
    /// strictly increase).
    func drain() async throws {
        try await eventually("the outbox is empty") {
            try await dispatcher.dispatchOnce()
            return try await database.count("SELECT count(*) FROM outbox") == 0
        }
    }

    func sweeper(now: @escaping @Sendable () -> Date) -> Sweeper {
        Sweeper(
            configuration: WorkerConfiguration.Sweeper(), client: database.client, tracking: tracking,
            metrics: metrics, logger: quietLogger, now: now)
    }
}

/// Event bodies (events.md).
enum Events {
    static func token() -> String {
        (0..<32).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined()
    }

    static func status(
        _ orderID: String, _ status: String, sequence: Int, user: String = "u-rep", id: String = UUID().uuidString
    ) -> InboundMessage {
        let body = """
            {"type":"order.status","version":1,"event_id":"\(id)","occurred_at":"2026-11-21T10:04:0\(sequence % 10)Z",\
            "order_id":"\(orderID)","user_id":"\(user)","sequence":\(sequence),"status":"\(status)","order_number":42,\
            "merchant":{"name":"Pizza Place"},"courier":{"name":"Sam"},\
            "eta":{"earliest":"2026-11-21T10:20:00Z","latest":"2026-11-21T10:30:00Z"}}
            """
        return InboundMessage(body: Array(body.utf8), routingKey: "order.status", messageID: id)
    }

    static func activityToken(
        _ orderID: String, activity: String, token: String, id: String = UUID().uuidString
    ) -> InboundMessage {
        let body = """
            {"type":"activity.token","version":1,"event_id":"\(id)","occurred_at":"2026-11-21T10:04:00Z",\
            "order_id":"\(orderID)","activity_id":"\(activity)","device_id":"d-\(activity)","token":"\(token)",\
            "bundle_id":"\(testApp)","environment":"production"}
            """
        return InboundMessage(body: Array(body.utf8), routingKey: "activity.token", messageID: id)
    }
}
