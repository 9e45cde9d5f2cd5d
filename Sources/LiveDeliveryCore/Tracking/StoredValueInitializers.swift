package import Foundation

// Memberwise initializers, for code outside the core that reads stored states and pushes back
// without `Codable` (the worker's field-by-field decoder). Each takes every stored property, in
// declaration order, so that a property added later breaks the build of that decoder instead of
// being silently left at a default.

extension OrderRecord {
    package init(
        orderID: String, userID: String, latestOpen: Register<OrderStatus>?, terminal: Register<OrderStatus>?,
        orderNumber: Register<Int>?, merchantName: Register<String>?, courierName: Register<String>?,
        eta: Register<ETAWindow>?, newest: EventKey
    ) {
        self.orderID = orderID
        self.userID = userID
        self.latestOpen = latestOpen
        self.terminal = terminal
        self.orderNumber = orderNumber
        self.merchantName = merchantName
        self.courierName = courierName
        self.eta = eta
        self.newest = newest
    }
}

extension OrderState {
    package init(
        orderID: String, record: OrderRecord?, activities: [ActivityState],
        pushToStartTokens: [PushToStartRegistration], followers: [String], followersKey: EventKey?,
        channel: ActivityState?, seenEventIDs: [String], createdAt: Date, lastChangeAt: Date, nextSweepAt: Date?
    ) {
        self.orderID = orderID
        self.record = record
        self.activities = activities
        self.pushToStartTokens = pushToStartTokens
        let group = Group(followers: followers, followersKey: followersKey, channel: channel)
        self.group = group.isEmpty ? nil : OutOfLine(group)
        self.seenEventIDs = seenEventIDs
        self.createdAt = createdAt
        self.lastChangeAt = lastChangeAt
        self.nextSweepAt = nextSweepAt
    }
}

extension ActivityState {
    package init(
        key: String, activityID: String?, deviceID: String?, phase: Phase, closeReason: CloseReason?,
        updateToken: UpdateToken?, startToken: PushToStartRegistration?, createdAt: Date, startedAt: Date?,
        endedAt: Date?, pending: PendingPush?, planned: ContentMark?, sent: ContentMark?, lastTimestamp: Int,
        alertedSteps: [String], alertCount: Int, highPriorityLog: [Int], frequentPushes: Bool? = nil,
        scheduledStart: Date? = nil, channelID: String? = nil, broadcast: Broadcast? = nil
    ) {
        self.key = key
        self.activityID = activityID
        self.deviceID = deviceID
        self.phase = phase
        self.closeReason = closeReason
        self.updateToken = updateToken
        self.startToken = startToken
        self.createdAt = createdAt
        self.startedAt = startedAt
        self.endedAt = endedAt
        self.pending = pending
        self.planned = planned
        self.sent = sent
        self.lastTimestamp = lastTimestamp
        self.alertedSteps = alertedSteps
        self.alertCount = alertCount
        self.highPriorityLog = highPriorityLog
        self.frequentPushes = frequentPushes
        self.scheduledStart = scheduledStart
        let info = ChannelInfo(channelID: channelID, broadcast: broadcast)
        self.channelInfo = info.channelID == nil && info.broadcast == nil ? nil : OutOfLine(info)
    }
}
