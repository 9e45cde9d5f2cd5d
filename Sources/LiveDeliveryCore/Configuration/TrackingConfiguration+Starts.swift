import Foundation

/// Which of an order's people's devices may be started remotely (push-to-start) now, and why not.
extension TrackingConfiguration {
    enum Startability {
        /// A start may be planned, into the order's broadcast channel of this id if one is named.
        case start(joining: String?)
        /// Not now, and why (told only when announced).
        case notNow(Decision.Code)
    }

    /// Whether a device may be started remotely now, and into which channel.
    func startability(
        _ registration: PushToStartRegistration, of state: OrderState, record: OrderRecord, context: TrackingContext
    ) -> Startability {
        guard registration.attributesType == mapping.attributesType else { return .notNow(.startWrongAttributesType) }
        guard policy.startOn.contains(record.status) else { return .notNow(.startNotOnStatus) }
        if let settings = context.deviceSettings[registration.deviceID], !settings.activitiesEnabled {
            return .notNow(.startActivitiesDisabled)
        }
        // A follower's device of the channel's app starts into the channel, once it is open.
        guard registration.userID != record.userID, let channel = state.channel,
            channel.broadcast?.app == registration.app
        else { return .start(joining: nil) }
        switch channel.phase {
        case .pendingStart: return .notNow(.waitingForChannel)
        case .active: return .start(joining: channel.channelID)
        default: return .start(joining: nil)
        }
    }

    /// Why a device is not started now, for people.
    func notStarted(
        _ code: Decision.Code, _ registration: PushToStartRegistration, record: OrderRecord
    ) -> Decision {
        let device = registration.deviceID
        let why =
            switch code {
            case .startWrongAttributesType:
                "device \(device)'s push-to-start token is for \(registration.attributesType), not \(mapping.attributesType); not used"
            case .startNotOnStatus:
                "device \(device) can be started remotely, but not at \(record.status) (startOn: \(policy.startOn.sorted().map(\.rawValue).joined(separator: ", ")))"
            case .startActivitiesDisabled:
                "device \(device) can be started remotely, but Live Activities are off there"
            default:
                "device \(device) of follower \(registration.userID) starts once the order's broadcast channel is open"
            }
        return Decision(code, why)
    }

    /// When APNs answered the order's channel, if a follower's device has waited for that answer to start
    /// since (an answer is recorded without anyone's settings, so it starts no one): the sweeper's moment.
    func followersWaitingSince(_ state: OrderState) -> Date? {
        guard let channel = state.channel, channel.phase == .active || channel.phase == .failed,
            let answered = channel.startedAt ?? channel.endedAt, let record = state.record, !record.isTerminal,
            state.activities.count < OrderState.maxActivities
        else { return nil }
        let waiting = state.pushToStartTokens.contains { registration in
            guard registration.userID != record.userID, state.followers.contains(registration.userID),
                !state.activities.contains(where: { $0.deviceID == registration.deviceID }),
                case .start = startability(registration, of: state, record: record, context: .unread)
            else { return false }
            return true
        }
        return waiting ? answered : nil
    }
}
