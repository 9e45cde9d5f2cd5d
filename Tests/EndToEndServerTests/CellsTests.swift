import APNsSimulator
import ChildProcesses
import Foundation
import Postgres
import RabbitMQ
import TestSupport
import Testing
import WorkerHarness

#if canImport(Glibc)
import Glibc
#endif

/// Past one primary: two cells (two databases, their own queues and workers) behind the consistent-hash exchange
/// of one broker (docs/scaling.md, Cells); with the list of cells configured, each order in the cell the
/// rendezvous hash names, whatever the exchange does. One test at a time: the storm with broker restarts takes
/// both cores for a minute, and the killed-worker test waits for what `rabbitmqctl` reports, which it then starves.
@Suite(.serialized, .timeLimit(.minutes(8)))
struct CellsTests {
    /// A worker's settings for `cell`, whose database and queue are `deployment`'s; the exchange, the APNs
    /// simulator and the apps are those of the fixture that starts it.
    static func cell(_ name: String, _ deployment: Fixture, queue: String) -> [String: String] {
        [
            "LIVEDELIVERY_CELL_NAME": name, "LIVEDELIVERY_POSTGRES_URL": deployment.postgresURL,
            "LIVEDELIVERY_AMQP_QUEUE": queue, "LIVEDELIVERY_DISPATCHER_LEASE_SECONDS": "5",
        ]
    }

    /// Runs `body` with cell a (fixture `a`'s database and queue) and cell b (fixture `b`'s database, and a queue
    /// of its own on `a`'s exchange, deleted afterwards).
    static func withTwoCells(
        _ label: String, servers: Fixture.Servers = .main,
        _ body: (Fixture, Fixture, _ queueB: String) async throws -> Void
    ) async throws {
        try await Fixture.with("\(label)-a", servers: servers) { a in
            try await Fixture.with("\(label)-b", servers: servers) { b in
                let queueB = "\(a.queue).cell-b"
                do {
                    try await body(a, b, queueB)
                } catch {
                    await deleteQueues([queueB, "\(queueB).dead-letter"], on: a)
                    throw error
                }
                for worker in a.runningWorkers { await worker.stop() }
                await deleteQueues([queueB, "\(queueB).dead-letter"], on: a)
            }
        }
    }

    static func deleteQueues(_ queues: [String], on fixture: Fixture) async {
        guard let endpoints = try? AMQPEndpoints(urls: fixture.amqpURL),
            let (connection, _) = try? await RabbitMQConnection.connect(to: endpoints, logger: fixture.logger)
        else { return }
        for queue in queues { _ = try? await connection.deleteQueue(queue) }
        await connection.close()
    }

    @Test(
        "a shuffled, duplicated stream through two cells with a worker killed: each order in one cell, converged, reports summed"
    )
    func twoCellsBehindTheHashExchange() async throws {
        try await Self.withTwoCells("cells") { a, b, queueB in
            let first = try await a.startWorker("a1", extraEnvironment: Self.cell("a", a, queue: a.queue))
            // Every series of a cell's worker carries its cell.
            let samples = try await first.get("/metrics").body.split(separator: "\n").filter {
                !$0.hasPrefix("#") && !$0.isEmpty
            }
            #expect(!samples.isEmpty)
            #expect(
                samples.allSatisfy { $0.contains(#"cell="a""#) }, "\(samples.filter { !$0.contains(#"cell="a""#) })")
            // The victim's broker connection carries a name, so that the broker can say what it holds.
            let victimConnection = "\(a.name)-a2"
            let victim = try await a.startWorker(
                "a2",
                extraEnvironment: Self.cell("a", a, queue: a.queue).merging([
                    "LIVEDELIVERY_AMQP_PREFETCH": "20",
                    "LIVEDELIVERY_AMQP_URL": "\(a.amqpURL)?connection_name=\(victimConnection)",
                ]) { $1 })
            try await a.startWorker("b1", extraEnvironment: Self.cell("b", b, queue: queueB))

            let scenario = Scenario.deliveries(orders: 40, prefix: a.name)
            // A user's push-to-start token goes to every cell; an order's event without the header is refused
            // in the one cell it lands in, never applied.
            let user = "u-\(a.name)-everywhere"
            let token = ScenarioEvent(
                type: "activity.push_to_start_token", eventID: "\(a.name)-p2s", orderID: nil,
                body: Array(
                    """
                    {"type":"activity.push_to_start_token","version":1,"event_id":"\(a.name)-p2s",\
                    "occurred_at":"2026-11-21T10:00:00Z","user_id":"\(user)","device_id":"phone-1",\
                    "token":"\(String(repeating: "ab", count: 32))","bundle_id":"\(Scenario.bundleID)",\
                    "environment":"production","attributes_type":"DeliveryAttributes"}
                    """.utf8))
            // The victim is frozen once it consumes, before anything is published: the broker then sends it as many
            // deliveries as its prefetch allows, which it holds unacknowledged until it dies. It had work in flight.
            try await eventually("the victim consuming", timeout: .seconds(120), every: .milliseconds(100)) {
                (try await Self.channels(connection: victimConnection)?.consumers ?? 0) > 0
            }
            victim.process.signal(SIGSTOP)
            try await a.publish(scenario.shuffled(duplicateRate: 0.2, seed: 0x5EED_0039) + [token])
            try await Self.publishWithoutHeader(a, orderID: "\(a.name)-unrouted")

            // Kill one of cell a's workers part-way: its unacknowledged deliveries go back to its queue, its
            // leased pushes to the other worker once the lease runs out.
            let total = scenario.events.count
            try await eventually("cell a part-way through", timeout: .seconds(120), every: .milliseconds(20)) {
                let done = try await a.count("SELECT count(*) FROM inbox")
                if done >= total { throw HarnessError("cell a finished before it could be killed") }
                return done >= 10
            }
            // Asked of rabbitmqctl, which starts an Erlang VM per call: under the whole test run's load one check can
            // take a minute or more, hence the long bound (it catches a hang, within the suite's time limit).
            _ = try await eventuallyValue(
                "the frozen victim holding deliveries", timeout: .seconds(300), every: .milliseconds(250)
            ) { () -> Int? in
                let unacked = try await Self.channels(connection: victimConnection)?.unacknowledged ?? 0
                return unacked > 0 ? unacked : nil
            }
            let victimID = "\(a.name)-a2"
            let leased = try await a.strings(
                """
                SELECT order_id || ' ' || activity_key || ' ' || generation FROM outbox
                WHERE lease_owner = '\(victimID)' AND lease_until > now()
                """)
            // And the pushes a dispatcher holds in memory without a row (the victim's among them).
            let inMemory = try await a.strings(
                "SELECT order_id || ' ' || apns_id FROM pushes_waiting WHERE waits_in = 'memory'")
            try await victim.process.kill9()

            // Every event lands, in one cell or the other; every activity ends at its phone.
            let events = Set(scenario.events.map(\.eventID))
            try await eventually("every event in one cell's inbox", timeout: .seconds(180), every: .milliseconds(250)) {
                let seen = Set(try await a.inboxEventIDs()).union(try await b.inboxEventIDs())
                return events.isSubset(of: seen)
            }
            for cell in [a, b] {
                try await eventually("\(cell.name)'s pushes all answered", timeout: .seconds(120)) {
                    try await cell.count("SELECT count(*) FROM pushes_waiting") == 0
                }
            }
            try await a.waitUntilAllEnded(scenario)
            try await a.verifyConverged(scenario, database: false)
            // What it held went elsewhere: its deliveries are all in the inboxes (above); each push it had leased
            // was sent (that generation or a newer one) by another worker.
            for row in leased {
                let parts = row.split(separator: " ").map(String.init)
                let sent = try await a.count(
                    """
                    SELECT count(*) FROM push_attempts
                    WHERE order_id = '\(parts[0])' AND activity_key = '\(parts[1])' AND generation >= \(parts[2])
                    AND outcome = 'delivered' AND worker_id <> '\(victimID)'
                    """)
                #expect(sent > 0, "the push \(row) the killed worker had leased was never sent by another")
            }
            // Each push held in memory was answered by another worker, or its order was sent a newer one by another.
            for row in inMemory {
                let parts = row.split(separator: " ").map(String.init)
                let sent = try await a.count(
                    """
                    SELECT count(*) FROM push_attempts AS p
                    WHERE p.order_id = '\(parts[0])' AND p.outcome = 'delivered' AND p.worker_id <> '\(victimID)'
                      AND (p.apns_id = '\(parts[1])'
                           OR p.attempted_at > (SELECT max(t.at) FROM timeline AS t
                                                WHERE t.order_id = '\(parts[0])' AND '\(parts[1])' = ANY (t.handed)))
                    """)
                #expect(sent > 0, "the push \(row) held in memory when a worker was killed was never sent by another")
            }

            // Each order's events all in exactly one cell, and both cells used.
            let inboxA = Set(try await a.inboxEventIDs())
            let inboxB = Set(try await b.inboxEventIDs())
            let ordersA = Set(try await a.strings("SELECT order_id FROM orders"))
            let ordersB = Set(try await b.strings("SELECT order_id FROM orders"))
            #expect(ordersA.isDisjoint(with: ordersB))
            #expect(!ordersA.isEmpty && !ordersB.isEmpty, "a: \(ordersA.count) orders, b: \(ordersB.count)")
            for order in scenario.orders {
                let ids = Set(scenario.events.filter { $0.orderID == order.orderID }.map(\.eventID))
                let inA = ids.isSubset(of: inboxA) && ids.isDisjoint(with: inboxB)
                let inB = ids.isSubset(of: inboxB) && ids.isDisjoint(with: inboxA)
                #expect(inA != inB, "\(order.orderID)'s events are not all in exactly one cell")
                #expect(inA ? ordersA.contains(order.orderID) : ordersB.contains(order.orderID))
            }
            // The user's token in both cells; the header-less event refused once, in one cell.
            for cell in [a, b] {
                #expect(
                    try await cell.count("SELECT count(*) FROM push_to_start_tokens WHERE user_id = '\(user)'") == 1)
            }
            let refusals = try await eventuallyValue("the header-less event refused", timeout: .seconds(60)) {
                () -> Int? in
                let count =
                    try await a.count("SELECT count(*) FROM dead_letters WHERE reason = 'cell_routing_header'")
                    + (try await b.count("SELECT count(*) FROM dead_letters WHERE reason = 'cell_routing_header'"))
                return count > 0 ? count : nil
            }
            #expect(refusals == 1)
            #expect(!ordersA.contains("\(a.name)-unrouted") && !ordersB.contains("\(a.name)-unrouted"))

            // `report --cells` reads both cells: its rows are each cell's, their sum the whole deployment's.
            let run = try await AdminRun.livedelivery(
                ["report", "activities-by-state", "--cells", "a,b", "--format", "json"],
                environment: [
                    "LIVEDELIVERY_CELLS_A_POSTGRES_URL": a.postgresURL,
                    "LIVEDELIVERY_CELLS_B_POSTGRES_URL": b.postgresURL,
                ])
            #expect(run.status == 0, "\(run.stderr)")
            let rows = try #require(
                try JSONSerialization.jsonObject(with: Data(run.stdout.utf8)) as? [[String: Any]])
            var reported: [String: Int] = [:]
            for row in rows {
                let cell = try #require(row["cell"] as? String)
                let state = try #require(row["state"] as? String)
                reported["\(cell) \(state)", default: 0] += try #require(row["activities"] as? Int)
            }
            var counted: [String: Int] = [:]
            for (name, cell) in [("a", a), ("b", b)] {
                for line in try await cell.strings("SELECT state || ' ' || count(*) FROM activities GROUP BY state") {
                    let parts = line.split(separator: " ")
                    counted["\(name) \(parts[0])"] = Int(parts[1])
                }
            }
            #expect(reported == counted)
            #expect(reported.values.reduce(0, +) == scenario.orders.count)
        }
    }

    @Test(
        "growing from one cell to two, as operations.md says: orders that move finish in the new cell, their old activity ended by the old cell's sweeper"
    )
    func growingFromOneCellToTwo() async throws {
        try await Self.withTwoCells("grow") { a, b, queueB in
            // The old cell ends an activity whose order has had no event for 15 s (operations.md, Adding a cell).
            let config = try a.config { policy in policy["sweep"] = ["idleSeconds": 15] }
            try await a.startWorker(
                "a1",
                extraEnvironment: Self.cell("a", a, queue: a.queue).merging([
                    "LIVEDELIVERY_CONFIG_DIR": config.path, "LIVEDELIVERY_SWEEPER_INTERVAL_SECONDS": "1",
                ]) { $1 })
            let scenario = Scenario.deliveries(orders: 30, prefix: a.name)
            let byOrder = Dictionary(grouping: scenario.events, by: { $0.orderID ?? "" })
            // Before: placed, confirmed, the app's token and a first `preparing`, all in the only cell.
            let before = byOrder.values.flatMap { $0.prefix(4) }
            try await a.publish(before)
            try await a.waitUntilSettled(eventIDs: Set(before.map(\.eventID)))
            #expect(try await a.count("SELECT count(*) FROM orders") == scenario.orders.count)

            // Grow: the new cell's first worker binds its queue; then the rest of every order.
            try await a.startWorker("b1", extraEnvironment: Self.cell("b", b, queue: queueB))
            let after = byOrder.values.flatMap { $0.dropFirst(4) }
            try await a.publish(after)
            let all = Set(scenario.events.map(\.eventID))
            try await eventually("every event in one cell's inbox", timeout: .seconds(120), every: .milliseconds(250)) {
                all.isSubset(of: Set(try await a.inboxEventIDs()).union(try await b.inboxEventIDs()))
            }
            let inboxA = Set(try await a.inboxEventIDs())
            let inboxB = Set(try await b.inboxEventIDs())
            #expect(inboxA.isDisjoint(with: inboxB), "an event applied in both cells")
            #expect(Set(before.map(\.eventID)).isSubset(of: inboxA))
            // Each order's later events all went to one cell: the old one, or the new one.
            var moved: Set<String> = []
            for order in scenario.orders {
                let later = Set(byOrder[order.orderID, default: []].dropFirst(4).map(\.eventID))
                #expect(
                    later.isSubset(of: inboxA) || later.isSubset(of: inboxB), "\(order.orderID) split its later events")
                // A cancelled order has no later events: it stayed.
                if !later.isEmpty && later.isSubset(of: inboxB) { moved.insert(order.orderID) }
            }
            #expect(!moved.isEmpty && moved.count < scenario.orders.count, "\(moved.count) of 30 orders moved")

            // The orders that stayed converge as ever; those that moved have their old activity ended by the
            // old cell's sweeper (no more events reach it), and the new cell holds their newest status.
            var stayed = scenario
            stayed.orders.removeAll { moved.contains($0.orderID) }
            try await a.waitUntilAllEnded(stayed)
            try await a.verifyConverged(stayed, database: false)
            try await eventually("the moved orders' old activities ended by the sweeper", timeout: .seconds(120)) {
                let ended = try await a.strings(
                    "SELECT order_id FROM activities WHERE end_reason = 'sweep_idle' AND state = 'ended'")
                guard moved.isSubset(of: Set(ended)) else {
                    let rows = try await a.strings(
                        "SELECT order_id || ' ' || state || ' ' || coalesce(end_reason, '-') FROM activities")
                    throw HarnessError("moved \(moved.sorted()); activities \(rows.sorted())")
                }
                return true
            }
            let statusesB = Set(try await b.strings("SELECT order_id || ' ' || status FROM orders"))
            for order in scenario.orders where moved.contains(order.orderID) {
                #expect(statusesB.contains("\(order.orderID) \(order.finalStatus)"))
            }
        }
    }

    @Test(
        "a third cell added mid-run, as operations.md says: it takes over the orders the hash moves to it, whose phones keep their one activity, with no gap"
    )
    func addingAThirdCellHandsOrdersOver() async throws {
        try await Self.withTwoCells("handover") { a, b, queueB in
            try await Fixture.with("handover-c") { c in
                let queueC = "\(a.queue).cell-c"
                do {
                    try await Self.growToThreeCells(a, b, c, queueB: queueB, queueC: queueC)
                } catch {
                    await Self.deleteQueues([queueC, "\(queueC).dead-letter"], on: a)
                    throw error
                }
                for worker in a.runningWorkers { await worker.stop() }
                await Self.deleteQueues([queueC, "\(queueC).dead-letter"], on: a)
            }
        }
    }

    static func growToThreeCells(_ a: Fixture, _ b: Fixture, _ c: Fixture, queueB: String, queueC: String) async throws
    {
        let two = [
            "LIVEDELIVERY_CELL_ALL": "a,b", "LIVEDELIVERY_CELLS_A_QUEUE": a.queue, "LIVEDELIVERY_CELLS_B_QUEUE": queueB,
        ]
        var three = two.merging(["LIVEDELIVERY_CELL_ALL": "a,b,c", "LIVEDELIVERY_CELLS_C_QUEUE": queueC]) { $1 }
        three["LIVEDELIVERY_DISPATCHER_LEASE_SECONDS"] = "5"
        // Before: cells a and b; every order placed, confirmed, its activity's token reported and `preparing`.
        let a1 = try await a.startWorker("a1", extraEnvironment: Self.cell("a", a, queue: a.queue).merging(two) { $1 })
        let b1 = try await a.startWorker("b1", extraEnvironment: Self.cell("b", b, queue: queueB).merging(two) { $1 })
        let scenario = Scenario.deliveries(orders: 60, prefix: a.name)
        let byOrder = Dictionary(grouping: scenario.events, by: { $0.orderID ?? "" })
        let before = byOrder.values.flatMap { $0.prefix(4) }
        // APNs holds back some of their pushes (429, retry after 2 s): at the growth, some orders the new cell takes
        // over still have a push waiting in their old cell, and the new cell waits for it to be settled.
        a.simulator.injectFault(FaultRule(status: 429, reason: "TooManyRequests", count: 20, retryAfter: 2))
        try await a.publish(before)
        let published = Set(before.map(\.eventID))
        try await eventually("the first events in the two cells", timeout: .seconds(120), every: .milliseconds(250)) {
            published.isSubset(of: Set(try await a.inboxEventIDs()).union(try await b.inboxEventIDs()))
        }
        // Grow (operations.md, Adding a cell): the old cells' workers take the list of three; the new cell's worker
        // takes over from them the orders the hash now gives it. Then the rest of every order.
        await a1.process.stop()
        await b1.process.stop()
        try await a.startWorker("a2", extraEnvironment: Self.cell("a", a, queue: a.queue).merging(three) { $1 })
        try await a.startWorker("b2", extraEnvironment: Self.cell("b", b, queue: queueB).merging(three) { $1 })
        try await a.startWorker(
            "c1",
            extraEnvironment: Self.cell("c", c, queue: queueC).merging(three) { $1 }.merging([
                "LIVEDELIVERY_CELL_TAKE_OVER_FROM": "a,b", "LIVEDELIVERY_CELLS_A_POSTGRES_URL": a.postgresURL,
                "LIVEDELIVERY_CELLS_B_POSTGRES_URL": b.postgresURL,
            ]) { $1 })
        try await a.publish(byOrder.values.flatMap { $0.dropFirst(4) })
        let events = Set(scenario.events.map(\.eventID))
        let fixtures = ["a": a, "b": b, "c": c]
        try await eventually("every event in a cell's inbox", timeout: .seconds(180), every: .milliseconds(250)) {
            var seen = Set<String>()
            for cell in fixtures.values { seen.formUnion(try await cell.inboxEventIDs()) }
            return events.isSubset(of: seen)
        }
        try await a.waitUntilAllEnded(scenario)
        // Every phone on its order's newest step, ended, with one activity: the moved ones kept theirs.
        try await a.verifyConverged(scenario, database: false)

        // The orders the third cell's hash moved are carried on there, with the activity they had; in their old
        // cell that activity closed without a push (`handed_over`); the others stayed where they were, and so did
        // an order with no event after the growth (a cancelled one: all its events came before).
        var moved = 0
        for order in scenario.orders {
            let was = Self.owner(of: order.orderID, among: [("a", 1), ("b", 1)])
            let now =
                byOrder[order.orderID, default: []].count > 4
                ? Self.owner(of: order.orderID, among: [("a", 1), ("b", 1), ("c", 1)]) : was
            let activities = try await fixtures[now]!.strings(
                "SELECT coalesce(activity_id, '-') || ' ' || state FROM activities WHERE order_id = '\(order.orderID)'")
            #expect(activities.count == 1, "\(order.orderID): \(activities) in cell \(now)")
            let status = try await fixtures[now]!.strings(
                "SELECT status FROM orders WHERE order_id = '\(order.orderID)'")
            #expect(status == [order.finalStatus], "\(order.orderID) in cell \(now): \(status)")
            guard now != was, let activity = activities.first else { continue }
            moved += 1
            let old = try await fixtures[was]!.strings(
                "SELECT coalesce(activity_id, '-') || ' ' || state || ' ' || coalesce(end_reason, '-') FROM activities WHERE order_id = '\(order.orderID)'"
            )
            let id = activity.split(separator: " ")[0]
            #expect(old == ["\(id) ended handed_over"], "\(order.orderID) in its old cell \(was): \(old)")
        }
        #expect(moved > 0 && moved < scenario.orders.count, "\(moved) of \(scenario.orders.count) orders moved")
        for cell in fixtures.values {
            let refused = try await cell.strings("SELECT reason || ' ' || coalesce(event_id, '') FROM dead_letters")
            #expect(refused.isEmpty, "\(cell.name) refused \(refused.prefix(5))")
        }
    }

    @Test("a message the broker dead-letters in one cell is stored once, in that cell, not in every cell")
    func deadLettersStayInTheirCell() async throws {
        try await Self.withTwoCells("cells-dlx") { a, b, queueB in
            // Both cells declare their topology; then this test plays cell a's failing consumer.
            for (name, worker) in [("a1", Self.cell("a", a, queue: a.queue)), ("b1", Self.cell("b", b, queue: queueB))]
            {
                #expect(try await a.startWorker(name, extraEnvironment: worker).process.terminate() == 0)
            }
            let poison = Array(#"{"type":"order.status","version":1,"event_id":"poison-cell-a"}"#.utf8)
            let connection = try await RabbitMQConnection.connect(
                try AMQPConfiguration(url: a.amqpURL), logger: a.logger)
            let endpoints = try AMQPEndpoints(urls: a.amqpURL)
            let (publisher, _) = try await RabbitMQPublisher.connect(to: endpoints, startingAt: 0, logger: a.logger)
            try await publisher.publish(  // straight into cell a's queue, through the default exchange
                exchange: "", routingKey: a.queue, body: poison,
                properties: RabbitMQMessageProperties(contentType: "application/json", messageID: "poison-cell-a"))
            await publisher.close()
            let deliveries = try await connection.consume(queue: a.queue, prefetch: 1)
            let failing = Task { for try await delivery in deliveries { try await delivery.nack(requeue: true) } }
            try await eventually("the broker to dead-letter the message", timeout: .seconds(120)) {
                try await connection.declareQueue("\(a.queue).dead-letter", passive: true).messageCount == 1
            }
            failing.cancel()
            _ = try? await deliveries.cancel()

            // Each cell's worker moves its own dead letters into its own database.
            try await a.startWorker("a2", extraEnvironment: Self.cell("a", a, queue: a.queue))
            try await a.startWorker("b2", extraEnvironment: Self.cell("b", b, queue: queueB))
            try await eventually("the poison message in cell a's dead_letters", timeout: .seconds(120)) {
                try await a.count("SELECT count(*) FROM dead_letters WHERE reason = 'delivery_limit'") == 1
            }
            try await eventually("cell b's dead-letter queue drained", timeout: .seconds(120)) {
                try await connection.declareQueue("\(queueB).dead-letter", passive: true).messageCount == 0
            }
            await connection.close()
            let inB = try await b.strings("SELECT reason || ' ' || routing_key FROM dead_letters")
            #expect(inB.isEmpty, "cell b stored \(inB)")
        }
    }

    /// The list of cells every worker of both cells is configured with: cell a (weight 2, `a`'s queue) and cell
    /// b (weight 1, `queueB`).
    static func cellList(_ a: Fixture, queueB: String) -> [String: String] {
        [
            "LIVEDELIVERY_CELL_ALL": "a,b", "LIVEDELIVERY_CELLS_A_QUEUE": a.queue, "LIVEDELIVERY_CELLS_A_WEIGHT": "2",
            "LIVEDELIVERY_CELLS_B_QUEUE": queueB, "LIVEDELIVERY_CELLS_B_WEIGHT": "1",
        ]
    }

    /// The cell an order belongs to among `cells` (name, weight), as docs/scaling.md defines it, written again
    /// here from the document as a publisher would: FNV-1a 64 of `cell + "\n" + order_id`, MurmurHash3's fmix64,
    /// u = (h >> 11 + 0.5) / 2^53, the highest −weight / ln(u).
    static func owner(of orderID: String, among cells: [(name: String, weight: Int)]) -> String {
        var best: (name: String, score: Double)?
        for cell in cells.sorted(by: { $0.name < $1.name }) {
            var h: UInt64 = 0xcbf2_9ce4_8422_2325
            for byte in Array(cell.name.utf8) + [0x0A] + Array(orderID.utf8) {
                h = (h ^ UInt64(byte)) &* 0x100_0000_01b3
            }
            h ^= h >> 33
            h = h &* 0xff51_afd7_ed55_8ccd
            h ^= h >> 33
            h = h &* 0xc4ce_b9fe_1a85_ec53
            h ^= h >> 33
            let score = -Double(cell.weight) / log((Double(h >> 11) + 0.5) / 9_007_199_254_740_992.0)
            if best == nil || score > best!.score { best = (cell.name, score) }
        }
        return best!.name
    }

    @Test(
        "a storm through two cells with the list of cells, the broker restarted twice: each order in the cell the hash names, converged, nothing lost",
        .exclusiveFaultServers)
    func brokerRestartsMoveNoOrder() async throws {
        try await Self.withTwoCells("cells-restart", servers: .fault) { a, b, queueB in
            let list = Self.cellList(a, queueB: queueB)
            var workers: [Worker] = []
            for (name, fixture, queue) in [("a", a, a.queue), ("a", a, a.queue), ("b", b, queueB)] {
                let environment = Self.cell(name, fixture, queue: queue).merging(list) { $1 }
                    .merging(["LIVEDELIVERY_CELL_WEIGHT": name == "a" ? "2" : "1"]) { $1 }
                workers.append(try await a.startWorker("\(name)\(workers.count + 1)", extraEnvironment: environment))
            }
            let scenario = Scenario.deliveries(orders: 400, prefix: a.name)
            let messages = scenario.shuffled(duplicateRate: 0.2, seed: 0x5EED_0052)
            let thirds = [0, messages.count / 3, 2 * messages.count / 3, messages.count]
            // A third, the broker restarted (the ring is built again, the queues' places on it change), a
            // third, restarted again, the rest.
            for part in 0..<3 {
                try await a.publish(Array(messages[thirds[part]..<thirds[part + 1]]))
                guard part < 2 else { break }
                let published = Set(messages[..<thirds[part + 1]].map(\.eventID))
                try await eventually("part of what was published applied", timeout: .seconds(120)) {
                    let seen = Set(try await a.inboxEventIDs()).union(try await b.inboxEventIDs())
                    return seen.intersection(published).count >= published.count / 2
                }
                try await RabbitMQBroker.fault.restart()
            }

            let events = Set(scenario.events.map(\.eventID))
            try await eventually("every event in one cell's inbox", timeout: .seconds(240), every: .milliseconds(250)) {
                events.isSubset(of: Set(try await a.inboxEventIDs()).union(try await b.inboxEventIDs()))
            }
            for cell in [a, b] {
                try await eventually("\(cell.name)'s pushes all answered", timeout: .seconds(120)) {
                    try await cell.count("SELECT count(*) FROM pushes_waiting") == 0
                }
            }
            try await a.waitUntilAllEnded(scenario)
            // Every phone on its order's newest step, ended, one activity per order and device, nothing older
            // after newer.
            try await a.verifyConverged(scenario, database: false)

            // Every order's rows in exactly the cell the hash names, and nowhere else; every event applied once.
            let cells = [(name: "a", weight: 2), (name: "b", weight: 1)]
            let inbox = ["a": try await a.inboxEventIDs(), "b": try await b.inboxEventIDs()]
            let orders = [
                "a": Set(try await a.strings("SELECT order_id FROM orders")),
                "b": Set(try await b.strings("SELECT order_id FROM orders")),
            ]
            let activities = [
                "a": try await a.strings("SELECT order_id || ' ' || device_id FROM activities"),
                "b": try await b.strings("SELECT order_id || ' ' || device_id FROM activities"),
            ]
            let statuses = Set(try await a.strings("SELECT order_id || ' ' || status FROM orders"))
                .union(try await b.strings("SELECT order_id || ' ' || status FROM orders"))
            var owners: [String: Int] = [:]
            for order in scenario.orders {
                let owner = Self.owner(of: order.orderID, among: cells)
                let other = owner == "a" ? "b" : "a"
                owners[owner, default: 0] += 1
                let ids = Set(scenario.events.filter { $0.orderID == order.orderID }.map(\.eventID))
                #expect(ids.isSubset(of: Set(inbox[owner]!)), "\(order.orderID): events missing in cell \(owner)")
                #expect(ids.isDisjoint(with: Set(inbox[other]!)), "\(order.orderID): events applied in cell \(other)")
                #expect(orders[owner]!.contains(order.orderID), "\(order.orderID) not in cell \(owner)")
                #expect(!orders[other]!.contains(order.orderID), "\(order.orderID) also in cell \(other)")
                #expect(
                    activities[owner]!.filter { $0.hasPrefix(order.orderID + " ") }.count == 1,
                    "\(order.orderID): not one activity in cell \(owner)")
                #expect(
                    !activities[other]!.contains { $0.hasPrefix(order.orderID + " ") },
                    "\(order.orderID): an activity in cell \(other)")
                #expect(statuses.contains("\(order.orderID) \(order.finalStatus)"), "\(order.orderID) final status")
            }
            #expect(owners["a", default: 0] > 0 && owners["b", default: 0] > 0, "\(owners)")
            for (name, ids) in inbox {
                #expect(Set(ids).count == ids.count, "cell \(name)'s inbox holds an event twice")
            }
            for cell in [a, b] {
                let refused = try await cell.strings("SELECT reason || ' ' || coalesce(event_id, '') FROM dead_letters")
                #expect(refused.isEmpty, "\(cell.name) refused \(refused.prefix(5))")
            }
            // The exchange's first guess differed from the hash for some orders: those events were forwarded.
            var forwarded = 0
            for worker in workers {
                #expect(worker.process.isRunning, "\(worker.process.name) exited:\n\(worker.process.tail())")
                for line in try await worker.get("/metrics").body.split(separator: "\n")
                where line.hasPrefix("livedelivery_events_forwarded_total{") {
                    forwarded += Int(Double(line.split(separator: " ").last ?? "") ?? 0)
                }
            }
            #expect(forwarded > 0, "no event was forwarded")
        }
    }

    /// The consumers on a connection's channels and the deliveries the broker has sent on them and not had
    /// acknowledged: the connection named `connection` (its `connection_name`); nil when there is none.
    static func channels(connection name: String) async throws -> (consumers: Int, unacknowledged: Int)? {
        func rows(_ arguments: [String]) async throws -> [[String: Any]] {
            try await RabbitMQBroker.main.rows(arguments)
        }
        // client_properties: [name, type, value] triples.
        let connections = try await rows(["list_connections", "pid", "client_properties"]).filter { row in
            let properties = row["client_properties"] as? [[Any]] ?? []
            return properties.contains { $0.first as? String == "connection_name" && $0.last as? String == name }
        }
        guard let pid = connections.first?["pid"] as? String else { return nil }
        let channels = try await rows(["list_channels", "connection", "consumer_count", "messages_unacknowledged"])
            .filter { $0["connection"] as? String == pid }
        return (
            channels.reduce(0) { $0 + (($1["consumer_count"] as? Int) ?? 0) },
            channels.reduce(0) { $0 + (($1["messages_unacknowledged"] as? Int) ?? 0) }
        )
    }

    /// Publishes an `order.status` without the `order_id` header, as a publisher that forgot it would.
    static func publishWithoutHeader(_ fixture: Fixture, orderID: String) async throws {
        let endpoints = try AMQPEndpoints(urls: fixture.amqpURL)
        let (publisher, _) = try await RabbitMQPublisher.connect(to: endpoints, startingAt: 0, logger: fixture.logger)
        let body = """
            {"type":"order.status","version":1,"event_id":"\(orderID)-s1","occurred_at":"2026-11-21T10:00:00Z",\
            "order_id":"\(orderID)","user_id":"u-1","sequence":1,"status":"placed"}
            """
        PublishedEvents.record(routingKey: "order.status", body: Array(body.utf8), messageID: "\(orderID)-s1")
        try await publisher.publish(
            exchange: fixture.exchange, routingKey: "order.status", body: Array(body.utf8),
            properties: RabbitMQMessageProperties(contentType: "application/json", messageID: "\(orderID)-s1"))
        await publisher.close()
    }
}
