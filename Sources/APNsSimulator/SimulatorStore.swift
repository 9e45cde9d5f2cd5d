import Foundation
import NIOConcurrencyHelpers
import Synchronization

/// The simulator's shared state: the device model, the request records and the injected faults.
///
/// One short lock (the recorder's) covers the device verdict and the record of a push, so both agree.
/// Payload JSON is parsed before taking it. Faults are behind an atomic count, so no lock is taken for them
/// when none are set (the normal, fast case).
final class SimulatorStore: Sendable {
    private struct State: Sendable {
        var devices: DeviceModel
        var records: RecordRing<PushRecord>
        var nextSequence = 1
        var faults: [FaultRule] = []
    }

    private let state: NIOLockedValueBox<State>
    private let faultCount = Atomic<Int>(0)
    let connectionsAccepted = Atomic<Int>(0)
    let connectionsOpen = Atomic<Int>(0)
    let requests = Atomic<Int>(0)
    let goawaysSent = Atomic<Int>(0)
    let now: @Sendable () -> Date
    private let onActivityStarted: (@Sendable (PushRecord) -> Void)?

    init(configuration: SimulatorConfiguration) {
        self.state = NIOLockedValueBox(Self.emptyState(configuration))
        self.now = configuration.now
        self.onActivityStarted = configuration.onActivityStarted
    }

    private static func emptyState(_ configuration: SimulatorConfiguration) -> State {
        State(
            devices: DeviceModel(
                environment: configuration.environment,
                priority10BudgetPerHour: configuration.priority10BudgetPerHour,
                shape: configuration.contentStateShape, channelLimit: configuration.channelLimit),
            records: RecordRing(limit: configuration.recordLimit))
    }

    // MARK: Pushes

    /// APNs' token verdict, then (when it lets the push through) the device's; records the request.
    func deliver(
        _ record: PushRecord,
        push: DeviceModel.Push?,
        bundleID: String?
    ) -> PushRecord {
        let now = self.now()
        let stored = state.withLockedValue { state in
            var record = record
            if let push, let bundleID {
                if let rejection = state.devices.rejection(token: push.token, bundleID: bundleID) {
                    record.status = rejection.status
                    record.reason = rejection.reason
                    record.verdict = DeviceVerdict(.rejected, rejection.timestamp.map { "unregistered at \($0)" })
                    record.unregisteredAt = rejection.timestamp
                } else {
                    let result = state.devices.deliver(push, now: now)
                    record.verdict = result.verdict
                    record.activityID = result.activityID
                    record.issuedUpdateToken = result.issuedUpdateToken
                    record.deliveries = result.deliveries
                    if let channelID = result.channelID { record.channelID = channelID }
                }
            }
            record.sequence = state.nextSequence
            state.nextSequence += 1
            state.records.append(record)
            return record
        }
        if let onActivityStarted, stored.verdict.kind == .started, stored.issuedUpdateToken != nil {
            onActivityStarted(stored)
        }
        return stored
    }

    /// APNs' answer to a channel-management or broadcast request that passed the header and body checks,
    /// and (for a broadcast) what the subscribed activities made of it; records the request.
    func handle(_ record: PushRecord, _ request: DeviceModel.ChannelRequest) -> (PushRecord, DeviceModel.ChannelResult)
    {
        let now = self.now()
        return state.withLockedValue { state in
            var record = record
            let result = state.devices.handle(request, now: now)
            record.status = result.status
            record.reason = result.reason
            record.verdict = result.verdict
            record.deliveries = result.deliveries
            if let created = result.channelID { record.channelID = created }
            record.sequence = state.nextSequence
            state.nextSequence += 1
            state.records.append(record)
            return (record, result)
        }
    }

    func pushes(after sequence: Int) -> [PushRecord] {
        state.withLockedValue { state in state.records.suffix { $0.sequence > sequence } }
    }

    func pushes(token: String?, activity: String?, channel: String? = nil, limit: Int?) -> [PushRecord] {
        state.withLockedValue { state in
            let matching = state.records.elements.filter { record in
                (token == nil || record.deviceToken == token
                    || (record.issuedUpdateToken != nil && record.issuedUpdateToken == token))
                    && (activity == nil || record.activityID == activity
                        || record.deliveries?.contains { $0.activityID == activity } == true)
                    && (channel == nil || record.channelID == channel)
            }
            if let limit, matching.count > limit { return Array(matching.suffix(limit)) }
            return matching
        }
    }

    // MARK: Devices

    func device(token: String) -> DeviceView? { state.withLockedValue { $0.devices.view(token: token) } }
    func activity(id: String) -> ActivityView? { state.withLockedValue { $0.devices.view(activity: id) } }
    func tokens() -> [String] { state.withLockedValue { $0.devices.allTokens } }

    func register(token: String, bundleID: String?, environment: SimulatorConfiguration.Environment?) {
        state.withLockedValue { $0.devices.register(token: token, bundleID: bundleID, environment: environment) }
    }

    func markUnregistered(token: String, at date: Date?) {
        let date = date ?? now()
        state.withLockedValue { $0.devices.markUnregistered(token: token, at: date) }
    }

    func markExpired(token: String) { state.withLockedValue { $0.devices.markExpired(token: token) } }

    func rotate(token old: String, to new: String) -> String? {
        state.withLockedValue { $0.devices.rotate(token: old, to: new) }
    }

    // MARK: Channels

    func isBroadcastEnabled(bundleID: String) -> Bool {
        state.withLockedValue { !$0.devices.broadcastDisabled.contains(bundleID) }
    }

    func setBroadcast(enabled: Bool, bundleID: String) {
        let now = self.now()
        state.withLockedValue { $0.devices.setBroadcast(enabled: enabled, bundleID: bundleID, now: now) }
    }

    func channels(bundleID: String?) -> [ChannelView] {
        state.withLockedValue { $0.devices.channelViews(bundleID: bundleID) }
    }

    func channel(id: String) -> ChannelView? { state.withLockedValue { $0.devices.channelView(id: id) } }

    func deleteChannel(id: String) -> ChannelView? {
        let now = self.now()
        return state.withLockedValue { $0.devices.deleteChannel(id: id, now: now) }
    }

    var channelLimit: Int {
        get { state.withLockedValue { $0.devices.channelLimit } }
        set { state.withLockedValue { $0.devices.channelLimit = newValue } }
    }

    // MARK: Faults

    func addFault(_ rule: FaultRule) {
        state.withLockedValue { state in
            state.faults.append(rule)
            faultCount.store(state.faults.count, ordering: .releasing)
        }
    }

    func faults() -> [FaultRule] { state.withLockedValue { $0.faults } }

    func clearFaults() {
        state.withLockedValue { state in
            state.faults = []
            faultCount.store(0, ordering: .releasing)
        }
    }

    /// The fault that applies to this request, consuming one of its `count`.
    func takeFault(token: String, kind: APNsRequestKind = .device, channelID: String? = nil) -> FaultRule? {
        guard faultCount.load(ordering: .acquiring) > 0 else { return nil }
        return state.withLockedValue { state in
            for index in state.faults.indices {
                let rule = state.faults[index]
                if let only = rule.token, only != token { continue }
                if let only = rule.kind, only != kind { continue }
                if let only = rule.channel, only != channelID { continue }
                if let percent = rule.percent {
                    if Double.random(in: 0..<100) < percent { return rule }
                    continue
                }
                let remaining = (rule.count ?? 1) - 1
                if remaining <= 0 {
                    state.faults.remove(at: index)
                    faultCount.store(state.faults.count, ordering: .releasing)
                } else {
                    state.faults[index].count = remaining
                }
                return rule
            }
            return nil
        }
    }

    // MARK: Reset and statistics

    func reset(configuration: SimulatorConfiguration) {
        state.withLockedValue { state in
            state = Self.emptyState(configuration)
            faultCount.store(0, ordering: .releasing)
        }
    }

    var statistics: SimulatorStatistics {
        SimulatorStatistics(
            connectionsAccepted: connectionsAccepted.load(ordering: .relaxed),
            connectionsOpen: connectionsOpen.load(ordering: .relaxed),
            requests: requests.load(ordering: .relaxed),
            goawaysSent: goawaysSent.load(ordering: .relaxed))
    }
}
