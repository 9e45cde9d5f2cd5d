import APNsSimulator
import ChildProcesses
import Foundation
import Postgres
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

    /// A payload's `aps.content-state`, which a push built again carries unchanged (its timestamp is fresh).
    static func contentState(_ payload: String) -> NSDictionary? {
        let object = try? JSONSerialization.jsonObject(with: Data(payload.utf8)) as? [String: Any]
        return (object?["aps"] as? [String: Any])?["content-state"] as? NSDictionary
    }

    /// The worker's fault points exist in debug builds only (`FaultPoints`); the worker found next to these
    /// tests is built in the same configuration as they are.
    #if DEBUG
    static let faultPoints = true
    #else
    static let faultPoints = false
    #endif

    @Test(
        "killed between APNs' acceptance and the recording: the pushes in that window are sent again, and converge",
        .enabled(if: faultPoints, "a release build has no fault points")
    )
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

            // Each push in the window is taken over by the survivor. Nothing reached that device in between: a
            // claimed push's outbox row stayed leased to the victim, and a push handed over in memory kept a newer
            // push of its activity held in the outbox for a lease. The next request to the device is the
            // survivor's, and recorded: the very same push again (same apns-id: a claimed row, sent again), the
            // same push built again (a push handed over in memory, found unanswered by a sweeper: a fresh
            // timestamp and apns-id), or, when a newer state of the activity replaced it while it was in flight,
            // that newer state.
            let survivor = "\(fixture.name)-survivor"
            var recordedBy: [String: String] = [:]
            for row in try await fixture.database.query("SELECT apns_id::text, worker_id FROM push_attempts") {
                recordedBy[try row.decode(String.self, at: 0)] = try row.decode(String.self, at: 1)
            }
            let requests = fixture.simulator.pushes().sorted { $0.sequence < $1.sequence }
            var sentAgain = 0
            for apnsID in unrecorded.sorted() {
                let push = try #require(requests.first { $0.status == 200 && $0.apnsID.lowercased() == apnsID })
                let next = try #require(
                    requests.first { $0.sequence > push.sequence && $0.deviceToken == push.deviceToken },
                    "apns-id \(apnsID), accepted and not recorded, was never followed by a push to its device")
                let nextID = next.apnsID.lowercased()
                #expect(
                    next.status == 200 && recordedBy[nextID] == survivor,
                    "after apns-id \(apnsID): apns-id \(nextID), status \(next.status), recorded by \(recordedBy[nextID] ?? "nobody")"
                )
                // A push in the window is recorded only by being sent again.
                #expect(
                    recordedBy[apnsID] == nil || nextID == apnsID,
                    "apns-id \(apnsID) recorded (by \(recordedBy[apnsID] ?? "")) without being sent again")
                if nextID == apnsID || Self.contentState(next.payload) == Self.contentState(push.payload) {
                    sentAgain += 1
                }
            }
            // Replacing a push in flight is the exception (a newer event for the activity in those
            // milliseconds): the resend is what this window exercises.
            #expect(sentAgain > 0, "none of the \(unrecorded.count) pushes in the window was sent again")
        }
    }
}
