import APNsSimulator
import Foundation
import LiveDeliveryJSON
import NIOCore
import Testing

@Suite("apns-sim's devices: what a phone would have shown", .timeLimit(.minutes(6)))
struct SimulatorDeviceTests {
    @Test func staleAndPostEndPushesAreDroppedWhileAPNsSays200() async throws {
        let fixture = try await SimulatorFixture.start()
        let connection = try await fixture.connect()
        let token = SimulatorFixture.token()
        let now = Int(Date().timeIntervalSince1970)
        func push(_ event: String, _ timestamp: Int, _ step: String) async throws -> Int {
            try await connection.send(
                path: "/3/device/\(token)", headers: try fixture.headers(),
                body: SimulatorFixture.payload(event: event, timestamp: timestamp, step: step)
            ).status
        }

        #expect(try await push("update", now, "preparing") == 200)
        #expect(try await push("update", now + 10, "delivering") == 200)
        #expect(try await push("update", now + 5, "preparing") == 200)  // older: dropped
        #expect(try await push("update", now + 10, "delivering") == 200)  // same timestamp: applied again
        #expect(try await push("end", now + 20, "delivered") == 200)
        #expect(try await push("update", now + 30, "delivering") == 200)  // after end: ignored

        let verdicts = fixture.simulator.pushes(token: token).map(\.verdict.kind)
        #expect(verdicts == [.displayed, .displayed, .staleTimestamp, .displayed, .ended, .afterEnd])
        let device = try #require(fixture.simulator.device(token: token))
        #expect(device.kind == .activity)
        let activity = try #require(device.activities.first)
        #expect(activity.ended)
        #expect(activity.timestamp == Double(now + 20))
        #expect(activity.contentState?["currentStep"] == .string("delivered"))
        #expect(activity.droppedCount == 2)
        let byActivity = fixture.simulator.pushes(activity: activity.activityID)
        #expect(byActivity.count == 6)
        try await fixture.simulator.shutdown()
    }

    @Test func aRotatedTokenUpdatesTheSameActivityAndOlderStatesStayDropped() async throws {
        let fixture = try await SimulatorFixture.start()
        let connection = try await fixture.connect()
        let first = SimulatorFixture.token()
        let second = SimulatorFixture.token()
        let now = Int(Date().timeIntervalSince1970)
        func push(_ token: String, _ timestamp: Int, _ step: String) async throws -> Int {
            try await connection.send(
                path: "/3/device/\(token)", headers: try fixture.headers(),
                body: SimulatorFixture.payload(event: "update", timestamp: timestamp, step: step)
            ).status
        }
        #expect(fixture.simulator.rotate(token: first, to: second) == nil)  // no activity yet
        #expect(try await push(first, now, "preparing") == 200)
        let activityID = try #require(fixture.simulator.rotate(token: first, to: second))
        #expect(fixture.simulator.activity(id: activityID)?.updateToken == second)
        #expect(try await push(second, now + 10, "delivering") == 200)
        #expect(try await push(first, now + 5, "preparing") == 200)  // the old token, an older state: dropped
        let records = fixture.simulator.pushes(activity: activityID)
        #expect(records.map(\.verdict.kind) == [.displayed, .displayed, .staleTimestamp])
        #expect(Set(records.map(\.deviceToken)) == [first, second])
        #expect(fixture.simulator.activity(id: activityID)?.contentState?["currentStep"] == .string("delivering"))
        try await fixture.simulator.shutdown()
    }

    @Test func pushToStartCreatesAnActivityAndIssuesItsUpdateToken() async throws {
        let fixture = try await SimulatorFixture.start()
        let connection = try await fixture.connect()
        let startToken = SimulatorFixture.token()
        let now = Int(Date().timeIntervalSince1970)
        let started = try await connection.send(
            path: "/3/device/\(startToken)", headers: try fixture.headers(),
            body: SimulatorFixture.payload(event: "start", timestamp: now, step: "confirmed"))
        #expect(started.status == 200)
        let record = try #require(fixture.simulator.pushes(token: startToken).first)
        #expect(record.verdict.kind == .started)
        let updateToken = try #require(record.issuedUpdateToken)
        let activityID = try #require(record.activityID)
        #expect(fixture.simulator.device(token: startToken)?.kind == .pushToStart)

        let update = try await connection.send(
            path: "/3/device/\(updateToken)", headers: try fixture.headers(),
            body: SimulatorFixture.payload(event: "update", timestamp: now + 1, step: "preparing"))
        #expect(update.status == 200)
        let activity = try #require(fixture.simulator.activity(id: activityID))
        #expect(activity.contentState?["currentStep"] == .string("preparing"))
        #expect(activity.attributes?["orderNumber"] == .int(7))
        #expect(activity.startedByToken == startToken)
        #expect(fixture.simulator.pushes(activity: activityID).count == 2)

        // A start without alert or attributes is not a start.
        let broken = try await connection.send(
            path: "/3/device/\(SimulatorFixture.token())", headers: try fixture.headers(),
            body: Array(#"{"aps":{"event":"start","timestamp":\#(now),"content-state":{}}}"#.utf8))
        #expect(broken.status == 200)
        #expect(fixture.simulator.pushes().last?.verdict.kind == .invalidPayload)
        try await fixture.simulator.shutdown()
    }

    @Test func priority10BudgetThrottlesSilently() async throws {
        let fixture = try await SimulatorFixture.start { configuration, _ in configuration.priority10BudgetPerHour = 2 }
        let connection = try await fixture.connect()
        let token = SimulatorFixture.token()
        let now = Int(Date().timeIntervalSince1970)
        var statuses: [Int] = []
        for (offset, priority) in ["10", "10", "10", "5"].enumerated() {
            statuses.append(
                try await connection.send(
                    path: "/3/device/\(token)", headers: try fixture.headers(priority: priority),
                    body: SimulatorFixture.payload(event: "update", timestamp: now + offset)
                ).status)
        }
        #expect(statuses == [200, 200, 200, 200])
        #expect(
            fixture.simulator.pushes(token: token).map(\.verdict.kind) == [
                .displayed, .displayed, .throttled, .displayed,
            ])
        try await fixture.simulator.shutdown()
    }

    @Test func contentStateShapeReportsPushesThatWouldNotDecode() async throws {
        let shapeFile = TestKey.configFolder.appendingPathComponent("delivery-attributes.json").path
        let shape = try ContentStateShape(contentsOfFile: shapeFile)
        #expect(shape == .deliveryAttributes)
        let fixture = try await SimulatorFixture.start { configuration, _ in configuration.contentStateShape = shape }
        let connection = try await fixture.connect()
        let token = SimulatorFixture.token()
        let now = Int(Date().timeIntervalSince1970)
        let bodies: [String] = [
            // Decodes.
            #"{"aps":{"event":"update","timestamp":\#(now),"content-state":{"driverName":"Sam","estimatedDeliveryTime":[1,2],"currentStep":"delivering"}}}"#,
            // The guide's own sample: an object range in Unix seconds.
            #"{"aps":{"event":"update","timestamp":\#(now + 1),"content-state":{"driverName":"Sam","estimatedDeliveryTime":{"lowerBound":1,"upperBound":2},"currentStep":"delivering"}}}"#,
            // Unknown enum case.
            #"{"aps":{"event":"update","timestamp":\#(now + 2),"content-state":{"driverName":"Sam","estimatedDeliveryTime":[1,2],"currentStep":"out_for_delivery"}}}"#,
            // Missing key.
            #"{"aps":{"event":"update","timestamp":\#(now + 3),"content-state":{"estimatedDeliveryTime":[1,2],"currentStep":"delivering"}}}"#,
            // Range the wrong way round.
            #"{"aps":{"event":"update","timestamp":\#(now + 4),"content-state":{"driverName":"Sam","estimatedDeliveryTime":[3,2],"currentStep":"delivering"}}}"#,
        ]
        for body in bodies {
            let response = try await connection.send(
                path: "/3/device/\(token)", headers: try fixture.headers(), body: Array(body.utf8))
            #expect(response.status == 200)
        }
        let verdicts = fixture.simulator.pushes(token: token).map(\.verdict)
        #expect(
            verdicts.map(\.kind) == [.displayed, .wouldNotDecode, .wouldNotDecode, .wouldNotDecode, .wouldNotDecode])
        #expect(verdicts[3].detail?.contains("driverName") == true)
        #expect(fixture.simulator.device(token: token)?.activities.first?.timestamp == Double(now))
        try await fixture.simulator.shutdown()
    }

    @Test func futureTimestampsAreDropped() async throws {
        let fixture = try await SimulatorFixture.start()
        let connection = try await fixture.connect()
        let token = SimulatorFixture.token()
        let response = try await connection.send(
            path: "/3/device/\(token)", headers: try fixture.headers(),
            body: SimulatorFixture.payload(event: "update", timestamp: Int(Date().timeIntervalSince1970) + 9 * 3600))
        #expect(response.status == 200)
        #expect(fixture.simulator.pushes(token: token).first?.verdict.kind == .futureTimestamp)
        try await fixture.simulator.shutdown()
    }
}

extension TestKey {
    /// `Config/apns-sim/` of this checkout.
    static var configFolder: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Config/apns-sim")
    }
}
