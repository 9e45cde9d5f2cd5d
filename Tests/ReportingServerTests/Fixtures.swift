import APNs
import Foundation
import LiveDelivery
import LiveDeliveryCore
import Logging
import Postgres
import Synchronization
import TestSupport
import Testing

let testApp = Events.bundleID

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
    let database: TestDatabase
    let tracking: TrackingConfiguration
    let sender = ScriptedSender()
    let metrics = WorkerMetrics()
    let processor: EventProcessor
    let dispatcher: PushDispatcher

    init(database: TestDatabase) throws {
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
