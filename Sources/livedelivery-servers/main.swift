import Foundation
import ServerFixtures

// The failover topologies on this machine, for a person and for scripts/test: what `scripts/services` does for the
// main and fault pairs (which it installs everything for), here for the three-node RabbitMQ cluster, the
// PostgreSQL primary/standby pair and the pair pg_auto_failover manages, through the same Swift fixtures the tests
// play the faults with (Sources/ServerFixtures).
let usage = """
    usage: livedelivery-servers TOPOLOGY ACTION
      TOPOLOGY  cluster   three RabbitMQ nodes, livedelivery-1..3@localhost, AMQP 127.0.0.1:56741-56743
                replica   a PostgreSQL primary (127.0.0.1:55451) and a streaming standby (55452)
                managed   a pg_auto_failover monitor (127.0.0.1:55455) and two nodes (55456, 55457)
      ACTION    start     start what does not run and wait until it is ready (a no-op when it is);
                          `replica start --sync` makes the standby synchronous, without it asynchronous
                stop      stop it (its state is kept under .state/TOPOLOGY)
                reset     stop it and delete its state
                status    one line per server
                env       the variables the tests and the benchmark read, as `export` lines (eval-able)
    """

let arguments = Array(CommandLine.arguments.dropFirst())
let topology = arguments.first ?? ""
let action = arguments.dropFirst().first ?? ""
let options = Array(arguments.dropFirst(2))
guard ["cluster", "replica", "managed"].contains(topology),
    ["start", "stop", "reset", "status", "env"].contains(action),
    options.isEmpty || (topology == "replica" && action == "start" && options == ["--sync"])
else {
    FileHandle.standardError.write(Data((usage + "\n").utf8))
    exit(2)
}

do {
    var output: String?
    switch (topology, action) {
    case ("cluster", "start"): try await RabbitMQCluster.local.start()
    case ("cluster", "stop"): try await RabbitMQCluster.local.stop()
    case ("cluster", "reset"): try await RabbitMQCluster.local.reset()
    case ("cluster", "status"): output = RabbitMQCluster.local.summary()
    case ("cluster", _): output = LocalServers.exports(RabbitMQCluster.local.environment)
    case ("replica", "start"): try await PostgresReplica.local.start(synchronous: options == ["--sync"])
    case ("replica", "stop"): try await PostgresReplica.local.stop()
    case ("replica", "reset"): try await PostgresReplica.local.reset()
    case ("replica", "status"): output = await PostgresReplica.local.summary()
    case ("replica", _): output = LocalServers.exports(PostgresReplica.local.environment)
    case (_, "start"): try await ManagedPostgres.local.start()
    case (_, "stop"): try await ManagedPostgres.local.stop()
    case (_, "reset"): try await ManagedPostgres.local.reset()
    case (_, "status"): output = await ManagedPostgres.local.summary()
    default: output = LocalServers.exports(ManagedPostgres.local.environment)
    }
    if let output { print(output) }
} catch {
    FileHandle.standardError.write(Data("livedelivery-servers: \(topology) \(action): \(error)\n".utf8))
    exit(1)
}
