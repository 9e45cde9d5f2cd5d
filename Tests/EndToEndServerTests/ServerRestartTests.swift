import ChildProcesses
import Foundation
import TestSupport
import Testing
import WorkerHarness

/// The broker and the database restart under running workers (on the fault pair, which only this suite
/// restarts): the workers reconnect and the result is the same as without the restarts.
@Suite(.serialized, .exclusiveFaultServers, .timeLimit(.minutes(8)))
struct ServerRestartTests {
    @Test func brokerRestartMidRunIsSurvived() async throws {
        try await Fixture.with("rmq-restart", servers: .fault) { fixture in
            let scenario = Scenario.deliveries(orders: 20, prefix: fixture.name)
            try await fixture.startWorker("w1")
            try await fixture.startWorker("w2")
            let messages = scenario.shuffled(duplicateRate: 0.1, seed: 0x5EED_0004)
            let half = messages.count / 2
            try await fixture.publish(Array(messages[..<half]))
            try await eventually("some events processed", timeout: .seconds(120)) {
                try await fixture.count("SELECT count(*) FROM inbox") > 0
            }
            try await RabbitMQBroker.fault.restart()
            try await fixture.publish(Array(messages[half...]))  // reconnects and publishes again as needed

            try await fixture.waitUntilSettled(eventIDs: Set(scenario.events.map(\.eventID)), timeout: .seconds(200))
            try await fixture.waitUntilAllEnded(scenario)
            try await fixture.verifyConverged(scenario)
            for worker in fixture.runningWorkers {
                #expect(worker.isRunning, "\(worker.name) exited:\n\(worker.tail())")
            }
        }
    }

    @Test func databaseRestartMidRunIsSurvived() async throws {
        try await Fixture.with("pg-restart", servers: .fault) { fixture in
            let scenario = Scenario.deliveries(orders: 20, prefix: fixture.name)
            try await fixture.startWorker("w1")
            try await fixture.startWorker("w2")
            let messages = scenario.shuffled(duplicateRate: 0.1, seed: 0x5EED_0005)
            let half = messages.count / 2
            try await fixture.publish(Array(messages[..<half]))
            try await eventually("some events processed", timeout: .seconds(120)) {
                try await fixture.count("SELECT count(*) FROM inbox") > 0
            }
            let startedBefore = try await fixture.strings("SELECT pg_postmaster_start_time()::text")
            try await PostgresServer.fault.restart()
            // The workers are consuming while the database is gone and when it is back.
            try await fixture.publish(Array(messages[half...]))
            let startedAfter = try await eventuallyValue("the database to answer again", timeout: .seconds(60)) {
                try await fixture.strings("SELECT pg_postmaster_start_time()::text")
            }
            #expect(startedAfter != startedBefore, "the database did restart")

            try await fixture.waitUntilSettled(eventIDs: Set(scenario.events.map(\.eventID)), timeout: .seconds(200))
            try await fixture.waitUntilAllEnded(scenario)
            try await fixture.verifyConverged(scenario)
            for worker in fixture.runningWorkers {
                #expect(worker.isRunning, "\(worker.name) exited:\n\(worker.tail())")
            }
        }
    }
}
