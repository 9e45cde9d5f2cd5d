import Postgres

/// The users' advisory locks: work on one user's orders and push-to-start tokens is serialised across
/// workers (the consumer waits for them; the sweeper takes the free ones). Held until the transaction ends.
enum UserLocks {
    /// Serialises work on these users' orders and push-to-start tokens across workers until the
    /// transaction ends (advisory locks, taken in sorted order).
    static func lockQuery(_ users: [String]) -> PostgresQuery {
        """
        SELECT pg_advisory_xact_lock(k) FROM (
            SELECT hashtextextended('user:' || u, 0) AS k
            FROM unnest(\(PostgresTextArray(users))::text[]) AS u ORDER BY u COLLATE "C"
        ) AS s
        """
    }

    /// Takes the users' advisory locks that are free, without waiting (the sweeper's: a user busy
    /// elsewhere is left for later); returns the users locked.
    static func tryLock(_ users: [String], on connection: PostgresConnection) async throws -> Set<String> {
        let users = Array(Set(users)).sorted()
        guard !users.isEmpty else { return [] }
        let locks = try await connection.query(
            """
            SELECT u, pg_try_advisory_xact_lock(hashtextextended('user:' || u, 0)) AS locked
            FROM unnest(\(PostgresTextArray(users))::text[]) AS u ORDER BY u COLLATE "C"
            """)
        var locked = Set<String>()
        for lock in locks where try lock.decode(Bool.self, "locked") {
            locked.insert(try lock.decode(String.self, "u"))
        }
        return locked
    }
}
