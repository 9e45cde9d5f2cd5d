import ChildProcesses
import Foundation
import Testing

/// Several worker processes, at-least-once and out-of-order delivery: the devices end up where the in-order
/// stream leads, and never see an older state after a newer one.
@Suite(.timeLimit(.minutes(5)))
struct ConvergenceTests {
    @Test func twoWorkersOnShuffledDuplicatedStreamsConverge() async throws {
        try await Fixture.with("converge") { fixture in
            let scenario = Scenario.deliveries(orders: 40, prefix: fixture.name)
            try await fixture.startWorker("w1")
            try await fixture.startWorker("w2")
            let messages = scenario.shuffled(duplicateRate: 0.25, seed: 0x5EED_0001)
            #expect(messages.count > scenario.events.count)
            try await fixture.publish(messages)

            try await fixture.waitUntilSettled(eventIDs: Set(scenario.events.map(\.eventID)))
            try await fixture.waitUntilAllEnded(scenario)
            try await fixture.verifyConverged(scenario)
            // Both processes took part (the queue is shared, not exclusive): each sent pushes.
            for worker in fixture.runningWorkers { #expect(worker.isRunning, "\(worker.name) died:\n\(worker.tail())") }
            let senders = try await fixture.strings("SELECT DISTINCT worker_id FROM push_attempts ORDER BY 1")
            #expect(senders == ["\(fixture.name)-w1", "\(fixture.name)-w2"])
        }
    }
}
