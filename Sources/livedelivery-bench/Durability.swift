import Postgres

/// The server's durability settings, for a benchmark's header: a figure means little without them.
enum Durability {
    /// `fsync=on synchronous_commit=on full_page_writes=on`, and the synchronous standbys if any.
    static func describe(_ client: PostgresClient) async throws -> String {
        let rows = try await client.query(
            """
            SELECT name, setting FROM pg_settings
            WHERE name IN ('fsync', 'synchronous_commit', 'full_page_writes', 'synchronous_standby_names')
            ORDER BY name = 'synchronous_standby_names', name
            """)
        var parts: [String] = []
        for row in rows {
            let name = try row.decode(String.self, at: 0)
            let setting = try row.decode(String.self, at: 1)
            if name == "synchronous_standby_names" {
                parts.append(setting.isEmpty ? "no synchronous standby" : "synchronous standby \(setting)")
            } else {
                parts.append("\(name)=\(setting)")
            }
        }
        let durable = !parts.contains { $0.hasSuffix("=off") }
        return "database durability: " + parts.joined(separator: " ") + (durable ? "" : " (NOT DURABLE)")
    }
}
