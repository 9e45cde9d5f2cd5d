import LiveDeliveryCore
import Postgres

/// The rows an order's followers and broadcast channel keep beside its state (`sql/121`): who follows it (so
/// that a follower's push-to-start token or settings reach it), and its channel (so that channels are
/// counted per app against Apple's limit, and reported).
enum BroadcastRows {
    /// The statements that bring the rows in line with the changes: only for orders whose followers or
    /// channel changed (none for the common event).
    static func writes(_ changes: [OrderChange]) -> [PostgresQuery] {
        var queries: [PostgresQuery] = []
        for change in changes {
            // The common order has neither: one comparison of two nil references (reading the computed
            // properties through the optional original would copy a whole state).
            let before = change.original?.group
            let after = change.state.group
            guard before != after else { continue }
            let orderID = change.state.orderID
            let followers = after?.value.followers ?? []
            if (before?.value.followers ?? []) != followers {
                queries.append(
                    """
                    WITH gone AS (
                        DELETE FROM order_followers
                        WHERE order_id = \(orderID) AND NOT (user_id = ANY(\(PostgresTextArray(followers))::text[])))
                    INSERT INTO order_followers (order_id, user_id)
                    SELECT \(orderID), u FROM unnest(\(PostgresTextArray(followers))::text[]) AS u
                    ON CONFLICT DO NOTHING
                    """)
            }
            if let channel = after?.value.channel, let broadcast = channel.broadcast, before?.value.channel != channel {
                let closed = channel.phase.isFinal
                queries.append(
                    """
                    INSERT INTO broadcast_channels AS c (order_id, bundle_id, environment, channel_id,
                        stores_most_recent, phase, close_reason, closed_at)
                    VALUES (\(orderID), \(broadcast.bundleID), \(broadcast.environment.rawValue), \(channel.channelID),
                        \(broadcast.storesMostRecent), \(channel.phase.rawValue), \(channel.closeReason?.stored),
                        CASE WHEN \(closed) THEN now() END)
                    ON CONFLICT (order_id) DO UPDATE SET channel_id = EXCLUDED.channel_id, phase = EXCLUDED.phase,
                        close_reason = EXCLUDED.close_reason, updated_at = now(),
                        closed_at = COALESCE(c.closed_at, EXCLUDED.closed_at)
                    """)
            }
        }
        return queries
    }

    /// The channels that count against the limit, by app (`"<bundle id> <environment>"`).
    static let openChannelsQuery: PostgresQuery = """
        SELECT bundle_id || ' ' || environment AS app, count(*)::int8 AS open FROM broadcast_channels
        WHERE closed_at IS NULL GROUP BY bundle_id, environment
        """

    static func openChannels(from rows: PostgresRows) throws -> [String: Int] {
        var counts: [String: Int] = [:]
        for row in rows { counts[try row.decode(String.self, "app")] = Int(try row.decode(Int64.self, "open")) }
        return counts
    }

    /// Whether the orders' channel decision may be taken in this batch (the count is then read).
    static func needsCount(_ events: [InboundEvent], stored: [String: OrderState?], policy: Policy) -> Bool {
        guard policy.broadcast.minimumFollowers > 0 else { return false }
        if events.contains(where: { if case .orderFollowers = $0 { true } else { false } }) { return true }
        return stored.values.contains { state in
            guard let group = state?.group?.value, group.channel == nil else { return false }
            return group.followers.count >= policy.broadcast.minimumFollowers
        }
    }
}
