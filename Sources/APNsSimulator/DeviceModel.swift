import Foundation
import LiveDeliveryJSON

/// The phones behind the tokens: which activity each token drives, what it shows, and what it dropped.
///
/// A pure state machine (no I/O, no clock of its own): the simulator holds it under its recorder lock and
/// passes the time in. Rules, from Apple's ActivityKit documentation and DTS answers:
/// - an update whose `timestamp` is older than the state shown is dropped; one more than 8 h ahead too;
/// - nothing applies after an `end` (an `end` itself ignores an old timestamp but keeps the newer state);
/// - a `start` to a push-to-start token creates an activity and issues it an update token;
/// - an update or end to a token never seen is taken as an activity the app started locally;
/// - priority 10 pushes beyond the hourly budget are throttled silently (APNs still says 200);
/// - with a content-state shape, a push that would not decode is dropped (`wouldNotDecode`);
/// - a `start` with `input-push-channel` subscribes the activity to a broadcast channel, whose broadcasts
///   then apply to it (see `DeviceModel+Channels.swift`, which also keeps APNs' channels).
struct DeviceModel: Sendable {
    var environment: SimulatorConfiguration.Environment
    var priority10BudgetPerHour: Int?
    var shape: ContentStateShape?
    /// Live channels an app may have per environment (`CannotCreateChannelConfig` beyond).
    var channelLimit: Int

    private(set) var tokens = ShardedDictionary<String, TokenState>()
    private(set) var activities = ShardedDictionary<String, ActivityState>()
    /// Every channel created since the start or the last reset, deleted ones included (marked).
    var channels: [String: ChannelState] = [:]
    /// Live channels per bundle id (this model's environment).
    var liveChannelCounts: [String: Int] = [:]
    /// Bundle ids whose broadcast capability is turned off.
    var broadcastDisabled: Set<String> = []
    /// Channels created so far: orders the lists.
    var channelsCreated = 0

    init(
        environment: SimulatorConfiguration.Environment,
        priority10BudgetPerHour: Int?,
        shape: ContentStateShape?,
        channelLimit: Int = 10_000
    ) {
        self.environment = environment
        self.priority10BudgetPerHour = priority10BudgetPerHour
        self.shape = shape
        self.channelLimit = channelLimit
    }

    struct TokenState: Sendable {
        var bundleID: String?
        var environment: SimulatorConfiguration.Environment
        var kind: DeviceView.Kind = .unknown
        var unregisteredAt: Date?
        var expired = false
        var pushCount = 0
        /// For an update token: its activity. For a push-to-start token: the activities it started.
        var activityIDs: [String] = []
    }

    struct ActivityState: Sendable {
        var view: ActivityView
        var priority10Times: [Date] = []
    }

    /// A push that APNs accepted, as the device receives it.
    struct Push: Sendable {
        var token: String
        var bundleID: String
        var pushType: String
        var priority: Int
        var payload: JSONValue?
    }

    struct Result: Sendable {
        var verdict: DeviceVerdict
        var activityID: String?
        var issuedUpdateToken: String?
        var deliveries: [BroadcastDelivery]?
        /// The channel a `start` named in `input-push-channel`.
        var channelID: String?
    }

    // MARK: Token marks (the control API)

    mutating func register(token: String, bundleID: String?, environment: SimulatorConfiguration.Environment?) {
        var state = tokens[token] ?? TokenState(bundleID: nil, environment: self.environment)
        if let bundleID { state.bundleID = bundleID }
        if let environment { state.environment = environment }
        tokens[token] = state
    }

    mutating func markUnregistered(token: String, at date: Date) {
        var state = tokens[token] ?? TokenState(bundleID: nil, environment: environment)
        state.unregisteredAt = date
        tokens[token] = state
    }

    /// The phone rotated an activity's update token (ActivityKit's `pushTokenUpdates`): pushes to the
    /// new token update the same activity, whose view shows the new token; the old one still reaches it.
    /// Returns the activity's id, or nil when no activity has `old` as its token yet.
    mutating func rotate(token old: String, to new: String) -> String? {
        guard let state = tokens[old], state.kind == .activity, let activityID = state.activityIDs.first,
            activities[activityID] != nil
        else { return nil }
        var rotated = tokens[new] ?? TokenState(bundleID: state.bundleID, environment: state.environment)
        rotated.bundleID = rotated.bundleID ?? state.bundleID
        rotated.kind = .activity
        rotated.activityIDs = [activityID]
        tokens[new] = rotated
        activities[activityID]?.view.updateToken = new
        return activityID
    }

    mutating func markExpired(token: String) {
        var state = tokens[token] ?? TokenState(bundleID: nil, environment: environment)
        state.expired = true
        tokens[token] = state
    }

    /// APNs' answer for the token before the device sees anything: `nil` when the push may go through.
    func rejection(token: String, bundleID: String) -> (status: Int, reason: String, timestamp: Date?)? {
        guard let state = tokens[token] else { return nil }
        if state.environment != environment { return (400, "BadDeviceToken", nil) }
        if let bundle = state.bundleID, bundle != bundleID { return (400, "DeviceTokenNotForTopic", nil) }
        if state.expired { return (410, "ExpiredToken", nil) }
        if let date = state.unregisteredAt { return (410, "Unregistered", date) }
        return nil
    }

    // MARK: Delivery

    mutating func deliver(_ push: Push, now: Date) -> Result {
        var tokenState = tokens[push.token] ?? TokenState(bundleID: push.bundleID, environment: environment)
        tokenState.bundleID = tokenState.bundleID ?? push.bundleID
        tokenState.pushCount += 1
        tokens[push.token] = tokenState

        guard push.pushType == "liveactivity" else { return Result(verdict: DeviceVerdict(.notLiveActivity)) }
        guard let aps = push.payload?["aps"], case .object = aps else {
            return Result(verdict: DeviceVerdict(.invalidPayload, "no aps dictionary"))
        }
        guard let event = aps["event"]?.stringValue else {
            return Result(verdict: DeviceVerdict(.invalidPayload, "aps.event missing"))
        }
        switch event {
        case "start": return start(push, aps: aps, now: now)
        case "update", "end": return update(push, aps: aps, isEnd: event == "end", now: now)
        default: return Result(verdict: DeviceVerdict(.invalidPayload, "unknown aps.event \(event)"))
        }
    }

    private mutating func start(_ push: Push, aps: JSONValue, now: Date) -> Result {
        for key in ["timestamp", "content-state", "attributes-type", "attributes", "alert"] where aps[key] == nil {
            return Result(verdict: DeviceVerdict(.invalidPayload, "aps.\(key) missing on start"))
        }
        var channelID: String?
        if let channel = aps["input-push-channel"] {
            guard aps["input-push-token"] == nil else {
                return Result(verdict: DeviceVerdict(.invalidPayload, "both input-push-token and input-push-channel"))
            }
            guard let id = channel.stringValue else {
                return Result(verdict: DeviceVerdict(.invalidPayload, "aps.input-push-channel is not a string"))
            }
            guard liveChannel(id, bundleID: push.bundleID) != nil else {
                return Result(
                    verdict: DeviceVerdict(.unknownChannel, "channel \(id) is not live for \(push.bundleID)"),
                    channelID: id)
            }
            channelID = id
        }
        if let problem = timestampProblem(aps, now: now) { return Result(verdict: problem) }
        if let shape {
            if let problem = shape.problem(
                attributesType: aps["attributes-type"]?.stringValue, attributes: aps["attributes"])
                ?? shape.problem(contentState: aps["content-state"]!)
            {
                return Result(verdict: DeviceVerdict(.wouldNotDecode, problem))
            }
        }
        let activityID = "sim-" + UUID().uuidString.lowercased()
        // A channel's activity gets its pushes through the channel: no update token.
        let updateToken = channelID == nil ? Self.randomToken() : nil
        let view = ActivityView(
            activityID: activityID, updateToken: updateToken, channelID: channelID, startedByToken: push.token,
            attributesType: aps["attributes-type"]?.stringValue, attributes: aps["attributes"],
            contentState: aps["content-state"], timestamp: aps["timestamp"]?.numberValue,
            staleDate: aps["stale-date"]?.numberValue, dismissalDate: nil,
            relevanceScore: aps["relevance-score"]?.numberValue, ended: false, endedAt: nil,
            appliedCount: 1, droppedCount: 0, alertCount: 1)
        activities[activityID] = ActivityState(view: view)
        tokens[push.token]?.kind = .pushToStart
        tokens[push.token]?.activityIDs.append(activityID)
        if let updateToken {
            tokens[updateToken] = TokenState(
                bundleID: push.bundleID, environment: environment, kind: .activity, activityIDs: [activityID])
        }
        return Result(
            verdict: DeviceVerdict(.started), activityID: activityID, issuedUpdateToken: updateToken,
            deliveries: channelID.flatMap { subscribe(activityID, to: $0, now: now) }, channelID: channelID)
    }

    private mutating func update(_ push: Push, aps: JSONValue, isEnd: Bool, now: Date) -> Result {
        let tokenState = tokens[push.token]!
        if tokenState.kind == .pushToStart {
            return Result(verdict: DeviceVerdict(.invalidPayload, "update or end sent to a push-to-start token"))
        }
        let activityID: String
        if let existing = tokenState.activityIDs.first {
            activityID = existing
        } else {
            // The app started this activity itself and uploaded its update token.
            activityID = "local-" + UUID().uuidString.lowercased()
            activities[activityID] = ActivityState(
                view: ActivityView(
                    activityID: activityID, updateToken: push.token, channelID: nil, startedByToken: nil,
                    attributesType: nil, attributes: nil, contentState: nil, timestamp: nil, staleDate: nil,
                    dismissalDate: nil, relevanceScore: nil, ended: false, endedAt: nil, appliedCount: 0,
                    droppedCount: 0, alertCount: 0))
            tokens[push.token]?.kind = .activity
            tokens[push.token]?.activityIDs = [activityID]
        }
        let verdict = apply(aps, isEnd: isEnd, priority: push.priority, budgeted: true, to: activityID, now: now)
        return Result(verdict: verdict, activityID: activityID)
    }

    /// Applies an update or end to one activity as ActivityKit does. `budgeted` pushes draw on the
    /// activity's priority-10 budget; broadcasts do not.
    mutating func apply(
        _ aps: JSONValue,
        isEnd: Bool,
        priority: Int,
        budgeted: Bool,
        to activityID: String,
        now: Date
    ) -> DeviceVerdict {
        var activity = activities[activityID]!
        defer { activities[activityID] = activity }
        func drop(_ verdict: DeviceVerdict) -> DeviceVerdict {
            activity.view.droppedCount += 1
            return verdict
        }

        if activity.view.ended { return drop(DeviceVerdict(.afterEnd)) }
        if let problem = timestampProblem(aps, now: now) { return drop(problem) }
        let timestamp = aps["timestamp"]!.numberValue!
        let contentState = aps["content-state"]
        if contentState == nil && !isEnd {
            return drop(DeviceVerdict(.invalidPayload, "aps.content-state missing"))
        }
        if let shape, let contentState, let problem = shape.problem(contentState: contentState) {
            return drop(DeviceVerdict(.wouldNotDecode, problem))
        }
        let shown = activity.view.timestamp
        let isOlder = shown.map { timestamp < $0 } ?? false
        if isOlder && !isEnd {
            return drop(DeviceVerdict(.staleTimestamp, "timestamp \(Int(timestamp)) < shown \(Int(shown!))"))
        }
        if budgeted, priority == 10, let budget = priority10BudgetPerHour {
            let hourAgo = now.addingTimeInterval(-3600)
            activity.priority10Times.removeAll { $0 <= hourAgo }
            if activity.priority10Times.count >= budget {
                return drop(DeviceVerdict(.throttled, "priority-10 budget of \(budget)/h used up"))
            }
            activity.priority10Times.append(now)
        }
        if !isOlder {
            if let contentState { activity.view.contentState = contentState }
            activity.view.timestamp = timestamp
            if let stale = aps["stale-date"]?.numberValue { activity.view.staleDate = stale }
            if let score = aps["relevance-score"]?.numberValue { activity.view.relevanceScore = score }
        }
        if aps["alert"] != nil { activity.view.alertCount += 1 }
        activity.view.appliedCount += 1
        if isEnd {
            activity.view.ended = true
            activity.view.endedAt = now
            activity.view.dismissalDate = aps["dismissal-date"]?.numberValue
            return DeviceVerdict(.ended)
        }
        return DeviceVerdict(.displayed)
    }

    private func timestampProblem(_ aps: JSONValue, now: Date) -> DeviceVerdict? {
        guard let timestamp = aps["timestamp"]?.numberValue else {
            return DeviceVerdict(.invalidPayload, "aps.timestamp missing or not a number")
        }
        if timestamp > now.timeIntervalSince1970 + 8 * 3600 {
            return DeviceVerdict(.futureTimestamp, "timestamp \(Int(timestamp)) is more than 8 h ahead")
        }
        return nil
    }

    // MARK: Views

    func view(token: String) -> DeviceView? {
        guard let state = tokens[token] else { return nil }
        return DeviceView(
            token: token, bundleID: state.bundleID, environment: state.environment, kind: state.kind,
            unregisteredAt: state.unregisteredAt, expired: state.expired, pushCount: state.pushCount,
            activities: state.activityIDs.compactMap { activities[$0]?.view })
    }

    func view(activity id: String) -> ActivityView? { activities[id]?.view }

    var allTokens: [String] { tokens.keys.sorted() }

    static func randomToken() -> String {
        var generator = SystemRandomNumberGenerator()
        return (0..<40).map { _ in String(format: "%02x", UInt8.random(in: 0...255, using: &generator)) }.joined()
    }
}
