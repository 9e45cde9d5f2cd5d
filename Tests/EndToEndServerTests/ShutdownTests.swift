import ChildProcesses
import Foundation
import Testing
import WorkerHarness

/// SIGTERM: stop consuming, finish and acknowledge what is in flight, exit 0; nothing published is lost.
@Suite(.timeLimit(.minutes(5)))
struct ShutdownTests {
    @Test func sigtermDrainsCleanlyAndLosesNothing() async throws {
        try await Fixture.with("sigterm") { fixture in
            let scenario = Scenario.deliveries(orders: 30, prefix: fixture.name)
            let first = try await fixture.startWorker("first")
            try await fixture.publish(scenario.shuffled(duplicateRate: 0.1, seed: 0x5EED_0003))
            try await eventually("the first worker to be busy", timeout: .seconds(120), every: .milliseconds(20)) {
                try await fixture.count("SELECT count(*) FROM inbox") > 0
            }
            let status = try await first.process.terminate(timeout: .seconds(60))
            #expect(status == 0, "exit status \(status):\n\(first.process.tail(400))")
            // Every push it had leased (claimed, or handed over by its own consumer) was sent and recorded
            // before it exited: none is left to wait out its lease.
            #expect(try await fixture.count("SELECT count(*) FROM outbox WHERE lease_until IS NOT NULL") == 0)
            // Those handed over without a row too: every apns-id its timeline rows list has its answer recorded.
            #expect(
                try await fixture.count(
                    """
                    SELECT count(*) FROM timeline AS t CROSS JOIN LATERAL unnest(t.handed) AS h(id)
                    WHERE NOT EXISTS (SELECT 1 FROM push_attempts AS a WHERE a.apns_id = h.id)
                    """) == 0)

            // Whatever the first worker had not finished is still in the queue: a second worker completes it.
            try await fixture.startWorker("second")
            try await fixture.waitUntilSettled(eventIDs: Set(scenario.events.map(\.eventID)))
            try await fixture.waitUntilAllEnded(scenario)
            try await fixture.verifyConverged(scenario)

            for worker in fixture.runningWorkers where worker.isRunning {
                let status = try await worker.terminate(timeout: .seconds(60))
                #expect(status == 0, "\(worker.name) exit status \(status)")
            }
        }
    }
}
