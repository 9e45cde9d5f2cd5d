import APNsModel
import Foundation
import LiveDeliveryJSON
import LiveDeliveryTime

/// What a push is to carry, as planning decided it: the input of
/// ``TrackingConfiguration/compose(_:_:_:record:content:mark:now:)``.
struct PushDraft {
    var kind: PlannedPush.Kind
    var alert: AlertContent?
    /// The step whose alert it carries, and which texts the alert used.
    var alertStep: String?
    var alertKind: ActivityState.AlertKind?
    var priority: Int
    /// A start's attributes and its alert should the payload be too large for the chosen one.
    var attributes: JSONObject? = nil
    var fallbackAlert: AlertContent? = nil
    /// An end's dismissal, after the end.
    var dismissAfter: TimeInterval? = nil
    /// What planning decided on the way (alert, priority), logged after the push's own line.
    var notes: [Decision]
    var reason: String
}

/// What a push carries, put together from what planning decided: its dates, its payload within the size limit,
/// its `apns-id` and headers. ``OrderTracker`` decides what to send and why (a ``PushDraft``); this composes it
/// and makes it the activity's pending push.
extension TrackingConfiguration {
    /// The content-state of the record and what a push of it carries.
    func contentMark(for record: OrderRecord) -> (JSONObject, ActivityState.ContentMark) {
        let content = mapping.contentState(for: record)
        let rule = policy.rule(for: record.status)
        return (
            content,
            ActivityState.ContentMark(
                contentState: JSONValue.object(content).compactText, step: rule.step, relevance: rule.relevance,
                status: record.status, statusKey: record.statusKey, eta: record.eta?.value)
        )
    }

    /// The push's dates, from the timestamp it must carry (strictly after the newest its phone may have shown).
    private struct PushDates {
        var timestamp: Int
        var staleDate: Int?
        var dismissalDate: Int?
        var expiration: Int
    }

    /// Builds the push `draft` describes for the activity, makes it the activity's pending push (replacing any
    /// earlier), and adds it to the step; or says why nothing can be sent.
    func compose(
        _ draft: PushDraft, _ activity: inout ActivityState, _ step: inout Step, record: OrderRecord,
        content: JSONObject, mark: ActivityState.ContentMark, now: Date
    ) {
        let key = activity.key
        let target: (token: DeviceToken?, bundleID: String, environment: APNsEnvironment)
        if let broadcast = activity.broadcast {
            target = (nil, broadcast.bundleID, broadcast.environment)
        } else if let device = activity.pushTarget {
            target = (device.token, device.bundleID, device.environment)
        } else {
            step.decisions.append(Decision(.waitingForToken, activity: key, "no token to push to yet"))
            return
        }
        var decisions = draft.notes
        let dates = self.dates(
            draft, activity, after: newestShown(by: activity, in: step.state), record: record, now: now,
            decisions: &decisions)
        guard
            let (payload, finalAlert) = self.payload(
                draft, activity, record: record, content: content, mark: mark, dates: dates, decisions: &decisions,
                step: &step)
        else { return }
        let apnsID = PushID.make([record.orderID, key, draft.kind.rawValue, String(dates.timestamp), mark.contentState])
        let channelID = activity.broadcast != nil ? activity.channelID : nil
        let push = PlannedPush(
            orderID: record.orderID, activityKey: key, activityID: activity.activityID, kind: draft.kind,
            deviceToken: target.token, channelID: channelID, environment: target.environment,
            bundleID: target.bundleID, apnsID: apnsID, priority: draft.priority, timestamp: dates.timestamp,
            notBefore: Date(timeIntervalSince1970: Double(dates.timestamp)), expiration: dates.expiration,
            headers: APNsRequest.liveActivityHeaders(
                channelID: channelID, topic: target.bundleID, priority: draft.priority,
                expiration: dates.expiration, apnsID: apnsID),
            payload: payload, alert: finalAlert, step: mark.step, status: record.status,
            statusKey: record.statusKey, reason: draft.reason, mark: mark)
        if let pending = activity.pending {
            decisions.insert(
                Decision(
                    .superseded, activity: key,
                    "replaces the pending \(pending.kind.rawValue) (timestamp \(pending.timestamp)) that APNs has not confirmed; only the newest matters"
                ), at: 0)
        }
        activity.makePending(push, alertStep: finalAlert != nil ? draft.alertStep : nil, alertKind: draft.alertKind)
        step.plan(push)
        step.decisions.append(
            Decision(
                push.kind.plannedCode, activity: key,
                "\(push.kind.rawValue): \(draft.reason) (priority \(push.priority)"
                    + (finalAlert.map { ", alert \"\($0)\"" } ?? "") + ")"))
        step.decisions += decisions
    }

    /// The newest `aps.timestamp` a phone showing the activity may have applied, which its next push must exceed,
    /// and whose it is. A follower's device started into the order's broadcast channel applies the pushes to its
    /// own token (its start) and the channel's broadcasts alike, and keeps what it shows for a push with an older
    /// timestamp (an end still ends, without its content). So one clock runs over both: an activity in the
    /// channel counts the channel's last broadcast too, and the channel counts the last push to every activity
    /// started into it, whatever its phase (a withdrawn start may still be accepted). For the channel this reads
    /// `state.activities`, which ``reconcileChannel(_:record:content:mark:now:forced:sweepEnd:)`` plans with in
    /// place.
    private func newestShown(by activity: ActivityState, in state: OrderState) -> (timestamp: Int, whose: String) {
        var newest = (timestamp: activity.lastTimestamp, whose: "the previous")
        guard let channelID = activity.channelID else { return newest }
        if activity.broadcast != nil {
            for member in state.activities
            where member.channelID == channelID && member.lastTimestamp > newest.timestamp {
                newest = (member.lastTimestamp, "\(member.key)'s last, started into the channel,")
            }
        } else if let channel = state.channel, channel.channelID == channelID,
            channel.lastTimestamp > newest.timestamp
        {
            newest = (channel.lastTimestamp, "the channel's last broadcast")
        }
        return newest
    }

    /// The timestamp (held past `newest`: see ``newestShown(by:in:)``), the stale and dismissal dates, and the
    /// expiration.
    private func dates(
        _ draft: PushDraft, _ activity: ActivityState, after newest: (timestamp: Int, whose: String),
        record: OrderRecord, now: Date, decisions: inout [Decision]
    ) -> PushDates {
        let nowSeconds = Int(now.timeIntervalSince1970.rounded(.down))
        let timestamp = max(nowSeconds, newest.timestamp + 1)
        if timestamp > nowSeconds {
            decisions.append(
                Decision(
                    .timestampHeld, activity: activity.key,
                    "aps.timestamp must exceed \(newest.whose) \(newest.timestamp): not sent before \(RFC3339.format(Date(timeIntervalSince1970: Double(timestamp))))"
                ))
        }
        var staleDate: Int?
        if draft.kind != .end {
            var stale =
                record.eta.map { $0.value.latest.addingTimeInterval(policy.staleAfterETA) }
                ?? now.addingTimeInterval(policy.staleWithoutETA)
            stale = max(
                stale, Date(timeIntervalSince1970: Double(timestamp)).addingTimeInterval(policy.staleMinimumAhead))
            staleDate = Int(stale.timeIntervalSince1970.rounded(.up))
        }
        var dismissalDate: Int?
        if let dismissAfter = draft.dismissAfter {
            let clamped = min(max(dismissAfter, 0), 4 * 3600)
            dismissalDate = clamped == 0 ? timestamp - 1 : timestamp + Int(clamped)
        }
        let expirationSeconds =
            switch draft.kind {
            case .start: policy.startExpiration
            case .update: policy.updateExpiration
            case .end, .openChannel, .closeChannel: policy.endExpiration
            }
        // A channel that stores no message takes only `apns-expiration: 0`.
        let expiration =
            activity.broadcast.map { !$0.storesMostRecent } ?? false ? 0 : nowSeconds + Int(expirationSeconds)
        return PushDates(
            timestamp: timestamp, staleDate: staleDate, dismissalDate: dismissalDate, expiration: expiration)
    }

    /// The payload within the size limit, and the alert it kept; nil (with the decision) when it cannot fit.
    private func payload(
        _ draft: PushDraft, _ activity: ActivityState, record: OrderRecord, content: JSONObject,
        mark: ActivityState.ContentMark, dates: PushDates, decisions: inout [Decision], step: inout Step
    ) -> ([UInt8], AlertContent?)? {
        assert(mark.contentState == JSONValue.object(content).compactText, "the mark is of this content")
        let isStart = draft.kind == .start
        let builder = PayloadBuilder(
            kind: draft.kind, contentState: content, attributesType: isStart ? mapping.attributesType : nil,
            attributes: draft.attributes, timestamp: dates.timestamp, staleDate: dates.staleDate,
            dismissalDate: dates.dismissalDate, relevance: policy.rule(for: record.status).relevance,
            alert: draft.alert, startFallbackAlert: draft.fallbackAlert, inputPushToken: policy.inputPushToken,
            inputPushChannel: isStart ? activity.channelID : nil, contentStateJSON: mark.contentState)
        switch builder.build(maxBytes: policy.maxPayloadBytes) {
        case .refused(let why):
            step.decisions.append(
                Decision(.payloadRefused, activity: activity.key, "\(draft.kind.rawValue) not sent: \(why)"))
            return nil
        case .built(let bytes, let kept, let trimNotes):
            for note in trimNotes { decisions.append(Decision(.payloadTrimmed, activity: activity.key, note)) }
            return (bytes, kept)
        }
    }
    /// Composes one of the channel's management requests, its creation or its deletion, as its pending push.
    func composeChannelRequest(
        _ kind: PlannedPush.Kind, _ channel: inout ActivityState, _ step: inout Step, record: OrderRecord,
        mark: ActivityState.ContentMark, now: Date, reason: String
    ) {
        guard let broadcast = channel.broadcast else { return }
        let key = OrderTracker.channelKey
        let apnsID: String
        let headers: [PlannedPush.Header]
        var payload: [UInt8] = []
        if kind == .openChannel {
            apnsID = PushID.make([record.orderID, key, kind.rawValue])
            headers = APNsRequest.channelCreationHeaders(requestID: apnsID)
            payload = JSONValue.object(
                JSONObject([
                    ("message-storage-policy", .int(broadcast.storesMostRecent ? 1 : 0)),
                    ("push-type", .string("LiveActivity")),
                ])
            ).serialized()
        } else {
            guard let channelID = channel.channelID else { return }
            apnsID = PushID.make([record.orderID, key, kind.rawValue, channelID])
            headers = APNsRequest.channelDeletionHeaders(channelID: channelID, requestID: apnsID)
        }
        let seconds = Int(now.timeIntervalSince1970.rounded(.down))
        let push = PlannedPush(
            orderID: record.orderID, activityKey: key, activityID: nil, kind: kind, deviceToken: nil,
            channelID: kind == .closeChannel ? channel.channelID : nil, environment: broadcast.environment,
            bundleID: broadcast.bundleID, apnsID: apnsID, priority: 10, timestamp: seconds,
            notBefore: Date(timeIntervalSince1970: Double(seconds)), expiration: 0, headers: headers,
            payload: payload, alert: nil, step: mark.step, status: record.status, statusKey: record.statusKey,
            reason: reason, mark: mark)
        channel.pending = ActivityState.PendingPush(
            apnsID: apnsID, kind: kind, timestamp: seconds, priority: 10, alertStep: nil, alertKind: nil, mark: mark)
        step.plan(push)
        step.decisions.append(Decision(kind.plannedCode, activity: key, reason))
    }
}

extension PlannedPush.Kind {
    /// The decision that a push of this kind is planned.
    var plannedCode: Decision.Code {
        switch self {
        case .start: .startPlanned
        case .update: .updatePlanned
        case .end: .endPlanned
        case .openChannel: .channelPlanned
        case .closeChannel: .channelClosePlanned
        }
    }
}

extension ActivityState {
    /// `push` is the activity's pending push now, carrying the alert of `alertStep` (counted once per step).
    mutating func makePending(_ push: PlannedPush, alertStep: String?, alertKind: AlertKind?) {
        if let alertStep, !alertedSteps.contains(alertStep) {
            alertedSteps.append(alertStep)
            alertCount += 1
        }
        pending = PendingPush(
            apnsID: push.apnsID, kind: push.kind, timestamp: push.timestamp, priority: push.priority,
            alertStep: alertStep, alertKind: alertStep != nil ? alertKind : nil, mark: push.mark)
        planned = push.mark
        lastTimestamp = push.timestamp
    }
}
