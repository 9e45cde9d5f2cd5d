import Foundation

/// A user's reports that reach every open order of theirs: push-to-start tokens and device settings, newest
/// report per device. The worker files them in `push_to_start_tokens` and `device_settings` (an upsert with
/// the same rule, in SQL) and reads them per batch; `livedelivery render` files them here, in memory. Which
/// orders an event reaches is ``InboundEvent/orders(openOrdersOfUser:)``, for both.
package struct UserReports: Sendable {
    /// Push-to-start tokens, by user.
    package private(set) var tokens: [String: [PushToStartRegistration]] = [:]
    /// Device settings, by user and device.
    package private(set) var settings: [String: [String: DeviceSettings]] = [:]

    package init() {}

    /// Files the report `event` carries, if it is a user's; returns false when it is older than the device's
    /// report on file (which stands), true otherwise.
    package mutating func file(_ event: InboundEvent) -> Bool {
        switch event {
        case .pushToStartToken(let e):
            return tokens[e.userID, default: []].file(e.registration)
        case .activitySettings(let e):
            if let filed = settings[e.userID]?[e.deviceID], filed.key.isNewer(than: e.key) { return false }
            settings[e.userID, default: [:]][e.deviceID] = e.settings
            return true
        case .orderStatus, .activityToken, .activityEnded, .orderFollowers:
            return true
        }
    }
}

extension [PushToStartRegistration] {
    /// Newest registration per device wins: `registration` replaces its device's when it is newer, and is
    /// appended for a device not here yet while fewer than `room` are; returns whether anything changed.
    package mutating func file(_ registration: PushToStartRegistration, room: Int = .max) -> Bool {
        if let index = firstIndex(where: { $0.deviceID == registration.deviceID }) {
            guard registration.key.isNewer(than: self[index].key) else { return false }
            self[index] = registration
            return true
        }
        guard count < room else { return false }
        append(registration)
        return true
    }
}

extension InboundEvent {
    /// The orders the event is applied to: a user's report (a push-to-start token, settings) to each open
    /// order of its user, in id order; any other event to its own order.
    package func orders(openOrdersOfUser: (String) -> [String]) -> [String] {
        if reachesUser, let userID { return openOrdersOfUser(userID).sorted() }
        return orderID.map { [$0] } ?? []
    }
}
