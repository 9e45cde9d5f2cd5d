package import Foundation

/// Everything the worker stores for one order (a document, plus the indexed columns it reads from the
/// computed properties below).
package struct OrderState: Hashable, Sendable {
    /// The most activities one order tracks, ended ones included (docs/events.md, Limits): an app's
    /// reports of more are recorded on the timeline and not tracked, so a publisher cannot grow an
    /// order's row without bound.
    package static let maxActivities = 20
    /// The most devices one user has push-to-start tokens on file for (docs/events.md, Limits): a
    /// token for a further device is refused until one of them is retired.
    package static let maxPushToStartDevices = 10
    /// The most people one order lists as followers (docs/events.md, `order.followers`).
    package static let maxFollowers = 20

    /// Every field, in one copy-on-write box: a state is copied many times per event (into the batch's change,
    /// its statements, the cache, the dispatcher's hand-over), and a copy of the fields themselves retained
    /// every array and string of them, about 700 instructions a copy and as many to destroy it. A copy of the
    /// box is one retain; the fields are copied once, on the first change of a shared box.
    private var storage: Storage

    private final class Storage: @unchecked Sendable {
        // Written only through `OrderState`'s accessors, and only while the box is not shared
        // (`isKnownUniquelyReferenced`), so no two threads ever see it change.
        //
        // Unchecked exclusivity: a checked access keeps its record in each accessor's coroutine frame, which then
        // no longer fits the caller's buffer and is allocated on the heap, once per change of a field.
        @exclusivity(unchecked) var fields: Fields
        init(_ fields: Fields) { self.fields = fields }
    }

    private struct Fields: Hashable, Sendable {
        var orderID: String
        var record: OrderRecord?
        var activities: [ActivityState]
        var pushToStartTokens: [PushToStartRegistration]
        var handedOver: OutOfLine<Handover>?
        var group: OutOfLine<Group>?
        var seenEventIDs: [String]
        var createdAt: Date
        var lastChangeAt: Date
        var nextSweepAt: Date?
    }

    /// Copies the box first if another state shares it, before a field changes in place.
    private mutating func unshare() {
        if !isKnownUniquelyReferenced(&storage) { storage = Storage(storage.fields) }
    }

    package static func == (lhs: OrderState, rhs: OrderState) -> Bool {
        lhs.storage === rhs.storage || lhs.storage.fields == rhs.storage.fields
    }

    package func hash(into hasher: inout Hasher) { hasher.combine(storage.fields) }

    package var orderID: String {
        get { storage.fields.orderID }
        set {
            unshare()
            storage.fields.orderID = newValue
        }
    }
    /// nil until the first `order.status` (an `activity.token` may come first).
    package var record: OrderRecord? {
        get { storage.fields.record }
        _modify {
            unshare()
            yield &storage.fields.record
        }
    }
    /// One per device, in creation order.
    package var activities: [ActivityState] {
        get { storage.fields.activities }
        _modify {
            unshare()
            yield &storage.fields.activities
        }
    }
    /// The push-to-start tokens of the order's user that the order has been offered.
    package var pushToStartTokens: [PushToStartRegistration] {
        get { storage.fields.pushToStartTokens }
        _modify {
            unshare()
            yield &storage.fields.pushToStartTokens
        }
    }
    /// The people who follow the order besides its user (`order.followers`), sorted; their devices are
    /// started too, into the order's broadcast channel when it has one.
    package var followers: [String] {
        get { group?.value.followers ?? [] }
        set { updateGroup { $0.followers = newValue } }
    }
    /// The `order.followers` event that set ``followers`` (a newer one replaces them).
    package var followersKey: EventKey? {
        get { group?.value.followersKey }
        set { updateGroup { $0.followersKey = newValue } }
    }
    /// The order's broadcast channel (key ``OrderTracker/channelKey``), once the core decided on one: its
    /// pushes create it, update and end every follower's activity in it at once, and delete it. Not one of
    /// ``activities`` (it is no activity on a device).
    package var channel: ActivityState? {
        get { group?.value.channel }
        set { updateGroup { $0.channel = newValue } }
    }

    /// The order's move to another cell (docs/scaling.md, Adding a cell), once it was handed over: the cell, and
    /// the state as it was handed over (what the new cell takes again if it asks twice). Nothing happens here
    /// to an order handed over.
    package var handedOver: OutOfLine<Handover>? {
        get { storage.fields.handedOver }
        set {
            unshare()
            storage.fields.handedOver = newValue
        }
    }

    /// An order's move to another cell.
    package struct Handover: Hashable, Sendable {
        /// The cell that carries the order on.
        package var cell: String
        /// The state handed over (the one before its activities closed here).
        package var state: OrderState

        package init(cell: String, state: OrderState) {
            self.cell = cell
            self.state = state
        }
    }

    /// What only an order that people follow has.
    package struct Group: Hashable, Sendable {
        package var followers: [String] = []
        package var followersKey: EventKey?
        package var channel: ActivityState?
        var isEmpty: Bool { followers.isEmpty && followersKey == nil && channel == nil }
    }

    /// ``followers``, ``followersKey`` and ``channel``, out of line and nil for most orders: inline, they made
    /// every copy of every state larger and retained more (an inline channel alone cost 10 % of an update's
    /// instructions in `livedelivery-bench events`).
    package internal(set) var group: OutOfLine<Group>? {
        get { storage.fields.group }
        set {
            unshare()
            storage.fields.group = newValue
        }
    }

    private mutating func updateGroup(_ change: (inout Group) -> Void) {
        var value = group?.value ?? Group()
        change(&value)
        group = value.isEmpty ? nil : OutOfLine(value)
    }
    /// The ids of the order's last ``seenEventIDLimit`` applied events, oldest first. The inbox refuses a
    /// duplicate for `retention.days`; this catches one the inbox no longer holds, and an older event the rules
    /// absorb anyway (newest wins), so a short window serves.
    package var seenEventIDs: [String] {
        get { storage.fields.seenEventIDs }
        _modify {
            unshare()
            yield &storage.fields.seenEventIDs
        }
    }
    package var createdAt: Date {
        get { storage.fields.createdAt }
        set {
            unshare()
            storage.fields.createdAt = newValue
        }
    }
    /// When an event last changed the order's record (the idle clock).
    package var lastChangeAt: Date {
        get { storage.fields.lastChangeAt }
        set {
            unshare()
            storage.fields.lastChangeAt = newValue
        }
    }
    /// When ``OrderTracker/sweep(_:context:now:)`` has something to do next, if ever.
    package var nextSweepAt: Date? {
        get { storage.fields.nextSweepAt }
        set {
            unshare()
            storage.fields.nextSweepAt = newValue
        }
    }

    /// A new, empty order (what the worker passes when it has nothing stored yet).
    package init(orderID: String, now: Date) {
        storage = Storage(
            Fields(
                orderID: orderID, activities: [], pushToStartTokens: [], seenEventIDs: [], createdAt: now,
                lastChangeAt: now))
    }

    package static let seenEventIDLimit = 64

    /// The newest order event applied (indexed column: last sequence / occurred_at).
    package var lastEventKey: EventKey? { record?.newest }
    package var status: OrderStatus? { record?.status }

    /// The order is finished and nothing is left to send: the worker may archive it.
    package var isSettled: Bool {
        handedOver != nil
            || ((record?.isTerminal ?? false) && activities.allSatisfy { $0.phase.isFinal && $0.pending == nil }
                && channel.map { $0.phase.isFinal && $0.pending == nil } ?? true)
    }

    /// Whether no push of the order waits to be sent or answered: only such an order is handed over.
    package var isQuiet: Bool {
        activities.allSatisfy { $0.pending == nil } && channel?.pending == nil
    }

    package func activity(_ key: String) -> ActivityState? { activities.first { $0.key == key } }

    /// The followers who count for a channel: listed, and not the order's own user.
    var channelFollowers: [String] { followers.filter { $0 != record?.userID } }

    /// Files a push-to-start registration, the newest per device winning; returns whether anything changed. An
    /// order holds registrations for at most ``maxActivities`` devices, the most it could start (its user's and
    /// its followers'), so that neither its row nor its starts grow with the devices filed.
    mutating func file(_ registration: PushToStartRegistration) -> Bool {
        guard pushToStartTokens.file(registration, room: Self.maxActivities) else { return false }
        pushToStartTokens.sort { $0.deviceID < $1.deviceID }
        return true
    }

    /// Files the registrations on file for the order's people; returns the devices left out because the order
    /// holds as many as it may.
    mutating func file(_ registrations: [PushToStartRegistration]) -> [String] {
        var unheld: [String] = []
        for registration in registrations where !file(registration) {
            if !pushToStartTokens.contains(where: { $0.deviceID == registration.deviceID }) {
                unheld.append(registration.deviceID)
            }
        }
        return unheld
    }

    mutating func remember(_ eventID: String) {
        seenEventIDs.append(eventID)
        // The oldest go first (a document of an earlier release, which kept 512, shrinks on its next event).
        if seenEventIDs.count > Self.seenEventIDLimit {
            seenEventIDs.removeFirst(seenEventIDs.count - Self.seenEventIDLimit)
        }
    }
}

/// What the worker knows beyond one order, passed into each step.
package struct TrackingContext: Sendable, Hashable {
    /// The push-to-start tokens on file for the order's user (all devices). They are merged into
    /// the order so that a later status can still start an activity.
    package var pushToStartTokens: [PushToStartRegistration]
    /// Devices that must not be started now (the worker's per-device start limit across orders).
    /// Their start waits; a later event or sweep tries again.
    package var startRefusedDevices: Set<String>
    /// The user's Live Activity settings per device (`activity.settings`), by device id: they choose each
    /// activity's priority-10 budget, and a device with Live Activities off is not started and has its
    /// activities ended.
    package var deviceSettings: [String: DeviceSettings]
    /// The broadcast channels open or being opened, by app (`"<bundle id> <environment>"`): a new channel is
    /// opened only while an app has ``Policy/Broadcast/channelHeadroom`` left under the limit. nil when the
    /// worker did not count them (the core then opens no channel).
    package var openChannels: [String: Int]?
    /// Whether the people's tokens and settings were read: only then may a device be started (its settings may
    /// forbid it). An answer or a retry has no context (``unread``): it starts nothing, and an order it leaves
    /// with a device to start asks the sweeper to come at once.
    package var knowsPeople: Bool

    package init(
        pushToStartTokens: [PushToStartRegistration] = [], startRefusedDevices: Set<String> = [],
        deviceSettings: [String: DeviceSettings] = [:], openChannels: [String: Int]? = nil, knowsPeople: Bool = true
    ) {
        self.pushToStartTokens = pushToStartTokens
        self.startRefusedDevices = startRefusedDevices
        self.deviceSettings = deviceSettings
        self.openChannels = openChannels
        self.knowsPeople = knowsPeople
    }

    /// No one's tokens or settings: what APNs' answers and retries are recorded with.
    package static let unread = TrackingContext(knowsPeople: false)
}

extension TrackingContext {
    /// One order's context, as the consumer, the sweeper and `render` all assemble it: the push-to-start tokens
    /// and device settings on file of the order's user first, then of each follower in order of their ids (a
    /// device's settings filed by the user win), and the start limit's and channel counts as read.
    ///
    /// - Parameters:
    ///   - userID: the order's user (the event's, for an order its first event creates).
    ///   - joining: followers an `order.followers` event being applied adds.
    ///   - tokens, settings: what was read, by user; a user not in them adds nothing (an earlier step merged
    ///     their tokens into the order).
    package init(
        order state: OrderState, userID: String?, joining: [String] = [],
        tokens: [String: [PushToStartRegistration]], settings: [String: [String: DeviceSettings]],
        startRefusedDevices: Set<String> = [], openChannels: [String: Int]? = nil
    ) {
        self.init(startRefusedDevices: startRefusedDevices, openChannels: openChannels)
        for user in Self.users(of: state, userID: userID, joining: joining) {
            pushToStartTokens += tokens[user] ?? []
            deviceSettings.merge(settings[user] ?? [:]) { filed, _ in filed }
        }
    }

    /// The users whose tokens and settings an order's context reads: its user, then its followers by id.
    package static func users(of state: OrderState, userID: String?, joining: [String] = []) -> [String] {
        let followers = state.followers + joining
        guard !followers.isEmpty else { return userID.map { [$0] } ?? [] }
        let others = Set(followers).subtracting(userID.map { [$0] } ?? []).sorted()
        return (userID.map { [$0] } ?? []) + others
    }
}
