package import Logging
package import Postgres

/// Rewrites the order states and outbox pushes a release before `sql/118` stored as JSON in the binary form
/// (``StoredState``, ``StoredPush``), so that every document is read by one codec. `livedelivery migrate`
/// runs it whenever it applies a migration; after the first run, nothing is left to rewrite.
///
/// Each round takes up to ``rowsPerRound`` rows of a table in one transaction, locked `FOR UPDATE SKIP LOCKED`
/// (a row a worker holds at that moment stays JSON until the next run; it reads either way), reads each
/// through the stored-field definitions (``StoredValue``) and writes it back. A document that does not read is left as it is and counted: a
/// worker that reads it reports the same error for its order.
package enum StoredDocumentUpgrade {
    static let rowsPerRound = 500

    /// What one run did.
    package struct Summary: Sendable, Hashable {
        package var states = 0
        package var pushes = 0
        /// Documents that do not read, left as they are.
        package var unreadable = 0
    }

    package static func run(on connection: PostgresConnection, logger: Logger) async throws -> Summary {
        var summary = Summary()
        let states = try await rounds { try await rewriteStates(on: connection, skipping: $0) }
        let pushes = try await rounds { try await rewritePushes(on: connection, skipping: $0) }
        summary.states = states.rewritten
        summary.pushes = pushes.rewritten
        summary.unreadable = states.unreadable + pushes.unreadable
        if summary != Summary() {
            logger.info(
                "stored JSON documents rewritten in the binary form",
                metadata: [
                    "states": "\(summary.states)", "pushes": "\(summary.pushes)",
                    "unreadable": "\(summary.unreadable)",
                ])
        }
        return summary
    }

    /// Runs `round` (given how many unreadable rows to skip) until a round finds fewer rows than it may take.
    private static func rounds(
        _ round: (Int) async throws -> (rewritten: Int, unreadable: Int)
    ) async throws -> (rewritten: Int, unreadable: Int) {
        var total = (rewritten: 0, unreadable: 0)
        while true {
            let done = try await round(total.unreadable)
            total.rewritten += done.rewritten
            total.unreadable += done.unreadable
            if done.rewritten + done.unreadable < rowsPerRound { return total }
        }
    }

    private static func rewriteStates(
        on connection: PostgresConnection, skipping: Int
    ) async throws -> (rewritten: Int, unreadable: Int) {
        try await inTransaction(on: connection) {
            let rows = try await connection.query(
                """
                SELECT order_id, state FROM orders WHERE get_byte(state, 0) = 123
                ORDER BY order_id OFFSET \(skipping) LIMIT \(rowsPerRound) FOR UPDATE SKIP LOCKED
                """)
            var unreadable = 0
            var updates: [PostgresQuery] = []
            for row in rows {
                let orderID = try row.decode(String.self, "order_id")
                guard let state = try? StoredState.decode(try row.decode([UInt8].self, "state")) else {
                    unreadable += 1
                    continue
                }
                updates.append(
                    "UPDATE orders SET state = \(OrderStore.document(state)) WHERE order_id = \(orderID)")
            }
            if !updates.isEmpty { _ = try await connection.pipeline(updates) }
            return (updates.count, unreadable)
        }
    }

    private static func rewritePushes(
        on connection: PostgresConnection, skipping: Int
    ) async throws -> (rewritten: Int, unreadable: Int) {
        try await inTransaction(on: connection) {
            let rows = try await connection.query(
                """
                SELECT order_id, activity_key, push FROM outbox WHERE get_byte(push, 0) = 123
                ORDER BY order_id, activity_key OFFSET \(skipping) LIMIT \(rowsPerRound) FOR UPDATE SKIP LOCKED
                """)
            var unreadable = 0
            var updates: [PostgresQuery] = []
            for row in rows {
                let orderID = try row.decode(String.self, "order_id")
                let activityKey = try row.decode(String.self, "activity_key")
                guard let push = try? StoredPush.decode(try row.decode([UInt8].self, "push")) else {
                    unreadable += 1
                    continue
                }
                updates.append(
                    """
                    UPDATE outbox SET push = \(PostgresBytes(StoredPush.encode(push)))
                    WHERE order_id = \(orderID) AND activity_key = \(activityKey)
                    """)
            }
            if !updates.isEmpty { _ = try await connection.pipeline(updates) }
            return (updates.count, unreadable)
        }
    }

    private static func inTransaction<Result>(
        on connection: PostgresConnection, _ body: () async throws -> Result
    ) async throws -> Result {
        try await connection.execute(unsafeSQL: "BEGIN")
        do {
            let result = try await body()
            try await connection.execute(unsafeSQL: "COMMIT")
            return result
        } catch {
            if !connection.isClosed { try? await connection.execute(unsafeSQL: "ROLLBACK") }
            throw error
        }
    }
}
