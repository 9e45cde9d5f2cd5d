import APNsSimulator
import Foundation
import LiveDeliveryCore
import Postgres
import Synchronization
import TestSupport
import Testing

@testable import LiveDelivery

/// A clock the test moves by hand (the worker pieces take `now:` closures).
final class TestClock: Sendable {
    private let date: Mutex<Date>
    init(_ start: Date) { date = Mutex(start) }
    var now: Date { date.withLock { $0 } }
    func set(_ new: Date) { date.withLock { $0 = new } }
    var closure: @Sendable () -> Date { { self.now } }
}

extension Events {
    /// An `activity.token` from a given device (the app reporting a started activity's token).
    static func deviceToken(
        _ orderID: String, activity: String, token: String, device: String, id: String = UUID().uuidString,
        at: String = "2026-11-21T10:04:06Z"
    ) -> InboundMessage {
        let body = """
            {"type":"activity.token","version":1,"event_id":"\(id)","occurred_at":"\(at)","order_id":"\(orderID)",\
            "activity_id":"\(activity)","device_id":"\(device)","token":"\(token)","bundle_id":"\(bundleID)",\
            "environment":"production"}
            """
        return InboundMessage(body: Array(body.utf8), routingKey: "activity.token", messageID: id)
    }
}

/// Sweep times a test's clock can reach: a 2-hour lifetime ended 30 minutes early, a 1-hour idle timeout.
func shortSweepTimes(_ configuration: inout WorkerConfiguration) {
    configuration.tracking.policy.sweep.lifetime = 7200
    configuration.tracking.policy.sweep.lifetimeMargin = 1800
    configuration.tracking.policy.sweep.idleTimeout = 3600
}

/// Sends everything due with these dispatchers (concurrently) until the outbox is empty.
func drain(_ harness: Harness, _ workers: Worker...) async throws {
    try await eventually("the outbox is empty") {
        try await withThrowingTaskGroup(of: Int.self) { group in
            for worker in workers { group.addTask { try await worker.dispatcher.dispatchOnce() } }
            try await group.waitForAll()
        }
        return try await harness.database.count("SELECT count(*) FROM outbox") == 0
    }
}

func acceptedPushes(_ harness: Harness, token: String, event: String? = nil) -> [PushRecord] {
    harness.simulator.pushes(token: token).filter { record in
        record.status == 200 && (event.map { record.payload.contains("\"event\":\"\($0)\"") } ?? true)
    }
}

@Suite("Lifecycle", .timeLimit(.minutes(6)))
struct LifecycleTests {
    @Test("push-to-start: duplicates and two workers give one start; the reported token gets the newest state")
    func pushToStartEndToEnd() async throws {
        try await withWorker { harness, worker in
            let second = try harness.worker()
            let user = TestEnvironment.uniqueName("u")
            let device = TestEnvironment.uniqueName("iphone")
            let order = TestEnvironment.uniqueName("O")
            let startToken = Events.token()
            let registration = Events.pushToStart(user: user, device: device, token: startToken)
            let confirmed = Events.status(order, "confirmed", sequence: 1, user: user)
            let reReported = Events.pushToStart(
                user: user, device: device, token: startToken, at: "2026-11-21T10:01:00Z")
            async let a = worker.processor.process([registration, confirmed])
            async let b = second.processor.process([confirmed, registration, reReported])
            _ = try await (a, b)
            _ = try await second.processor.process([Events.status(order, "preparing", sequence: 2, user: user)])
            try await drain(harness, worker, second)

            let starts = acceptedPushes(harness, token: startToken, event: "start")
            #expect(starts.count == 1)
            #expect(harness.simulator.pushes(token: startToken).count == 1)
            let start = try #require(starts.first)
            #expect(start.verdict.kind == .started)
            let activityID = try #require(start.activityID)
            let updateToken = try #require(start.issuedUpdateToken)
            #expect(
                try await harness.database.strings("SELECT state FROM activities WHERE order_id = \(order)") == [
                    "starting"
                ])

            // A newer state while the app has not reported the token yet: held.
            _ = try await worker.processor.process([
                Events.status(order, "picked_up", sequence: 3, user: user, courier: "Ana")
            ])
            #expect(try await harness.database.count("SELECT count(*) FROM outbox") == 0)
            // The app reports the token the start issued (twice, through both workers).
            let report = Events.deviceToken(order, activity: activityID, token: updateToken, device: device)
            async let c = worker.processor.process([report])
            async let d = second.processor.process([report])
            _ = try await (c, d)
            try await drain(harness, worker, second)
            let updates = acceptedPushes(harness, token: updateToken, event: "update")
            #expect(updates.count == 1)
            #expect(try contentState(try #require(updates.first))["currentStep"] as? String == "pickedUp")
            #expect(
                try await harness.database.strings("SELECT state FROM activities WHERE order_id = \(order)") == [
                    "active"
                ])
            #expect(harness.simulator.pushes(token: startToken).count == 1)
            await second.dispatcher.sender.shutdown()
            await second.client.shutdown()
        }
    }

    @Test("every sweeper rule, two sweepers at once: each leaked activity is ended exactly once, with its reason")
    func sweeperRules() async throws {
        let base = Date().addingTimeInterval(-7000)
        let clock = TestClock(base)
        try await withWorker(
            adjust: {
                shortSweepTimes(&$0)
                $0.tracking.policy.sweep.adoptionTimeout = 600
                $0.dispatcher.maxAttempts = 2
            }, now: clock.closure
        ) { harness, worker in
            let second = try harness.worker(now: clock.closure)
            func at(_ seconds: Double) { clock.set(base.addingTimeInterval(seconds)) }
            func tracked(_ status: String) async throws -> (order: String, token: String) {
                let order = TestEnvironment.uniqueName("O")
                let token = Events.token()
                _ = try await worker.processor.process([
                    Events.status(order, status, sequence: 1, user: TestEnvironment.uniqueName("u")),
                    Events.activityToken(order, activity: "act-" + order, token: token),
                ])
                try await drain(harness, worker)
                return (order, token)
            }

            at(0)
            let lifetime = try await tracked("out_for_delivery")
            at(2000)
            let idle = try await tracked("preparing")
            at(3000)
            _ = try await worker.processor.process([
                Events.status(lifetime.order, "arriving", sequence: 2, at: "2026-11-21T10:30:00Z")
            ])
            try await drain(harness, worker)
            at(5000)
            let adoptionUser = TestEnvironment.uniqueName("u")
            let adoption = TestEnvironment.uniqueName("O")
            let startToken = Events.token()
            _ = try await worker.processor.process([
                Events.pushToStart(user: adoptionUser, device: TestEnvironment.uniqueName("d"), token: startToken),
                Events.status(adoption, "confirmed", sequence: 1, user: adoptionUser),
            ])
            try await drain(harness, worker)
            let issued = try #require(
                acceptedPushes(harness, token: startToken, event: "start").first?.issuedUpdateToken)
            let terminal = try await tracked("preparing")
            at(5100)
            harness.simulator.injectFault(
                FaultRule(status: 500, reason: "InternalServerError", count: 2, token: terminal.token))
            _ = try await worker.processor.process([
                Events.status(terminal.order, "delivered", sequence: 2, at: "2026-11-21T10:30:00Z")
            ])
            try await drain(harness, worker)
            #expect(
                try await harness.database.strings("SELECT state FROM activities WHERE order_id = \(terminal.order)")
                    == ["ending"])
            #expect(acceptedPushes(harness, token: terminal.token, event: "end").isEmpty)

            at(6000)
            async let a = worker.sweeper.sweepAll()
            async let b = second.sweeper.sweepAll()
            let (first, other) = try await (a, b)
            var summary = first
            summary.actions += other.actions
            #expect(
                summary.reasonCounts == [
                    "sweep_lifetime": 1, "sweep_idle": 1, "sweep_never_adopted": 1, "sweep_terminal_not_ended": 1,
                ])
            try await drain(harness, worker, second)

            for (order, reason) in [
                (lifetime.order, "sweep_lifetime"), (idle.order, "sweep_idle"),
                (terminal.order, "sweep_terminal_not_ended"),
            ] {
                #expect(
                    try await harness.database.strings(
                        "SELECT state || ' ' || end_reason FROM activities WHERE order_id = \(order)")
                        == ["ended \(reason)"])
                #expect(
                    try await harness.database.strings(
                        "SELECT code FROM timeline_decisions WHERE order_id = \(order) AND kind = 'sweep'"
                    ).contains(reason))
            }
            #expect(
                try await harness.database.strings(
                    "SELECT state || ' ' || end_reason FROM activities WHERE order_id = \(adoption)")
                    == ["failed sweep_never_adopted"])
            for token in [lifetime.token, idle.token, terminal.token] {
                #expect(acceptedPushes(harness, token: token, event: "end").count == 1)
            }
            let metrics = String(decoding: worker.metrics.exposition() + second.metrics.exposition(), as: UTF8.self)
            for reason in ["sweep_lifetime", "sweep_idle", "sweep_never_adopted", "sweep_terminal_not_ended"] {
                #expect(metrics.contains("livedelivery_sweeps_total{reason=\"\(reason)\"}"))
            }

            // Nothing is left to sweep, and the given-up start is never pushed to.
            at(6100)
            #expect(try await worker.sweeper.sweepAll().actions.isEmpty)
            _ = try await worker.processor.process([
                Events.status(adoption, "picked_up", sequence: 2, user: adoptionUser)
            ])
            try await drain(harness, worker)
            #expect(harness.simulator.pushes(token: issued).filter { $0.deviceToken == issued }.isEmpty)
            #expect(harness.simulator.pushes(token: startToken).count == 1)
            await second.dispatcher.sender.shutdown()
            await second.client.shutdown()
        }
    }

    @Test("events leave the sweep column at its earlier time; the sweeper moves it to the state's own and sweeps then")
    func sweepColumnKeepsEarlierTime() async throws {
        let base = Date().addingTimeInterval(-7000)
        let clock = TestClock(base)
        try await withWorker(
            adjust: shortSweepTimes, now: clock.closure
        ) { harness, worker in
            func at(_ seconds: Double) { clock.set(base.addingTimeInterval(seconds)) }
            /// The column and the state's own time, in seconds after `base`.
            func sweepTimes(_ order: String) async throws -> (column: Double?, state: Double?) {
                let rows = try await harness.database.client.query(
                    """
                    SELECT extract(epoch FROM next_sweep_at)::float8 AS sweep_column, state
                    FROM orders WHERE order_id = \(order)
                    """)
                let row = try #require(rows.first)
                let state = try OrderStore.decodeState(try row.decode([UInt8]?.self, "state"))
                return (
                    try row.decode(Double?.self, "sweep_column").map { ($0 - base.timeIntervalSince1970).rounded() },
                    state?.nextSweepAt.map {
                        ($0.timeIntervalSinceReferenceDate - base.timeIntervalSinceReferenceDate).rounded()
                    }
                )
            }
            let order = TestEnvironment.uniqueName("O")
            let token = Events.token()
            at(0)
            _ = try await worker.processor.process([
                Events.status(order, "preparing", sequence: 1, user: TestEnvironment.uniqueName("u")),
                Events.activityToken(order, activity: "act-" + order, token: token),
            ])
            try await drain(harness, worker)
            var times = try await sweepTimes(order)
            #expect(times.column == 3600 && times.state == 3600)

            // The event moves the idle deadline on; the column keeps the earlier time.
            at(1000)
            _ = try await worker.processor.process([Events.status(order, "picked_up", sequence: 2, courier: "Ana")])
            try await drain(harness, worker)
            times = try await sweepTimes(order)
            #expect(times.column == 3600 && times.state == 4600)

            // At the column's time the sweeper does nothing but move it to the state's own.
            at(4000)
            let early = try await worker.sweeper.sweepAll()
            #expect(early.orders == 1 && early.actions.isEmpty)
            times = try await sweepTimes(order)
            #expect(times.column == 4600 && times.state == 4600)
            #expect(try await harness.database.count("SELECT count(*) FROM outbox") == 0)
            #expect(
                try await harness.database.count(
                    "SELECT count(*) FROM timeline WHERE order_id = \(order) AND kind = 'sweep'") == 0)

            // At the state's own time the idle activity is ended, and once the order is settled the
            // column is cleared.
            at(4700)
            #expect(try await worker.sweeper.sweepAll().reasonCounts == ["sweep_idle": 1])
            try await drain(harness, worker)
            #expect(
                try await harness.database.strings(
                    "SELECT state || ' ' || end_reason FROM activities WHERE order_id = \(order)") == [
                        "ended sweep_idle"
                    ])
            #expect(acceptedPushes(harness, token: token, event: "end").count == 1)
            times = try await sweepTimes(order)
            #expect(times.column == nil && times.state == nil)
        }
    }

    @Test("token rotation sends to the new token only; a 410 fails the activity; a later token is never used")
    func rotationAndInvalidation() async throws {
        try await withWorker { harness, worker in
            let (order, first) = try await trackedOrder(worker)
            try await drain(harness, worker)
            let rotated = Events.token()
            _ = try await worker.processor.process([
                Events.activityToken(order, activity: "act-" + order, token: rotated, at: "2026-11-21T10:05:00Z"),
                Events.status(order, "preparing", sequence: 2),
            ])
            try await drain(harness, worker)
            #expect(harness.simulator.pushes(token: first).count == 1)
            #expect(acceptedPushes(harness, token: rotated).count == 1)
            #expect(
                try await harness.database.strings("SELECT code FROM timeline_decisions WHERE order_id = \(order)")
                    .contains(
                        "token_rotated"))

            harness.simulator.markUnregistered(token: rotated)
            _ = try await worker.processor.process([Events.status(order, "picked_up", sequence: 3, courier: "Ana")])
            try await drain(harness, worker)
            #expect(
                try await harness.database.strings("SELECT state FROM activities WHERE order_id = \(order)") == [
                    "failed"
                ])

            let late = Events.token()
            _ = try await worker.processor.process([
                Events.activityToken(order, activity: "act-" + order, token: late, at: "2026-11-21T10:06:00Z"),
                Events.status(order, "out_for_delivery", sequence: 4, courier: "Ana"),
            ])
            #expect(try await harness.database.count("SELECT count(*) FROM outbox") == 0)
            #expect(
                try await harness.database.strings("SELECT code FROM timeline_decisions WHERE order_id = \(order)")
                    .contains(
                        "token_for_final_activity"))
            #expect(harness.simulator.pushes(token: late).isEmpty)
            #expect(harness.simulator.pushes(token: first).count == 1)
        }
    }

    @Test("the per-device start limit holds back the sixth start; the sweeper plans it later")
    func startLimit() async throws {
        try await withWorker { harness, worker in
            #expect(harness.configuration.pushToStart.maxStartsPerDevice == 5)
            let user = TestEnvironment.uniqueName("u")
            let device = TestEnvironment.uniqueName("iphone")
            let startToken = Events.token()
            _ = try await worker.processor.process([Events.pushToStart(user: user, device: device, token: startToken)])
            var orders: [String] = []
            for index in 0..<6 {
                let order = TestEnvironment.uniqueName("O\(index)")
                orders.append(order)
                _ = try await worker.processor.process([Events.status(order, "confirmed", sequence: 1, user: user)])
                if index == 2 { try await drain(harness, worker) }
            }
            try await drain(harness, worker)
            #expect(acceptedPushes(harness, token: startToken, event: "start").count == 5)
            let held = orders[5]
            #expect(
                try await harness.database.strings(
                    "SELECT state || ' ' || coalesce(pending_kind, '-') FROM activities WHERE order_id = \(held)")
                    == ["pending_start -"])
            #expect(
                try await harness.database.strings("SELECT code FROM timeline_decisions WHERE order_id = \(held)")
                    .contains(
                        "start_device_refused"))

            // Past the window the sweeper plans the held start.
            let later = Date().addingTimeInterval(900)
            let sweeper = Sweeper(
                configuration: harness.configuration.sweeper, client: worker.client,
                tracking: harness.configuration.tracking, metrics: worker.metrics, logger: quietLogger,
                pushToStart: harness.configuration.pushToStart, now: { later })
            _ = try await sweeper.sweepAll()
            #expect(try await harness.database.strings("SELECT kind FROM outbox WHERE order_id = \(held)") == ["start"])
            #expect(try await harness.database.count("SELECT count(*) FROM outbox") == 1)
        }
    }
}
