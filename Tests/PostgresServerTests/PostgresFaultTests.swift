import Foundation
import TestSupport
import Testing

@testable import Postgres

/// Restarts the *fault* database; serialized so restarts never overlap.
@Suite(.serialized, .exclusiveFaultServers, .timeLimit(.minutes(6)))
struct PostgresFaultTests {
    @Test func poolRecoversAfterServerRestart() async throws {
        try await PostgresTestSupport.withClient(url: TestEnvironment.faultPostgresURL, poolSize: 3) { client in
            // Fill the pool with idle connections.
            let before = try await withThrowingTaskGroup(of: Int.self) { group in
                for _ in 0..<3 {
                    group.addTask {
                        try await client.withTransaction { connection in
                            try await connection.query("SELECT pg_backend_pid() AS pid")[0].decode(Int.self, "pid")
                        }
                    }
                }
                return try await group.reduce(into: Set<Int>()) { $0.insert($1) }
            }
            try await PostgresServer.fault.restart()

            // The first calls may fail, but only with retriable errors; within a few attempts they succeed on
            // new server processes.
            var after: Int?
            for _ in 0..<5 where after == nil {
                do {
                    after = try await client.query("SELECT pg_backend_pid() AS pid")[0].decode(Int.self, "pid")
                } catch let error as PostgresError {
                    #expect(error.isRetriable, "\(error)")
                }
            }
            let pid = try #require(after)
            #expect(!before.contains(pid))
            // Transactions and concurrent use work again too.
            try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<6 {
                    group.addTask {
                        for attempt in 1...5 {
                            do {
                                try await client.withTransaction { connection in
                                    try await connection.query("SELECT 1")
                                }
                                return
                            } catch let error as PostgresError where error.isRetriable && attempt < 5 {
                                continue
                            }
                        }
                    }
                }
                try await group.waitForAll()
            }
        }
    }

    @Test func listenerResumesAfterServerRestart() async throws {
        let channel = TestEnvironment.uniqueName("pg-fault-channel")
        try await PostgresTestSupport.withClient(url: TestEnvironment.faultPostgresURL) { client in
            var notifications = client.notifications(channel: channel).makeAsyncIterator()
            #expect(await notifications.next() == .listening)
            try await client.query("SELECT pg_notify(\(channel), \("before"))")
            #expect(payload(of: await notifications.next(), channel) == "before")

            try await PostgresServer.fault.restart()

            // The listener reconnects and says so; notifications flow again.
            #expect(await notifications.next() == .listening)
            var delivered = false
            for attempt in 1...5 where !delivered {
                do {
                    try await client.query("SELECT pg_notify(\(channel), \("after"))")
                    delivered = true
                } catch let error as PostgresError where error.isRetriable && attempt < 5 {}
            }
            #expect(payload(of: await notifications.next(), channel) == "after")
        }
    }

    private func payload(of event: PostgresNotifications.Event?, _ channel: String) -> String? {
        guard case .notification(let notification) = event, notification.channel == channel else { return nil }
        return notification.payload
    }
}
