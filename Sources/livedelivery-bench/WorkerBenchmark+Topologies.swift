import ArgumentParser
import ChildProcesses
import Foundation
import Postgres
import RabbitMQ
import ServerFixtures
import Synchronization
import TestSupport

/// Where `livedelivery-bench worker --topologies` runs the workers.
enum Topology: String, Sendable {
    case single
    case cluster
    case replica
    case replicaSync = "replica-sync"
    /// The pair pg_auto_failover manages (`ManagedPostgres`, `livedelivery-servers managed`), the monitor's health checks tightened
    /// (`managed`) or as shipped (`managed-default`).
    case managed
    case managedDefault = "managed-default"

    var title: String {
        switch self {
        case .single: "single: one RabbitMQ node, one PostgreSQL server"
        case .cluster: "cluster: three RabbitMQ nodes (quorum queues on all three), one PostgreSQL server"
        case .replica: "replica: one RabbitMQ node, a PostgreSQL primary with an asynchronous streaming standby"
        case .replicaSync: "replica-sync: one RabbitMQ node, a PostgreSQL primary with a synchronous standby"
        case .managed:
            "managed: one RabbitMQ node, a PostgreSQL pair run by pg_auto_failover, the monitor's health checks tightened"
        case .managedDefault:
            "managed-default: one RabbitMQ node, a PostgreSQL pair run by pg_auto_failover, health checks as shipped"
        }
    }

    /// Starts what the topology needs (a fresh primary/standby pair for each replica topology) and
    /// returns the URLs: the broker's (a comma-separated list for the cluster), the server to create
    /// the database on, and the failover URL the workers use (nil: the same server).
    func prepare(
        amqpURL: String, postgresURL: String
    ) async throws -> (
        amqp: String, postgres: String, workerPostgres: String?
    ) {
        let environment = ProcessInfo.processInfo.environment
        switch self {
        case .single:
            return (amqpURL, postgresURL, nil)
        case .cluster:
            try await RabbitMQCluster.local.start()
            let urls =
                environment["LIVEDELIVERY_CLUSTER_AMQP_URLS"]
                ?? (1...3).map { "amqp://livedelivery:livedelivery@127.0.0.1:\(56740 + $0)/%2F" }.joined(separator: ",")
            return (urls, postgresURL, nil)
        case .replica, .replicaSync:
            try await PostgresReplica.local.reset()
            try await PostgresReplica.local.start(synchronous: self == .replicaSync)
            let primary =
                environment["LIVEDELIVERY_REPLICA_PRIMARY_URL"]
                ?? "postgresql://livedelivery:livedelivery@127.0.0.1:55451/livedelivery"
            let pair =
                environment["LIVEDELIVERY_REPLICA_URL"]
                ?? "postgresql://livedelivery:livedelivery@127.0.0.1:55451,127.0.0.1:55452/livedelivery?target_session_attrs=read-write"
            return (amqpURL, primary, pair)
        case .managed, .managedDefault:
            // The pair as it is (healthy, whichever node is the primary); only the monitor's settings change.
            try await ManagedPostgres.local.start()
            try await ManagedPostgres.local.setHealthChecks(self == .managed ? .tight : .asShipped)
            let pair =
                environment["LIVEDELIVERY_MANAGED_URL"]
                ?? "postgresql://livedelivery:livedelivery@127.0.0.1:55456,127.0.0.1:55457/livedelivery?target_session_attrs=read-write"
            return (amqpURL, pair, pair)
        }
    }
}

extension BenchEnvironment {
    /// Publishes status updates at a steady 200 events/s while the topology loses a server, and returns
    /// the seconds processing paused: for the cluster, from `kill -9` of the node holding the most
    /// connections (the worker's) to the first event published after it being processed; for a replica,
    /// from the standby's promotion (after the primary's immediate stop) to the first event processed
    /// on the new primary; for a managed pair, from `kill -9` of the primary (its pg_autoctl, PostgreSQL and
    /// backends, all gone) to the first event processed on the node the monitor promoted. Then checks that every
    /// event published meanwhile was processed.
    func failoverRound(_ topology: Topology, orders: Int) async throws -> Double {
        try await startWorkers()
        let rate = 200
        let messages = (0..<(rate * 90)).map { statusUpdate(order: $0 % orders) }
        let endpoints = try AMQPEndpoints(urls: amqpURL)
        let published = Mutex<[(id: String, at: Date)]>([])
        let stop = Atomic<Bool>(false)
        let exchange = self.exchange
        let logger = self.logger
        let publishing = Task {
            var node = 0
            var publisher: RabbitMQPublisher?
            let clock = ContinuousClock()
            let start = clock.now
            var index = 0
            while index < messages.count, !stop.load(ordering: .relaxed) {
                // Pacing the offered rate, not synchronisation.
                try? await Task.sleep(until: start + .milliseconds(index * 1000 / rate), clock: clock)
                do {
                    if publisher == nil {
                        (publisher, node) = try await RabbitMQPublisher.connect(
                            to: endpoints, startingAt: node, logger: logger)
                    }
                    let (routingKey, body, id) = messages[index]
                    try await publisher!.publish(
                        exchange: exchange, routingKey: routingKey, body: body,
                        properties: RabbitMQMessageProperties(contentType: "application/json", messageID: id))
                    published.withLock { $0.append((id, Date())) }
                    index += 1
                } catch {
                    // Unconfirmed: the same message again, on the next node.
                    if let lost = publisher { await lost.close() }
                    publisher = nil
                    node += 1
                }
            }
            if let publisher { await publisher.close() }
        }
        defer { publishing.cancel() }

        _ = try await poll("the stream to be flowing", timeout: 60, interval: 0.1) { () -> Bool? in
            try await self.count("SELECT count(*) FROM inbox WHERE processed_at > now() - interval '1 second'") > rate
                / 2
                ? true : nil
        }
        let fault: Date
        var stopped: Date?
        var killedNode: Int?
        switch topology {
        case .single:
            throw ValidationError("a single topology has no failover")
        case .cluster:
            let busiest = try await RabbitMQCluster.local.connections().max { $0.value < $1.value }
            guard let node = busiest?.key else { throw ValidationError("no cluster node holds a connection") }
            try await RabbitMQCluster.local.kill(node: node)
            fault = Date()
            killedNode = node
        case .replica, .replicaSync:
            stopped = Date()
            try await PostgresReplica.local.stopPrimary()
            try await PostgresReplica.local.promote()
            fault = Date()
        case .managed, .managedDefault:
            try await ManagedPostgres.local.killPrimary()
            fault = Date()
        }
        let resumedAt = try await poll("processing to resume", timeout: 120, interval: 0.05) { () -> Date? in
            if topology == .cluster {
                let after = published.withLock { $0.filter { $0.at > fault }.map(\.id) }
                guard !after.isEmpty else { return nil }
                let query: PostgresQuery = "SELECT min(processed_at) FROM inbox WHERE event_id = ANY (\(after)::text[])"
                return try await self.database.query(query.planned(.everyRun)).first?.decode(Date?.self, at: 0)
            }
            let query: PostgresQuery = "SELECT min(processed_at) FROM inbox WHERE processed_at > \(fault)"
            return try await self.database.query(query.planned(.everyRun)).first?.decode(Date?.self, at: 0)
        }
        let pause = resumedAt.timeIntervalSince(fault)
        // A few seconds more of the stream after the recovery, then everything published must be in.
        let recovered = published.withLock { $0.count }
        _ = try await poll("the stream to carry on", timeout: 60, interval: 0.1) { () -> Bool? in
            published.withLock { $0.count } >= recovered + rate * 3 ? true : nil
        }
        stop.store(true, ordering: .relaxed)
        await publishing.value
        let ids = published.withLock { $0.map(\.id) }
        _ = try await poll("every event published around the fault to be processed", timeout: 180, interval: 0.2) {
            () -> Bool? in
            let query: PostgresQuery = "SELECT count(*) FROM inbox WHERE event_id = ANY (\(ids)::text[])"
            return try await self.count(query.planned(.everyRun)) == ids.count ? true : nil
        }
        try await stopWorkers()
        if let killedNode { try await RabbitMQCluster.local.startNode(killedNode) }
        let managed = topology == .managed || topology == .managedDefault
        if managed {
            // The killed node back as the secondary, and the monitor's settings as the tests expect them.
            try await ManagedPostgres.local.rejoin()
            try await ManagedPostgres.local.setHealthChecks(.tight)
        }
        let what =
            topology == .cluster
            ? "kill -9 of the busiest broker node"
            : managed
                ? "kill -9 of the primary; the monitor promoted the secondary"
                : String(
                    format: "primary stopped, standby promoted %.2f s later (the database away %.2f s in all)",
                    fault.timeIntervalSince(stopped ?? fault), resumedAt.timeIntervalSince(stopped ?? fault))
        let after = topology == .cluster || managed ? "the kill" : "the promotion"
        print(
            "failover (\(what)): "
                + String(format: "processing resumed %.2f s after ", pause) + after
                + "; all \(ids.count) events published around it were processed once")
        return pause
    }
}
