import APNsSimulator
import ChildProcesses
import Foundation
import Postgres
import TestSupport
import Testing
import WorkerHarness

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

            let publish = try ChildProcess.livedelivery(
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

    @Test("migrate declares the broker's topology: events published before any worker runs are kept")
    func eventsPublishedBeforeTheFirstWorkerAreKept() async throws {
        try await Fixture.with("migrate-topology") { fixture in
            // Fixture.start ran `livedelivery migrate`; no worker has run yet.
            let scenario = Scenario.deliveries(orders: 3, prefix: fixture.name)
            try await fixture.publish(scenario.events)
            try await fixture.startWorker("w1")
            try await fixture.waitUntilSettled(eventIDs: Set(scenario.events.map(\.eventID)))
            try await fixture.waitUntilAllEnded(scenario)
            try await fixture.verifyConverged(scenario)
        }
    }

    @Test("a worker is not dumpable, and warns when its database login is the schema's owner, not when a worker's")
    func privilegesAtStart() async throws {
        try await Fixture.with("privileges") { fixture in
            let worker = try await fixture.startWorker("w1")
            #expect(worker.process.output.contains("the process is not dumpable"), "\(worker.process.tail())")
            #expect(!worker.process.output.contains("the owner of the schema"), "\(worker.process.tail())")
            let owner = try await fixture.startWorker(
                "w2", extraEnvironment: ["LIVEDELIVERY_POSTGRES_URL": fixture.ownerPostgresURL])
            #expect(
                owner.process.output.contains(
                    "the database login \(PostgresLogin.owner.rawValue) is the owner of the schema"),
                "\(owner.process.tail())")
        }
    }

    @Test("a worker refuses a database whose schema is newer than it knows, naming both versions")
    func schemaVersionMismatchIsRefused() async throws {
        try await Fixture.with("schema-version") { fixture in
            try await fixture.database.query(
                "INSERT INTO schema_migrations (version, name, checksum) VALUES (999, '999_future.sql', 'x')")
            let worker = try ChildProcess.livedelivery(
                name: "w1", arguments: ["run"], environment: fixture.environment(worker: "w1"),
                logDirectory: fixture.directory)
            #expect(try await worker.waitForExit(timeout: .seconds(60)) == 1)
            let output = worker.output
            #expect(output.contains("schema is version 999"), "\(output)")
            #expect(output.contains("this release works with version "), "\(output)")
            #expect(try await fixture.count("SELECT count(*) FROM inbox") == 0)
        }
    }

    @Test("a worker refuses a database whose schema is older than it knows, and says to migrate first")
    func olderSchemaIsRefused() async throws {
        try await Fixture.with("schema-older") { fixture in
            // As if the newest migration had not run: the database of the release before.
            try await fixture.database.query(
                "DELETE FROM schema_migrations WHERE version = (SELECT max(version) FROM schema_migrations)")
            let older = try await fixture.count("SELECT max(version) FROM schema_migrations")
            let worker = try ChildProcess.livedelivery(
                name: "w1", arguments: ["run"], environment: fixture.environment(worker: "w1"),
                logDirectory: fixture.directory)
            #expect(try await worker.waitForExit(timeout: .seconds(60)) == 1)
            let output = worker.output
            #expect(output.contains("schema is version \(older);"), "\(output)")
            #expect(output.contains("run `livedelivery migrate` with this release first"), "\(output)")
            #expect(try await fixture.count("SELECT count(*) FROM inbox") == 0)
        }
    }

    @Test func unregisteredTokenFailsTheActivityWithoutFurtherPushes() async throws {
        try await Fixture.with("unregistered") { fixture in
            try await fixture.startWorker("w1")
            let scenario = Scenario.deliveries(orders: 1, prefix: fixture.name)
            let order = scenario.orders[0]
            // The app reports its token and the first update reaches the phone; then the app is deleted.
            let tokenIndex = try #require(scenario.events.firstIndex { $0.type == "activity.token" })
            try await fixture.publish(Array(scenario.events[...tokenIndex]))
            try await eventually("the first update at the phone", timeout: .seconds(120)) {
                fixture.pushes(token: order.deviceToken).contains { $0.status == 200 }
            }
            fixture.simulator.markUnregistered(token: order.deviceToken)
            try await fixture.publish(Array(scenario.events[(tokenIndex + 1)...]))

            try await fixture.waitUntilSettled(eventIDs: Set(scenario.events.map(\.eventID)))
            try await eventually("the activity to fail", timeout: .seconds(120)) {
                try await fixture.count(
                    "SELECT count(*) FROM activities WHERE activity_id = '\(order.activityID)' AND state = 'failed'")
                    == 1
            }
            let refused = fixture.pushes(token: order.deviceToken).filter { $0.status != 200 }
            // One 410, then nothing more to that token, however many events followed.
            #expect(refused.count == 1, "\(refused.count) refused pushes")
            #expect(refused.allSatisfy { $0.status == 410 && $0.reason == "Unregistered" })
            #expect(try await fixture.count("SELECT count(*) FROM push_attempts WHERE status = 410") == 1)
        }
    }
}
