package import Foundation
package import Postgres

/// The day partitions of the history tables, through the functions of sql/112, at an explicit time.
package enum HistoryPartitions {
    /// Days created ahead of today by `migrate` and every retention round.
    package static let aheadDays = 2

    /// Takes this transaction's retention round: false when another worker holds it. A drop waits for
    /// the reports reading the table; it must never queue the workers' inserts behind it for long, so
    /// the transaction's locks wait two seconds at most (the round fails, and the next one tries again).
    static func takeRound(on connection: PostgresConnection) async throws -> Bool {
        let held = try await connection.query(
            "SELECT pg_try_advisory_xact_lock(hashtextextended('livedelivery:retention', 0)) AS held")
        guard try held[0].decode(Bool.self, "held") else { return false }
        try await connection.query("SET LOCAL lock_timeout = '2s'")
        return true
    }

    /// Whether the database has the partition functions (sql/112): a database migrated only partly
    /// (`migrate --before`) may not.
    static func known(on connection: PostgresConnection) async throws -> Bool {
        try await connection.query(
            "SELECT to_regprocedure('history_partitions_upkeep(timestamptz, integer)') IS NOT NULL AS known"
        )[0].decode(Bool.self, "known")
    }

    /// Creates the partitions of the UTC day of `now` and ``aheadDays`` more; returns the names created.
    package static func upkeep(now: Date, on connection: PostgresConnection) async throws -> [String] {
        try await connection.query(
            "SELECT p FROM history_partitions_upkeep(\(now)::timestamptz, \(aheadDays)::integer) AS p"
        ).map { try $0.decode(String.self, "p") }
    }

    /// Hours of push outcomes rolled up per round at most: a first round after the upgrade catches up
    /// over several rounds (the report reads what is not rolled up from the attempts meanwhile).
    package static let rollUpHoursPerRound = 48

    /// Rolls up the push outcomes of the hours closed (by the database's clock) five minutes before
    /// `now`; returns how many hours.
    package static func rollUp(now: Date, on connection: PostgresConnection) async throws -> Int {
        try await connection.query(
            "SELECT report_rollup_push_outcomes(\(now)::timestamptz, \(rollUpHoursPerRound)::integer) AS hours"
        )[0].decode(Int.self, "hours")
    }

    /// Drops what is older than `keepDays` at `now`: per table, the day partitions dropped and the rows
    /// deleted from its default partition; and the rolled-up hours that old.
    package static func dropExpired(
        now: Date, keepDays: Int, on connection: PostgresConnection
    ) async throws
        -> [(table: String, dropped: [String], defaultRowsDeleted: Int)]
    {
        try await connection.query(
            """
            SELECT table_name, array_to_string(partitions_dropped, ',') AS dropped, default_rows_deleted
            FROM history_partitions_drop_expired(\(now)::timestamptz, \(keepDays)::integer)
            UNION ALL
            SELECT 'report_push_outcomes_rollup', '', report_rollups_drop_expired(\(now)::timestamptz, \(keepDays)::integer)
            """
        ).map { row in
            (
                try row.decode(String.self, "table_name"),
                try row.decode(String.self, "dropped").split(separator: ",").map(String.init),
                try row.decode(Int.self, "default_rows_deleted")
            )
        }
    }
}
