import APNsSimulator
import ChildProcesses
import Foundation
import Testing
import WorkerHarness

#if canImport(Glibc)
import Glibc
#endif

/// kill -9 in the middle of the work: the broker redelivers what the dead process had not acknowledged, the
/// inbox makes the redelivery harmless, and the outbox lease lets the survivor send what was in flight.
@Suite(.timeLimit(.minutes(5)))
struct CrashTests {
    @Test func killNineMidBatchLosesNothingAndDuplicatesNoPushEffect() async throws {
        try await Fixture.with("kill9") { fixture in
            let scenario = Scenario.deliveries(orders: 60, prefix: fixture.name)
            // A short outbox lease, so that the pushes the victim had claimed are taken over quickly.
            let lease = ["LIVEDELIVERY_DISPATCHER_LEASE_SECONDS": "5"]
            let victim = try await fixture.startWorker(
                "victim", extraEnvironment: lease.merging(["LIVEDELIVERY_AMQP_PREFETCH": "50"]) { $1 })
            let messages = scenario.shuffled(duplicateRate: 0.1, seed: 0x5EED_0002)
            try await fixture.publish(messages)
            // Kill it while it is working: some events processed, not all.
            let total = scenario.events.count
            try await eventually("the victim to be part-way through", timeout: .seconds(120), every: .milliseconds(20))
            {
                let done = try await fixture.count("SELECT count(*) FROM inbox")
                if done >= total { throw HarnessError("the victim finished everything before it could be killed") }
                return done >= total / 10
            }
            try await victim.process.kill9()
            #expect(victim.process.exitStatus == 128 + SIGKILL)

            try await fixture.startWorker("survivor", extraEnvironment: lease)
            try await fixture.waitUntilSettled(eventIDs: Set(scenario.events.map(\.eventID)))
            try await fixture.waitUntilAllEnded(scenario)
            try await fixture.verifyConverged(scenario)
        }
    }

    @Test("killed between APNs' acceptance and the recording: the pushes in that window are sent again, and converge")
    func killInTheWindowBetweenAcceptanceAndRecording() async throws {
        try await Fixture.with("kill-window") { fixture in
            let scenario = Scenario.deliveries(orders: 30, prefix: fixture.name)
            let lease = ["LIVEDELIVERY_DISPATCHER_LEASE_SECONDS": "5"]
            // The victim kills itself (SIGKILL) once 20 accepted pushes are about to be recorded: the batch
            // that reaches 20 is in APNs and not in the database.
            let victim = try await fixture.startWorker(
                "victim", extraEnvironment: lease.merging(["LIVEDELIVERY_FAULT_KILL_BEFORE_RECORDING": "20"]) { $1 })
            try await fixture.publish(scenario.events)
            let status = try await victim.process.waitForExit(timeout: .seconds(180))
            #expect(status == 128 + SIGKILL, "\(victim.process.tail(20))")

            // The window was hit: pushes APNs accepted that no push_attempts row records.
            let accepted = Set(fixture.simulator.pushes().filter { $0.status == 200 }.map { $0.apnsID.lowercased() })
            let recorded = Set(try await fixture.strings("SELECT apns_id::text FROM push_attempts"))
            let unrecorded = accepted.subtracting(recorded)
            #expect(
                accepted.count >= 20 && !unrecorded.isEmpty, "accepted \(accepted.count), recorded \(recorded.count)")

            try await fixture.startWorker("survivor", extraEnvironment: lease)
            try await fixture.waitUntilSettled(eventIDs: Set(scenario.events.map(\.eventID)))
            try await fixture.waitUntilAllEnded(scenario)
            try await fixture.verifyConverged(scenario)
        }
    }
}
