import ArgumentParser
import Foundation
import ServerFixtures

/// The failover topologies on this machine, for a person and for scripts/test: what `scripts/services` does for the
/// main and fault pairs (which it installs everything for), here for the three-node RabbitMQ cluster, the PostgreSQL
/// primary/standby pair and the pair pg_auto_failover manages, through the same Swift fixtures the tests play the
/// faults with (Sources/ServerFixtures).
@main
struct LiveDeliveryServers: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "livedelivery-servers",
        abstract: "Starts, stops, resets and describes the failover topologies the tests and the benchmark use.",
        discussion: """
            Each topology keeps its state under .state/TOPOLOGY. start starts what does not run and waits until \
            it is ready (a no-op when it is); env prints the variables the tests and the benchmark read, as \
            `export` lines (eval-able).
            """,
        subcommands: [Cluster.self, Replica.self, Managed.self]
    )
}

/// What to do with a topology.
enum Action: String, ExpressibleByArgument, CaseIterable {
    case start, stop, reset, status, env
}

struct Cluster: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Three RabbitMQ nodes, livedelivery-1..3@localhost, AMQP on 127.0.0.1:56741-56743.")

    @Argument(help: "start, stop, reset, status or env.") var action: Action

    func run() async throws {
        let cluster = RabbitMQCluster.local
        switch action {
        case .start: try await cluster.start()
        case .stop: try await cluster.stop()
        case .reset: try await cluster.reset()
        case .status: print(cluster.summary())
        case .env: print(LocalServers.exports(cluster.environment))
        }
    }
}

struct Replica: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "A PostgreSQL primary (127.0.0.1:55451) and a streaming standby (55452).")

    @Argument(help: "start, stop, reset, status or env.") var action: Action
    @Flag(help: "With start: the standby is synchronous (without it, asynchronous).") var sync = false

    func validate() throws {
        if sync, action != .start { throw ValidationError("--sync goes with start only") }
    }

    func run() async throws {
        let replica = PostgresReplica.local
        switch action {
        case .start: try await replica.start(synchronous: sync)
        case .stop: try await replica.stop()
        case .reset: try await replica.reset()
        case .status: print(await replica.summary())
        case .env: print(LocalServers.exports(replica.environment))
        }
    }
}

struct Managed: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "A pg_auto_failover monitor (127.0.0.1:55455) and two nodes (55456, 55457).")

    @Argument(help: "start, stop, reset, status or env.") var action: Action

    func run() async throws {
        let managed = ManagedPostgres.local
        switch action {
        case .start: try await managed.start()
        case .stop: try await managed.stop()
        case .reset: try await managed.reset()
        case .status: print(await managed.summary())
        case .env: print(LocalServers.exports(managed.environment))
        }
    }
}
