#if canImport(ActivityKit) && os(iOS)
public import ActivityKit
public import Foundation

/// Turns ActivityKit's async sequences into the app's reports, and hands each to ``send`` (which posts it to
/// the app's backend, which publishes it to RabbitMQ).
///
/// ```swift
/// let reporter = ActivityReporter(userID: user.id, deviceID: deviceID, bundleID: Bundle.main.bundleIdentifier!,
///                                 environment: .production) { event in try await backend.post(event.jsonData()) }
/// Task { try await reporter.reportSettings() }
/// Task { try await reporter.reportPushToStartTokens(for: DeliveryAttributes.self) }
/// // For each activity the app starts or finds in `Activity<DeliveryAttributes>.activities`:
/// Task { try await reporter.reportPushTokens(of: activity, orderID: orderID) }
/// Task { try await reporter.reportEnd(of: activity, orderID: orderID) }
/// ```
@available(iOS 16.2, *)
public struct ActivityReporter: Sendable {
    /// The signed-in person.
    public var userID: String
    /// The device, named the same in every report (for example a UUID the app keeps in the keychain).
    public var deviceID: String
    /// The app's bundle identifier.
    public var bundleID: String
    /// The APNs environment of this build's tokens.
    public var environment: PushEnvironment
    /// Delivers one report to the app's backend.
    public var send: @Sendable (AppEvent) async throws -> Void

    /// A reporter for one person on this device.
    public init(
        userID: String, deviceID: String, bundleID: String, environment: PushEnvironment,
        send: @escaping @Sendable (AppEvent) async throws -> Void
    ) {
        self.userID = userID
        self.deviceID = deviceID
        self.bundleID = bundleID
        self.environment = environment
        self.send = send
    }

    /// Reports each update token of `activity` (`pushTokenUpdates`: the first, then every rotation) as an
    /// `activity.token`, until the activity ends or the task is cancelled.
    public func reportPushTokens<Attributes: ActivityAttributes>(
        of activity: Activity<Attributes>, orderID: String, scheduledStart: Date? = nil
    ) async throws {
        for await data in activity.pushTokenUpdates {
            let report = try ActivityTokenReport(
                orderID: orderID, activityID: activity.id, deviceID: deviceID, token: try PushToken(data),
                bundleID: bundleID, environment: environment, scheduledStart: scheduledStart)
            try await send(.activityToken(report))
        }
    }

    /// Reports each push-to-start token of the attributes type (`pushToStartTokenUpdates`) as an
    /// `activity.push_to_start_token`, until the task is cancelled.
    @available(iOS 17.2, *)
    public func reportPushToStartTokens<Attributes: ActivityAttributes>(
        for attributes: Attributes.Type
    ) async throws {
        for await data in Activity<Attributes>.pushToStartTokenUpdates {
            let report = try PushToStartTokenReport(
                userID: userID, deviceID: deviceID, token: try PushToken(data), bundleID: bundleID,
                environment: environment, attributesType: String(describing: attributes))
            try await send(.pushToStartToken(report))
        }
    }

    /// Reports the end of `activity` (`activityStateUpdates`) as an `activity.ended` once, then returns.
    public func reportEnd<Attributes: ActivityAttributes>(
        of activity: Activity<Attributes>, orderID: String
    ) async throws {
        for await state in activity.activityStateUpdates {
            guard let reason = Self.endReason(state) else { continue }
            let report = try ActivityEndedReport(orderID: orderID, activityID: activity.id, reason: reason)
            try await send(.ended(report))
            return
        }
    }

    /// The reason an `activity.ended` gives for a state, or nil while the activity runs.
    public static func endReason(_ state: ActivityState) -> ActivityEndedReport.Reason? {
        switch state {
        case .dismissed: .dismissedByUser
        case .ended: .endedOnDevice
        default: nil
        }
    }

    /// Reports the person's settings (`ActivityAuthorizationInfo`) now, then again whenever
    /// `activityEnablementUpdates` or `frequentPushEnablementUpdates` say one changed, until the task is
    /// cancelled.
    public func reportSettings() async throws {
        try await sendSettings()
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                for await _ in ActivityAuthorizationInfo().activityEnablementUpdates { try await sendSettings() }
            }
            group.addTask {
                for await _ in ActivityAuthorizationInfo().frequentPushEnablementUpdates { try await sendSettings() }
            }
            try await group.waitForAll()
        }
    }

    /// Reports the settings as they are now.
    public func sendSettings() async throws {
        let info = ActivityAuthorizationInfo()
        let report = try ActivitySettingsReport(
            userID: userID, deviceID: deviceID, activitiesEnabled: info.areActivitiesEnabled,
            frequentPushesEnabled: info.frequentPushesEnabled)
        try await send(.settings(report))
    }
}
#endif
