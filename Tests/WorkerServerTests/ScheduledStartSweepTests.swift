import APNsSimulator
import Foundation
import LiveDeliveryCore
import LiveDeliveryTime
import Postgres
import RabbitMQ
import TestSupport
import Testing

@testable import LiveDelivery

/// Activities the app scheduled to start later (`activity.token`'s `scheduled_start`), through the whole worker:
/// events published to the broker, consumed, stored in PostgreSQL, pushed to the simulator, and the sweeper on a
/// clock the test moves.
@Suite("Scheduled starts", .timeLimit(.minutes(6)))
struct ScheduledStartSweepTests {
    /// An `activity.token` from the app, reported at `at` with the activity scheduled to start at `start`.
    static func scheduledReport(
        _ orderID: String, activity: String, token: String, at: Date, start: Date
    ) -> InboundMessage {
        let id = UUID().uuidString
        let body = """
            {"type":"activity.token","version":1,"event_id":"\(id)","occurred_at":"\(RFC3339.format(at))",\
            "order_id":"\(orderID)","activity_id":"\(activity)","device_id":"d-\(activity)","token":"\(token)",\
            "bundle_id":"\(bundleID)","environment":"production","scheduled_start":"\(RFC3339.format(start))"}
            """
        return InboundMessage(body: Array(body.utf8), routingKey: "activity.token", messageID: id)
    }

    @Test(
        "the sweeper ends a scheduled activity once its time, counted from the newest scheduled start, has come; not before"
    )
    func theSweeperCountsFromTheScheduledStart() async throws {
        // Whole seconds: the events carry the times as RFC 3339 without fractions.
        let base = Date(timeIntervalSince1970: (Date().timeIntervalSince1970 - 8000).rounded(.down))
        let clock = TestClock(base)
        func at(_ seconds: Double) { clock.set(base.addingTimeInterval(seconds)) }
        // A 2-hour lifetime ended 30 minutes early, a 1-hour idle timeout. Only the test sweeps.
        try await withWorker(
            adjust: {
                shortSweepTimes(&$0)
                $0.sweeper.interval = .seconds(3600)
            }, now: clock.closure
        ) { harness, worker in
            try await whileRunning(worker) {
                try await eventually("the worker is ready") { worker.health.snapshot.ready }
                let publisher = try await RabbitMQPublisher.connect(
                    try AMQPConfiguration(url: TestEnvironment.amqpURL), logger: quietLogger)
                func publish(_ messages: [InboundMessage]) async throws {
                    PublishedEvents.record(messages)
                    for message in messages {
                        var properties = RabbitMQMessageProperties()
                        properties.messageID = message.messageID
                        properties.contentType = "application/json"
                        properties.deliveryMode = .persistent
                        try await publisher.publish(
                            exchange: harness.configuration.amqp.exchange, routingKey: message.routingKey,
                            body: message.body, properties: properties)
                    }
                }
                /// Every planned push sent and its outcome recorded: no transaction holds an order, so that a sweep
                /// at the next moment sees them all.
                func settled() async throws {
                    try await eventually("the outbox empty") {
                        try await harness.database.count("SELECT count(*) FROM pushes_waiting") == 0
                    }
                }
                func activity(_ order: String) async throws -> [String] {
                    try await harness.database.strings(
                        "SELECT state || ' ' || coalesce(end_reason, '-') FROM activities WHERE order_id = \(order)")
                }

                // Two orders confirmed at 0: one whose activity the app scheduled to start at 2000, and one
                // started at once.
                at(0)
                let scheduled = TestEnvironment.uniqueName("S")
                let scheduledToken = Events.token()
                let control = TestEnvironment.uniqueName("C")
                let controlToken = Events.token()
                try await publish([
                    Events.status(scheduled, "confirmed", sequence: 1),
                    Self.scheduledReport(
                        scheduled, activity: "act-" + scheduled, token: scheduledToken, at: base,
                        start: base.addingTimeInterval(2000)),
                    Events.status(control, "confirmed", sequence: 1),
                    Events.activityToken(control, activity: "act-" + control, token: controlToken),
                ])
                try await eventually("both activities shown confirmed") {
                    !acceptedPushes(harness, token: scheduledToken).isEmpty
                        && !acceptedPushes(harness, token: controlToken).isEmpty
                }
                try await settled()
                #expect(
                    try await harness.database.count(
                        "SELECT count(*) FROM timeline_decisions WHERE order_id = \(scheduled) AND code = 'activity_scheduled'"
                    ) == 1)

                // 3700: an hour idle after the report. The activity started at once is ended; the scheduled one,
                // idle for 1700 s since its start, is left alone. (The worker's own sweeper runs once as it starts,
                // then after an hour: whichever sweeps at this moment, the outcome is the same.)
                at(3700)
                #expect(try await worker.sweeper.sweepAll().actions.allSatisfy { $0.orderID == control })
                try await eventually("the control's end accepted") {
                    acceptedPushes(harness, token: controlToken, event: "end").count == 1
                }
                try await settled()
                #expect(try await activity(control) == ["ended sweep_idle"])
                #expect(try await activity(scheduled) == ["active -"])

                // A newer report moves the start to 4000.
                let moved = Self.scheduledReport(
                    scheduled, activity: "act-" + scheduled, token: scheduledToken, at: base.addingTimeInterval(100),
                    start: base.addingTimeInterval(4000))
                try await publish([moved])
                await publisher.close()
                try await eventually("the moved schedule applied") {
                    try await harness.database.count(
                        "SELECT count(*) FROM timeline_decisions WHERE order_id = \(scheduled) AND code = 'activity_scheduled'"
                    ) == 2
                }
                try await settled()

                // 5700: past the old start's idle deadline (5600); 7500: past its lifetime limit (7400). Nothing:
                // the clocks count from the new start.
                for seconds in [5700.0, 7500] {
                    at(seconds)
                    #expect(try await worker.sweeper.sweepAll().actions.isEmpty, "at \(seconds)")
                    #expect(try await activity(scheduled) == ["active -"], "at \(seconds)")
                }
                #expect(
                    harness.simulator.pushes(token: scheduledToken).allSatisfy {
                        !$0.payload.contains(#""event":"end""#)
                    })

                // 7700: an hour idle after the new start (7600). Ended, by the sweeper, once.
                at(7700)
                #expect(try await worker.sweeper.sweepAll().actions.allSatisfy { $0.orderID == scheduled })
                try await eventually("the scheduled activity's end accepted") {
                    acceptedPushes(harness, token: scheduledToken, event: "end").count == 1
                }
                try await settled()
                #expect(try await activity(scheduled) == ["ended sweep_idle"])
                #expect(
                    try await harness.database.strings(
                        "SELECT code FROM timeline_decisions WHERE order_id = \(scheduled) AND kind = 'sweep'"
                    )
                    .contains("sweep_idle"))
            }
            try await deleteTopology(harness.configuration.amqp)
        }
    }
}
