import APNsSimulator
import Foundation
import Testing

/// The command line as operators use it: `livedelivery publish` into a running worker, and an APNs refusal
/// flowing through to the activity's state.
@Suite(.timeLimit(.minutes(5)))
struct ProcessLevelTests {
    @Test func publishCommandPublishesGoodLinesAndReportsBadOnes() async throws {
        try await Fixture.with("publish-cli") { fixture in
            try await fixture.startWorker("w1")
            let scenario = Scenario.deliveries(orders: 5, prefix: fixture.name)
            var lines = scenario.events.map { String(decoding: $0.body, as: UTF8.self) }
            lines.insert("this is not JSON", at: 3)
            lines.insert(#"{"no_type": true}"#, at: 7)
            let file = fixture.directory.appendingPathComponent("events.jsonl")
            try lines.joined(separator: "\n").write(to: file, atomically: true, encoding: .utf8)

            let publish = try ChildProcess(
                name: "publish",
                arguments: ["publish", "--shuffle", "--duplicate-rate", "0.3", "--seed", "42", file.path],
                environment: fixture.environment(worker: "publish"), logDirectory: fixture.directory)
            let status = try await publish.waitForExit(timeout: .seconds(60))
            #expect(status == 1, "bad lines make the exit status 1")
            let output = publish.output
            #expect(output.contains("events.jsonl:4: not valid JSON"), "\(output)")
            #expect(output.contains("events.jsonl:8: no string field `type`"), "\(output)")
            #expect(output.contains("0 failed"), "\(output)")

            try await fixture.waitUntilSettled(eventIDs: Set(scenario.events.map(\.eventID)))
            try await fixture.waitUntilAllEnded(scenario)
            try await fixture.verifyConverged(scenario)
        }
    }

    @Test func unregisteredTokenEndsTheActivityWithoutFurtherPushes() async throws {
        try await Fixture.with("unregistered") { fixture in
            try await fixture.startWorker("w1")
            let scenario = Scenario.deliveries(orders: 2, prefix: fixture.name)
            let gone = scenario.orders[0]
            fixture.simulator.markUnregistered(token: gone.deviceToken)
            try await fixture.publish(scenario.events)

            try await fixture.waitUntilSettled(eventIDs: Set(scenario.events.map(\.eventID)))
            try await eventually("the unregistered token's activity to reach a final state", timeout: .seconds(120)) {
                try await fixture.count(
                    "SELECT count(*) FROM activities WHERE activity_id = '\(gone.activityID)' AND state IN ('ended', 'failed', 'expired')"
                ) == 1
            }
            let refused = fixture.pushes(token: gone.deviceToken)
            #expect(!refused.isEmpty)
            #expect(refused.allSatisfy { $0.status == 410 })
            // The worker stops after the 410: one attempt, not one per event.
            #expect(refused.count == 1, "\(refused.count) pushes to an unregistered token")
            #expect(try await fixture.count("SELECT count(*) FROM push_attempts WHERE status = 410") >= 1)
        }
    }
}
