import Postgres

/// The `app_pauses` table: apps whose pushes wait because APNs refused their configuration (a key, a
/// team, a topic). Every worker's claim skips them until `paused_until` (``Outbox/leaseQuery(_:workerID:seconds:limit:)``).
enum AppPauses {
    /// Pauses `bundleID` for `duration` from now, or extends its pause, saying why and who.
    static func pauseQuery(
        _ bundleID: String, reason: String, status: Int?, by workerID: String, for duration: Duration
    ) -> PostgresQuery {
        """
        INSERT INTO app_pauses (bundle_id, reason, status, paused_by, paused_until)
        VALUES (\(bundleID), \(reason), \(status), \(workerID), now() + make_interval(secs => \(duration.seconds)))
        ON CONFLICT (bundle_id) DO UPDATE SET
            reason = EXCLUDED.reason, status = EXCLUDED.status, paused_by = EXCLUDED.paused_by,
            paused_at = now(), paused_until = EXCLUDED.paused_until
        """
    }

    /// Every app paused now or before, and whether its pause still holds (the metrics' sample).
    static func current(_ client: PostgresClient) async throws -> [(bundleID: String, paused: Bool)] {
        try await client.query("SELECT bundle_id, paused_until > now() FROM app_pauses").map {
            (try $0.decode(String.self, at: 0), try $0.decode(Bool.self, at: 1))
        }
    }
}
