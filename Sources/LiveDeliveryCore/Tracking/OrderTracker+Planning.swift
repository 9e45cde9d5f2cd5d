import APNsModel
import Foundation
import LiveDeliveryJSON

extension OrderTracker {
    /// Brings every activity in line with the order's record: starts, updates, ends.
    ///
    /// - Parameters:
    ///   - announce: also explain why nothing is sent (after an event that changed something).
    ///   - rebuild: activities whose pending push must be rebuilt even if the content is the same
    ///     (token rotated, retry).
    ///   - endReason: for ends the sweeper decides (idle, lifetime): the activities to end and why.
    func reconcile(
        _ step: inout Step, context: TrackingContext, now: Date, announce: Bool, rebuild: Set<String>,
        sweepEnds: [String: Decision.Code] = [:]
    ) {
        guard let record = step.state.record else { return }
        let (content, mark) = contentMark(for: record)

        openChannelIfWanted(&step, record: record, context: context, mark: mark, now: now)
        if context.knowsPeople {
            startNewActivities(&step, record: record, context: context, now: now, announce: announce)
        }

        // Moved out while each activity is brought in line in place: no copy of an activity per step.
        var activities = step.state.activities
        step.state.activities = []
        for index in activities.indices {
            let key = activities[index].key
            reconcile(
                &activities[index], &step, record: record, content: content, mark: mark, context: context, now: now,
                announce: announce, forced: !rebuild.isEmpty && rebuild.contains(key),
                sweepEnd: sweepEnds.isEmpty ? nil : sweepEnds[key])
        }
        step.state.activities = activities
        reconcileChannel(
            &step, record: record, content: content, mark: mark, now: now,
            forced: rebuild.contains(Self.channelKey), sweepEnd: sweepEnds[Self.channelKey])
    }

    /// Brings one activity in line with the order's record.
    private func reconcile(
        _ activity: inout ActivityState, _ step: inout Step, record: OrderRecord, content: JSONObject,
        mark: ActivityState.ContentMark, context: TrackingContext, now: Date, announce: Bool, forced: Bool,
        sweepEnd: Decision.Code?
    ) {
        switch activity.phase {
        case .pendingStart:
            if record.isTerminal {
                step.take(activity.withdrawStart(status: record.status, now: now), for: activity.key)
            } else if activity.pending == nil {
                if let device = activity.deviceID, context.startRefusedDevices.contains(device) {
                    if announce {
                        step.decisions.append(
                            Decision(
                                .startDeviceRefused, activity: activity.key,
                                "device \(device) is at its start limit; the start waits"))
                    }
                } else {
                    planStart(&activity, &step, record: record, content: content, mark: mark, now: now)
                }
            } else if forced || mark.differs(from: activity.pending?.mark) {
                planStart(&activity, &step, record: record, content: content, mark: mark, now: now)
            }
        case .starting:
            if announce && mark.differs(from: activity.planned) {
                step.decisions.append(
                    Decision(
                        .waitingForToken, activity: activity.key,
                        "started; the app has not reported its update token yet. The newest state is sent then"))
            }
        case .active where activity.channelID != nil:
            break  // The order's broadcast channel updates and ends it.
        case .active:
            if let sweepEnd {
                planEnd(&activity, &step, record: record, content: content, mark: mark, now: now, sweep: sweepEnd)
            } else if record.isTerminal {
                planEnd(&activity, &step, record: record, content: content, mark: mark, now: now, sweep: nil)
            } else if forced || mark.differs(from: activity.planned) {
                planUpdate(&activity, &step, record: record, content: content, mark: mark, now: now)
            } else if announce {
                step.decisions.append(
                    Decision(
                        .contentUnchanged, activity: activity.key,
                        "the content-state and relevance are what the activity already has; nothing is sent"))
            }
        case .ending:
            if forced || activity.pending == nil {
                planEnd(
                    &activity, &step, record: record, content: content, mark: mark, now: now,
                    sweep: activity.closeReason?.sweepEnd)
            }
        case .ended, .expired, .failed:
            break
        }
    }

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

    private func startNewActivities(
        _ step: inout Step, record: OrderRecord, context: TrackingContext, now: Date, announce: Bool
    ) {
        guard !record.isTerminal else { return }
        // The order's own user's devices first, then the followers': the activity limit keeps the user's.
        let candidates = step.state.pushToStartTokens.filter { registration in
            !step.state.activities.contains(where: { $0.deviceID == registration.deviceID })
                && (registration.userID == record.userID || step.state.followers.contains(registration.userID))
        }
        let own = candidates.filter { $0.userID == record.userID }
        var refused: [String] = []
        for registration in own + candidates.filter({ $0.userID != record.userID }) {
            let joins: String?
            switch startability(registration, of: step.state, record: record, context: context) {
            case .start(let channelID):
                joins = channelID
            case .notNow(let code):
                if announce { step.decisions.append(notStarted(code, registration, record: record)) }
                continue
            }
            guard step.state.activities.count < OrderState.maxActivities else {
                refused.append(registration.deviceID)
                continue
            }
            let activity = newActivity(registration, joining: joins, context: context, &step, now: now)
            step.state.activities.append(activity)
        }
        if !refused.isEmpty && announce {
            step.decisions.append(
                Decision(
                    .activityLimit,
                    "the order tracks \(step.state.activities.count) activities, the most it may; \(refused.count) "
                        + (refused.count == 1
                            ? "device that could be started remotely is" : "devices that could be started remotely are")
                        + " not started (\(Self.sample(refused)))"))
        }
    }

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
    private func notStarted(
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

    /// A device's activity, to be started by push-to-start.
    private func newActivity(
        _ registration: PushToStartRegistration, joining channelID: String?, context: TrackingContext,
        _ step: inout Step, now: Date
    ) -> ActivityState {
        let device = registration.deviceID
        var activity = ActivityState(
            key: "device:\(device)", activityID: nil, deviceID: device, phase: .pendingStart, now: now)
        activity.channelID = channelID
        activity.frequentPushes = context.deviceSettings[device]?.frequentPushesEnabled
        if activity.frequentPushes == true {
            step.decisions.append(frequentUpdates(true, activity: activity.key, device: device))
        }
        activity.startToken = registration
        if context.startRefusedDevices.contains(device) {
            step.decisions.append(
                Decision(
                    .startDeviceRefused, activity: activity.key,
                    "device \(device) is at its start limit; the start waits"
                ))
        }
        return activity
    }

    // MARK: - Start, update, end

    func planStart(
        _ activity: inout ActivityState, _ step: inout Step, record: OrderRecord, content: JSONObject,
        mark: ActivityState.ContentMark, now: Date
    ) {
        let rule = policy.rule(for: record.status)
        let values = AlertTemplate.values(for: record, now: now)
        let fallback = policy.startFallback.render([:], sound: policy.alertSound)
        let alert = rule.texts.lazy.compactMap { $0.render(values, sound: self.policy.alertSound) }.first ?? fallback
        let key = activity.key
        let notes = [
            Decision(.alert, activity: key, "a remote start must carry an alert"),
            Decision(.priority, activity: key, "priority 10: a start is sent at once (it draws on the start budget)"),
        ]
        let draft = PushDraft(
            kind: .start, alert: alert, alertStep: mark.step, alertKind: .status, priority: 10,
            attributes: mapping.attributes(for: record), fallbackAlert: fallback, notes: notes,
            reason: "remote start at \(record.status) via push-to-start token \(activity.startToken!.token)"
                + (activity.channelID.map { " into broadcast channel \($0)" } ?? ""))
        build(draft, &activity, &step, record: record, content: content, mark: mark, now: now)
    }

    func planUpdate(
        _ activity: inout ActivityState, _ step: inout Step, record: OrderRecord, content: JSONObject,
        mark: ActivityState.ContentMark, now: Date
    ) {
        let key = activity.key
        var notes: [Decision] = []
        let what: String
        if let previous = activity.planned {
            what = previous.step != mark.step ? "step \(previous.step) → \(mark.step)" : describeChange(previous, mark)
        } else {
            what = "first content for this activity"
        }
        var (alert, alertStep, alertKind) = chooseAlert(activity, record: record, mark: mark, now: now, notes: &notes)
        var priority = 5
        if alert != nil {
            let rule = policy.rule(for: record.status)
            let essential = rule.essential && alertKind == .status
            if essential || budgetLeft(activity, now: now) {
                priority = 10
                notes.append(
                    Decision(
                        .priority, activity: key,
                        "priority 10: it alerts"
                            + (essential
                                ? " (essential)"
                                : " (budget: \(budgetUsed(activity, now: now)) of \(budget(activity)) used this hour)")
                    ))
            } else {
                notes.append(
                    Decision(
                        .budgetDowngrade, activity: key,
                        "\(budget(activity)) priority-10 pushes already this hour and the alert is not essential: priority 5, alert dropped"
                    ))
                alert = nil
                alertStep = nil
                alertKind = nil
            }
        } else {
            notes.append(Decision(.priority, activity: key, "priority 5: no alert, a routine update"))
        }
        let draft = PushDraft(
            kind: .update, alert: alert, alertStep: alertStep, alertKind: alertKind, priority: priority, notes: notes,
            reason: what)
        build(draft, &activity, &step, record: record, content: content, mark: mark, now: now)
    }

    func planEnd(
        _ activity: inout ActivityState, _ step: inout Step, record: OrderRecord, content: JSONObject,
        mark: ActivityState.ContentMark, now: Date, sweep: Decision.Code?
    ) {
        let key = activity.key
        var notes: [Decision] = []
        var alert: AlertContent?
        var alertStep: String?
        var alertKind: ActivityState.AlertKind?
        let dismissAfter: TimeInterval
        let why: String
        if let sweep {
            dismissAfter = policy.sweep.dismissAfter
            why =
                sweep == .sweepIdle
                ? "no order event for \(Int(policy.sweep.idleTimeout / 60)) min: ending it rather than leaving it up"
                : "near the system's 8-hour limit: ending it with its last content"
            notes.append(Decision(sweep, activity: key, why))
            notes.append(Decision(.noAlert, activity: key, "no alert: the sweeper ends quietly"))
        } else {
            dismissAfter = policy.rule(for: record.status).dismissAfter ?? 1800
            why = "the order is \(record.status)"
            (alert, alertStep, alertKind) = chooseAlert(activity, record: record, mark: mark, now: now, notes: &notes)
        }
        notes.append(Decision(.priority, activity: key, "priority 10: an end is sent at once"))
        let draft = PushDraft(
            kind: .end, alert: alert, alertStep: alertStep, alertKind: alertKind, priority: 10,
            dismissAfter: dismissAfter, notes: notes,
            reason: (sweep.map { "\($0.rawValue): " } ?? "") + why
                + "; final content, dismissed \(dismissLabel(dismissAfter)) after the end")
        build(draft, &activity, &step, record: record, content: content, mark: mark, now: now)
        activity.endPlanned(sweep: sweep)
    }

    private func describeChange(_ previous: ActivityState.ContentMark, _ mark: ActivityState.ContentMark) -> String {
        if previous.eta != mark.eta, let eta = mark.eta {
            if let old = previous.eta {
                let slip = Int(eta.latest.timeIntervalSince(old.latest) / 60)
                return "ETA moved \(slip >= 0 ? "+" : "")\(slip) min"
            }
            return "ETA known"
        }
        if previous.contentState == mark.contentState && previous.relevance != mark.relevance {
            return
                "\(previous.status) → \(mark.status): relevance \(JSONWriter.format(previous.relevance)) → \(JSONWriter.format(mark.relevance))"
        }
        return previous.status != mark.status ? "\(previous.status) → \(mark.status)" : "details changed"
    }

    /// The alert an update or end carries, if any: reaching an alerting step, or an ETA slip past
    /// the threshold; at most once per step, at most ``Policy/alertCap`` per activity.
    private func chooseAlert(
        _ activity: ActivityState, record: OrderRecord, mark: ActivityState.ContentMark, now: Date,
        notes: inout [Decision]
    ) -> (AlertContent?, String?, ActivityState.AlertKind?) {
        let key = activity.key
        let rule = policy.rule(for: record.status)
        func render(_ kind: ActivityState.AlertKind) -> AlertContent? {
            // The template values only when an alert is rendered: most pushes carry none.
            let values = AlertTemplate.values(for: record, now: now)
            let texts = kind == .etaSlip ? policy.etaSlipTexts : rule.texts
            guard let alert = texts.lazy.compactMap({ $0.render(values, sound: self.policy.alertSound) }).first else {
                notes.append(
                    Decision(
                        .alertNoText, activity: key,
                        "no alert text of \(kind == .etaSlip ? "alerts.etaSlip" : "statuses.\(record.status)") can be filled; no alert"
                    ))
                return nil
            }
            return alert
        }
        // A newer state replacing a pending push of the same step keeps that push's alert.
        if let pending = activity.pending, let step = pending.alertStep, step == mark.step, let kind = pending.alertKind
        {
            notes.append(
                Decision(
                    .alert, activity: key, "alert kept: it replaces a pending push whose \(step) alert is not confirmed"
                ))
            return (render(kind), step, kind)
        }
        guard let kind = alertMoment(activity, record: record, mark: mark, notes: &notes) else {
            return (nil, nil, nil)
        }
        if activity.alertedSteps.contains(mark.step) {
            notes.append(
                Decision(.alertAlreadySent, activity: key, "no alert: \(mark.step) has alerted already (once per step)")
            )
            return (nil, nil, nil)
        }
        if activity.alertCount >= policy.alertCap {
            notes.append(
                Decision(
                    .alertCapReached, activity: key,
                    "no alert: \(activity.alertCount) alerts already, the cap is \(policy.alertCap)"))
            return (nil, nil, nil)
        }
        guard let alert = render(kind) else { return (nil, nil, nil) }
        notes.append(
            kind == .etaSlip
                ? Decision(
                    .alertETASlip, activity: key,
                    "alert: the ETA slipped more than \(minutes(policy.etaSlipThreshold)) (\(mark.step) has not alerted yet)"
                )
                : Decision(.alert, activity: key, "alert: reaching \(mark.step) is an alerting moment"))
        return (alert, mark.step, kind)
    }

    /// Which texts the push is a moment to alert with, if any: reaching an alerting step, or an ETA slip past
    /// the threshold within a step.
    private func alertMoment(
        _ activity: ActivityState, record: OrderRecord, mark: ActivityState.ContentMark, notes: inout [Decision]
    ) -> ActivityState.AlertKind? {
        let rule = policy.rule(for: record.status)
        if rule.alert && activity.planned?.step != mark.step { return .status }
        if let old = activity.planned?.eta, let eta = mark.eta, activity.planned?.step == mark.step {
            let slip = eta.latest.timeIntervalSince(old.latest)
            if slip > policy.etaSlipThreshold { return .etaSlip }
            if slip > 0 {
                notes.append(
                    Decision(
                        .noAlert, activity: activity.key,
                        "no alert: the ETA moved \(minutes(slip)), within the \(minutes(policy.etaSlipThreshold)) threshold"
                    ))
                return nil
            }
        }
        notes.append(
            Decision(
                .noAlert, activity: activity.key,
                rule.alert ? "no alert: still \(mark.step)" : "no alert: \(record.status) is not an alerting moment"))
        return nil
    }

    func minutes(_ seconds: TimeInterval) -> String { "\(Int((seconds / 60).rounded())) min" }

    func dismissLabel(_ seconds: TimeInterval) -> String {
        seconds <= 0 ? "immediately" : minutes(min(seconds, 4 * 3600))
    }

    func budgetUsed(_ activity: ActivityState, now: Date) -> Int {
        let cutoff = Int(now.timeIntervalSince1970.rounded(.down)) - 3600
        return activity.highPriorityLog.filter { $0 > cutoff }.count
    }

    func budgetLeft(_ activity: ActivityState, now: Date) -> Bool {
        budgetUsed(activity, now: now) < budget(activity)
    }

    /// The activity's priority-10 pushes per hour: the larger budget where its device has frequent updates on.
    func budget(_ activity: ActivityState) -> Int {
        activity.frequentPushes == true ? policy.frequentPriority10PerHour : policy.priority10PerHour
    }

    // MARK: - Building

    /// What a push is to carry, as planning decided it: ``build(_:_:_:record:content:mark:now:)``'s input.
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

    /// The push's dates, from the timestamp it must carry (strictly after the newest its phone may have shown).
    private struct PushDates {
        var timestamp: Int
        var staleDate: Int?
        var dismissalDate: Int?
        var expiration: Int
    }

    /// Builds the push `draft` describes for the activity, makes it the activity's pending push (replacing any
    /// earlier), and adds it to the step; or says why nothing can be sent.
    func build(
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
        step.pushes.removeAll { $0.activityKey == key }
        step.withdrawn.removeAll { $0 == key }
        step.pushes.append(push)
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
