import Foundation
import LiveDeliveryCore
import Postgres

/// `device_settings` (`sql/120`): the person's Live Activity settings per user and device, newest report wins.
enum DeviceSettingsRows {
    /// The most devices one user has settings on file for (docs/events.md, caps): a report for a further
    /// device is not filed, so that a publisher cannot grow a user's rows without bound.
    static let maxDevicesPerUser = OrderState.maxPushToStartDevices

    /// The settings on file for these users.
    static func query(users: [String]) -> PostgresQuery {
        """
        SELECT user_id, device_id, activities_enabled, frequent_pushes_enabled, occurred_at, event_id
        FROM device_settings WHERE user_id = ANY(\(PostgresTextArray(Array(Set(users)).sorted()))::text[])
        """
    }

    /// By user, then by device.
    static func settings(from rows: PostgresRows) throws -> [String: [String: DeviceSettings]] {
        var settings: [String: [String: DeviceSettings]] = [:]
        for row in rows {
            let userID = try row.decode(String.self, "user_id")
            let deviceID = try row.decode(String.self, "device_id")
            settings[userID, default: [:]][deviceID] = DeviceSettings(
                userID: userID, deviceID: deviceID, activitiesEnabled: try row.decode(Bool.self, "activities_enabled"),
                frequentPushesEnabled: try row.decode(Bool.self, "frequent_pushes_enabled"),
                key: EventKey(
                    sequence: nil, occurredAt: try row.decode(Date.self, "occurred_at"),
                    eventID: try row.decode(String.self, "event_id")))
        }
        return settings
    }

    /// Files a report: a newer one replaces the row, an older one changes nothing, and a device beyond the
    /// user's ``maxDevicesPerUser`` is not filed. (The user's row lock, taken before, orders concurrent batches.)
    static func upsertQuery(_ e: ActivitySettingsEvent) -> PostgresQuery {
        """
        INSERT INTO device_settings (user_id, device_id, activities_enabled, frequent_pushes_enabled,
                                     occurred_at, event_id)
        SELECT \(e.userID), \(e.deviceID), \(e.activitiesEnabled), \(e.frequentPushesEnabled), \(e.occurredAt),
               \(e.eventID)
        WHERE EXISTS (SELECT FROM device_settings WHERE user_id = \(e.userID) AND device_id = \(e.deviceID))
           OR (SELECT count(*) FROM device_settings WHERE user_id = \(e.userID)) < \(maxDevicesPerUser)
        ON CONFLICT (user_id, device_id) DO UPDATE SET
            activities_enabled = EXCLUDED.activities_enabled,
            frequent_pushes_enabled = EXCLUDED.frequent_pushes_enabled,
            occurred_at = EXCLUDED.occurred_at, event_id = EXCLUDED.event_id, updated_at = now()
        WHERE (EXCLUDED.occurred_at, EXCLUDED.event_id) > (device_settings.occurred_at, device_settings.event_id)
        """
    }
}
