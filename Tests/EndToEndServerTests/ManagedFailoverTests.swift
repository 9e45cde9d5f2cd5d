import ChildProcesses
import Foundation
import Postgres
import ServerFixtures
import TestSupport
import Testing
import WorkerHarness

/// Workers on a PostgreSQL pair that pg_auto_failover manages (``ManagedPostgres``: a monitor, a
/// primary and a synchronous secondary, each node run by its own pg_autoctl), through the one URL that names
/// both nodes with `target_session_attrs=read-write`. The monitor decides every promotion here, with its health
/// checks tightened so that a dead primary is replaced in seconds. Each test leaves the pair healthy (a primary
/// and a secondary) for the next; which node is which is asked, never assumed. Only this suite uses the pair,
/// one test at a time.
@Suite(.serialized, .timeLimit(.minutes(10)))
struct ManagedFailoverTests {
    @Test("kill -9 of the primary and its pg_autoctl: the monitor promotes the secondary, nothing committed is lost")
    func primaryKilled() async throws {
        try await Self.underLoad("managed-kill", seed: 0x5EED_0055, parts: 2) { load in
            // Acked before the kill, so committed on the primary and (synchronous) on the secondary.
            let committed = Set(try await load.fixture.inboxEventIDs())
            let killed = try await ManagedPostgres.local.killPrimary()
            // The rest arrives while the monitor is still deciding: the workers' batches wait and retry.
            try await load.publish(part: 1)
            let port = try await Self.writablePort(load.fixture)
            #expect(port != killed.port, "writes still reach \(killed), which was killed")
            try await Self.expectKept(committed, load.fixture)

            try await load.converge()
            try await Self.expectDatabaseOutageCounted(load.workers)
            // The killed node comes back as the secondary, for the next test.
            try await ManagedPostgres.local.rejoin()
            #expect(try await ManagedPostgres.local.status()[killed] == "secondary")
        }
    }

    @Test("pg_autoctl perform switchover under load: the workers follow the new primary")
    func switchover() async throws {
        try await Self.underLoad("managed-switchover", seed: 0x5EED_0056, parts: 1) { load in
            let before = try await Self.primary()
            let committed = Set(try await load.fixture.inboxEventIDs())
            let after = try await ManagedPostgres.local.switchover()
            #expect(after != before, "the switchover left \(before) the primary")
            #expect(try await Self.writablePort(load.fixture) == after.port)
            try await Self.expectKept(committed, load.fixture)

            try await load.converge()
        }
    }

    @Test("the secondary is lost: the primary goes on alone (wait_primary), and the secondary catches up on return")
    func secondaryLost() async throws {
        try await Self.underLoad("managed-alone", seed: 0x5EED_0057, parts: 2) { load in
            let primary = try await Self.primary()
            // Commits wait for the synchronous secondary until the monitor lets the primary go on alone.
            let lost = try await ManagedPostgres.local.stopSecondary()
            try await load.publish(part: 1)
            try await eventually("the primary to run alone (wait_primary)", timeout: .seconds(120)) {
                try await ManagedPostgres.local.status()[primary] == "wait_primary"
            }
            // Every event is applied and pushed while the secondary is away.
            try await load.converge()
            #expect(try await ManagedPostgres.local.status()[lost] == "stopped")

            // Back, the secondary replays what it missed: it holds every event once it streams again.
            try await ManagedPostgres.local.rejoin()
            #expect(try await ManagedPostgres.local.status()[primary] == "primary")
            let everything = try await load.fixture.count("SELECT count(*) FROM inbox")
            try await eventually("the returned secondary to hold every event", timeout: .seconds(120)) {
                try await Self.inboxCount(on: lost, database: load.fixture.databaseName) == everything
            }
        }
    }

    @Test("the old primary rejoins as the secondary, and takes over with everything at the next failover")
    func oldPrimaryRejoins() async throws {
        try await Self.underLoad("managed-rejoin", seed: 0x5EED_0058, parts: 3) { load in
            let first = try await ManagedPostgres.local.killPrimary()
            try await load.publish(part: 1)
            #expect(try await Self.writablePort(load.fixture) != first.port)

            // The old primary comes back under load; pg_autoctl makes it the secondary of the new primary.
            try await ManagedPostgres.local.rejoin()
            #expect(try await ManagedPostgres.local.status()[first] == "secondary")
            let middle = Set(load.messages(part: 1).map(\.eventID))
            try await eventually("the events published during the first failover processed", timeout: .seconds(120)) {
                middle.isSubset(of: Set(try await load.fixture.inboxEventIDs()))
            }

            // The second failover can only go to the rejoined node: it must hold everything committed.
            let committed = Set(try await load.fixture.inboxEventIDs())
            let second = try await ManagedPostgres.local.killPrimary()
            #expect(second != first)
            try await load.publish(part: 2)
            #expect(try await Self.writablePort(load.fixture) == first.port)
            try await Self.expectKept(committed, load.fixture)

            try await load.converge()
            try await Self.expectDatabaseOutageCounted(load.workers)
            try await ManagedPostgres.local.rejoin()
        }
    }

    // MARK: Helpers

    /// Twenty orders' events (10 % duplicated, shuffled by `seed`) cut into `parts` equal parts, two workers on
    /// the managed pair, and the first part published and partly processed: where every test here begins.
    struct Load {
        let fixture: Fixture
        let scenario: Scenario
        let workers: [Worker]
        private let shuffled: [ScenarioEvent]
        private let parts: Int

        init(_ fixture: Fixture, seed: UInt64, parts: Int, workers: [Worker]) {
            self.fixture = fixture
            self.scenario = Scenario.deliveries(orders: 20, prefix: fixture.name)
            self.shuffled = scenario.shuffled(duplicateRate: 0.1, seed: seed)
            self.parts = parts
            self.workers = workers
        }

        /// The `part`-th of the `parts` parts (the last takes what division leaves).
        func messages(part: Int) -> ArraySlice<ScenarioEvent> {
            let size = shuffled.count / parts
            return shuffled[(part * size)..<(part == parts - 1 ? shuffled.count : (part + 1) * size)]
        }

        func publish(part: Int) async throws {
            try await fixture.publish(Array(messages(part: part)))
        }

        func converge() async throws {
            try await ManagedFailoverTests.converge(fixture, scenario, workers: workers)
        }
    }

    /// Starts the pair if it is not running, then runs `body` on a ``Load`` whose first part is published and
    /// partly processed.
    static func underLoad(
        _ name: String, seed: UInt64, parts: Int, _ body: (Load) async throws -> Void
    ) async throws {
        try await ManagedPostgres.local.start()
        try await Fixture.with(name, servers: .managed) { fixture in
            let load = Load(fixture, seed: seed, parts: parts, workers: try await startWorkers(fixture))
            try await load.publish(part: 0)
            try await eventually("some events processed", timeout: .seconds(120)) {
                try await fixture.count("SELECT count(*) FROM inbox") > 10
            }
            try await body(load)
        }
    }

    /// Every event committed before a failover is still there after it.
    static func expectKept(_ committed: Set<String>, _ fixture: Fixture) async throws {
        let after = Set(try await fixture.inboxEventIDs())
        #expect(committed.isSubset(of: after), "\(committed.subtracting(after).count) committed events lost")
    }

    /// Two workers. A push claimed on a primary that then dies stays that worker's until its lease ends; a
    /// lease of 10 s (60 by default) keeps these tests short, and changes nothing else about the failover.
    static func startWorkers(_ fixture: Fixture) async throws -> [Worker] {
        var workers: [Worker] = []
        for name in ["w1", "w2"] {
            workers.append(
                try await fixture.startWorker(name, extraEnvironment: ["LIVEDELIVERY_DISPATCHER_LEASE_SECONDS": "10"]))
        }
        return workers
    }

    /// Every event in the inbox, every activity ended on its device, the converged checks (no push older after
    /// newer, nothing applied twice), and every worker still running and ready, its database reachable.
    static func converge(_ fixture: Fixture, _ scenario: Scenario, workers: [Worker]) async throws {
        try await fixture.waitUntilSettled(eventIDs: Set(scenario.events.map(\.eventID)), timeout: .seconds(240))
        try await fixture.waitUntilAllEnded(scenario)
        try await fixture.verifyConverged(scenario)
        for worker in workers {
            #expect(worker.process.isRunning, "\(worker.process.name) exited:\n\(worker.process.tail())")
            #expect(try await worker.get("/readyz").status == 200, "\(worker.process.name) not ready")
            let health = try await worker.get("/healthz").body
            #expect(health.contains("\"database\":true"), "\(worker.process.name): \(health)")
        }
    }

    /// The workers counted the lost primary (`livedelivery_database_unavailable_total`) and said so in their logs.
    static func expectDatabaseOutageCounted(_ workers: [Worker]) async throws {
        var counted = 0.0
        for worker in workers {
            counted += try await metric("livedelivery_database_unavailable_total", of: worker)
        }
        #expect(counted > 0, "no worker counted the database unavailable")
        #expect(
            workers.contains { worker in
                let log = worker.process.tail(10_000)
                return log.contains("database unavailable") || log.contains("cannot reach the database")
            }, "no worker logged the lost database")
    }

    /// The sum of a counter's series on one worker's /metrics.
    static func metric(_ name: String, of worker: Worker) async throws -> Double {
        try await worker.get("/metrics").body.split(separator: "\n")
            .filter { $0.hasPrefix(name + "{") || $0.hasPrefix(name + " ") }
            .compactMap { $0.split(separator: " ").last.flatMap { Double($0) } }
            .reduce(0, +)
    }

    /// The port of the node that takes writes, once the test's own pool (the owner's, through the failover
    /// URL, as the workers' are) reaches one again.
    static func writablePort(_ fixture: Fixture) async throws -> Int {
        try await eventuallyValue("a node to take writes", timeout: .seconds(120)) {
            try await fixture.strings("SELECT inet_server_port()::text WHERE NOT pg_is_in_recovery()").first
                .flatMap { Int($0) }
        }
    }

    /// The node that is the primary now.
    static func primary() async throws -> ManagedPostgres.Node {
        let states = try await ManagedPostgres.local.status()
        return try #require(states.first { $0.value == "primary" }?.key, "no primary: \(states)")
    }

    /// Rows in a database's inbox on one node, read there whatever its role (a hot standby answers reads).
    static func inboxCount(on node: ManagedPostgres.Node, database: String) async throws -> Int {
        let url = "postgresql://postgres@127.0.0.1:\(node.port)/postgres"
        return try await TestEnvironment.asSuperuser(on: url, database: database) { connection in
            try await connection.query("SELECT count(*) FROM inbox").first?.decode(Int.self, at: 0) ?? 0
        }
    }
}
