import ChildProcesses
import Foundation
import Postgres
import ServerFixtures
import TestSupport
import Testing
import WorkerHarness

/// Beyond one machine: workers on a three-node RabbitMQ cluster whose nodes die under them, and on a
/// primary/standby pair that fails over, with the same converged result as on one node of each.
/// The cluster and the pair, and their faults, are the fixtures ``RabbitMQCluster`` and ``PostgresReplica``
/// (`livedelivery-servers cluster|replica`); only this suite uses them, one test at a time.
@Suite(.serialized, .timeLimit(.minutes(10)))
struct ClusterTests {
    @Test("kill -9 the node the consumer is on, then the queue's leader: every event once, nothing lost")
    func brokerNodesDie() async throws {
        try await RabbitMQCluster.local.start()
        try await Fixture.with("cluster", servers: .cluster) { fixture in
            let scenario = Scenario.deliveries(orders: 24, prefix: fixture.name)
            let messages = scenario.shuffled(duplicateRate: 0.1, seed: 0x5EED_0026)
            let third = messages.count / 3
            try await fixture.startWorker("w1")
            try await fixture.publish(Array(messages[..<third]))
            try await eventually("some events processed", timeout: .seconds(120)) {
                try await fixture.count("SELECT count(*) FROM inbox") > 0
            }

            // The node holding the worker's connection (the test's publisher has closed its own).
            let attached = try await eventuallyValue("the worker's broker node", timeout: .seconds(60)) {
                try await Self.nodesWithConnections().first
            }
            try await RabbitMQCluster.local.kill(node: attached)
            let duringLoss = Array(messages[third..<(2 * third)])
            try await fixture.publish(duringLoss)
            // The worker moved to another node: what was published while its node was down is processed
            // before that node comes back.
            let published = Set(duringLoss.map(\.eventID))
            try await eventually(
                "the events published while node \(attached) is down processed", timeout: .seconds(120)
            ) {
                published.isSubset(of: Set(try await fixture.inboxEventIDs()))
            }
            // Back to three nodes, so that the queue keeps its majority when its leader goes.
            try await RabbitMQCluster.local.startNode(attached)

            let leader = try await RabbitMQCluster.local.leader(of: fixture.queue)
            try await RabbitMQCluster.local.kill(node: leader)
            try await fixture.publish(Array(messages[(2 * third)...]))
            try await fixture.waitUntilSettled(eventIDs: Set(scenario.events.map(\.eventID)), timeout: .seconds(240))
            try await fixture.waitUntilAllEnded(scenario)
            try await fixture.verifyConverged(scenario)
            try await RabbitMQCluster.local.startNode(leader)
            #expect(RabbitMQCluster.nodes.contains(try await RabbitMQCluster.local.leader(of: fixture.queue)))
            for worker in fixture.runningWorkers {
                #expect(worker.isRunning, "\(worker.name) exited:\n\(worker.tail())")
            }
        }
    }

    @Test("the primary stops and the standby is promoted: workers resume there, nothing committed is lost")
    func databaseFailsOver() async throws {
        try await PostgresReplica.local.reset()
        try await PostgresReplica.local.start(synchronous: true)
        try await Fixture.with("failover", servers: .replica) { fixture in
            let scenario = Scenario.deliveries(orders: 20, prefix: fixture.name)
            let messages = scenario.shuffled(duplicateRate: 0.1, seed: 0x5EED_0027)
            let half = messages.count / 2
            try await fixture.startWorker("w1")
            try await fixture.startWorker("w2")
            try await fixture.publish(Array(messages[..<half]))
            try await eventually("some events processed", timeout: .seconds(120)) {
                try await fixture.count("SELECT count(*) FROM inbox") > 10
            }

            // What the primary had committed (and so acked) just before it went: with a synchronous
            // standby, every one of these must be there after the promotion.
            let committed = Set(try await fixture.inboxEventIDs())
            try await PostgresReplica.local.stopPrimary()
            try await PostgresReplica.local.promote()
            // The test's own pool finds its connections gone, as the workers' do, and reconnects.
            let port = try await eventuallyValue("the promoted standby to answer", timeout: .seconds(60)) {
                try await fixture.strings("SELECT inet_server_port()::text").first
            }
            #expect(port == "55452")
            let afterFailover = Set(try await fixture.inboxEventIDs())
            #expect(
                committed.isSubset(of: afterFailover),
                "\(committed.subtracting(afterFailover).count) committed events lost")

            try await fixture.publish(Array(messages[half...]))
            try await fixture.waitUntilSettled(eventIDs: Set(scenario.events.map(\.eventID)), timeout: .seconds(240))
            try await fixture.waitUntilAllEnded(scenario)
            try await fixture.verifyConverged(scenario)
            for worker in fixture.runningWorkers {
                #expect(worker.isRunning, "\(worker.name) exited:\n\(worker.tail())")
            }
        }
    }

    @Test("reports run on the hot standby; the reporting role can write on neither server")
    func reportsOnTheStandby() async throws {
        try await PostgresReplica.local.reset()
        try await PostgresReplica.local.start(synchronous: true)
        try await Fixture.with("standby-report", servers: .replica) { fixture in
            let scenario = Scenario.deliveries(orders: 3, prefix: fixture.name)
            try await fixture.startWorker("w1")
            try await fixture.publish(scenario.events)
            try await fixture.waitUntilSettled(eventIDs: Set(scenario.events.map(\.eventID)))
            let role = fixture.databaseName + "_reader"
            try await TestEnvironment.asSuperuser(on: TestEnvironment.replicaPrimaryURL) {
                // A synchronous standby has the commit flushed, not yet applied, when it returns: the role (and the
                // orders before it) must be visible there before the report logs in.
                try await $0.execute(unsafeSQL: "SET synchronous_commit = remote_apply")
                try await $0.execute(
                    unsafeSQL: "CREATE ROLE \(role) LOGIN PASSWORD 'reader-pw' IN ROLE livedelivery_reporting")
            }

            let standby = Self.url(
                TestEnvironment.replicaStandbyURL, user: role, password: "reader-pw", database: fixture.databaseName)
            let primary = Self.url(
                TestEnvironment.replicaPrimaryURL, user: role, password: "reader-pw", database: fixture.databaseName)
            // The primary is named unreachable: the report can only have come from the standby.
            let report = try ChildProcess.livedelivery(
                name: "report", arguments: ["report", "activities-by-state"],
                environment: fixture.environment(worker: "report").merging([
                    "LIVEDELIVERY_POSTGRES_URL": "postgresql://nobody:primary-pw@127.0.0.1:1/none",
                    "LIVEDELIVERY_POSTGRES_REPORTING_URL": standby,
                ]) { $1 },
                logDirectory: fixture.directory)
            #expect(try await report.waitForExit(timeout: .seconds(60)) == 0, "\(report.tail())")
            #expect(report.output.contains("ended"), "\(report.output)")
            #expect(!report.output.contains("reader-pw") && !report.output.contains("primary-pw"))

            for (server, url) in [("standby", standby), ("primary", primary)] {
                var configuration = try PostgresConfiguration(url)
                configuration.poolSize = 1
                let reader = PostgresClient(configuration: configuration, logger: fixture.logger)
                let viewRows = try await reader.query("SELECT count(*) FROM report_activities_by_state")
                #expect(viewRows.count == 1, "\(server): the role reads the views")
                for statement in [
                    "DELETE FROM orders",
                    "INSERT INTO dead_letters (reason, message, body, body_sha256) VALUES ('x', 'x', ''::bytea, ''::bytea)",
                    "DELETE FROM report_dead_letters", "CREATE TABLE scratch (id int)",
                ] {
                    let error = await #expect(throws: PostgresError.self, "\(server): \(statement)") {
                        try await reader.query(PostgresQuery(unsafeSQL: statement))
                    }
                    let refused: Set<SQLState> = [SQLState("42501"), .readOnlySQLTransaction]
                    #expect(
                        error?.sqlState.map(refused.contains) == true,
                        "\(server): \(statement): \(String(describing: error))")
                }
                await reader.shutdown()
            }
        }
    }

    @Test("unreachable endpoints: one is skipped; all of them give 503 and a clear log, never a crash or a password")
    func unreachableEndpoints() async throws {
        try await Fixture.with("endpoints", servers: .main) { fixture in
            // A dead node first in the list: the worker skips it.
            let skipping = try await fixture.startWorker(
                "skips",
                extraEnvironment: [
                    "LIVEDELIVERY_AMQP_URL": "",
                    "LIVEDELIVERY_AMQP_URLS":
                        "amqp://livedelivery:dead-node-pw@127.0.0.1:1/%2F,\(TestEnvironment.amqpURL)",
                ])
            #expect(try await skipping.get("/readyz").status == 200)
            await skipping.process.stop()

            // Nothing reachable: up, not ready, saying why.
            let stranded = try await fixture.startWorker(
                "stranded",
                extraEnvironment: [
                    "LIVEDELIVERY_AMQP_URL": "",
                    "LIVEDELIVERY_AMQP_URLS": "amqp://u:amqp-pw-1@127.0.0.1:1/%2F,amqp://u:amqp-pw-2@127.0.0.1:2/%2F",
                    "LIVEDELIVERY_POSTGRES_URL":
                        "postgresql://u:pg-pw-3@127.0.0.1:1,127.0.0.1:2/d?target_session_attrs=read-write",
                ],
                ready: false)
            try await eventually("the worker to report the broker unreachable", timeout: .seconds(60)) {
                stranded.process.tail(200).contains("cannot connect to RabbitMQ")
            }
            let readiness = try await stranded.get("/readyz")
            #expect(readiness.status == 503)
            #expect(stranded.process.isRunning)
            let health = try await stranded.get("/healthz")
            #expect(health.body.contains("\"broker\":false"), "\(health.body)")
            await stranded.process.stop()
            for worker in fixture.runningWorkers {
                let log = worker.tail(10_000)
                for secret in ["dead-node-pw", "amqp-pw-1", "amqp-pw-2", "pg-pw-3"] {
                    #expect(!log.contains(secret), "\(worker.name) logged a password")
                }
            }
        }
    }

    /// The cluster's nodes (1…3) that hold client connections, most first.
    static func nodesWithConnections() async throws -> [Int] {
        try await RabbitMQCluster.local.connections().filter { $0.value > 0 }.sorted { $0.value > $1.value }.map(\.key)
    }

    /// A server's URL with another role and database.
    static func url(_ server: String, user: String, password: String, database: String) -> String {
        replacingDatabase(in: replacingCredentials(in: server, user: user, password: password), with: database)
    }
}
