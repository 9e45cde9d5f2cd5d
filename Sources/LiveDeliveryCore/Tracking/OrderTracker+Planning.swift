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
        startNewActivities(&step, record: record, context: context, now: now, announce: announce)

        for index in step.state.activities.indices {
            var activity = step.state.activities[index]
            defer { step.state.activities[index] = activity }
            let forced = rebuild.contains(activity.key)
            switch activity.phase {
            case .pendingStart:
                if record.isTerminal {
                    if activity.pending != nil { step.withdrawn.append(activity.key) }
                    activity.pending = nil
                    activity.close(.ended, .decided(.startWithdrawn), at: now)
                    step.decisions.append(
                        Decision(
                            .startWithdrawn, activity: activity.key,
                            "the order is \(record.status) before the start went out; the start is withdrawn"))
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
                if let reason = sweepEnds[activity.key] {
                    activity.closeReason = .decided(reason)
                    planEnd(&activity, &step, record: record, content: content, mark: mark, now: now, sweep: reason)
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
            default:
                break
            }
        }
        reconcileChannel(
            &step, record: record, content: content, mark: mark, now: now,
            forced: rebuild.contains(Self.channelKey), sweepEnd: sweepEnds[Self.channelKey])
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
        let channel = step.state.channel
        // The order's own user's devices first, then the followers': the activity limit keeps the user's.
        let candidates = step.state.pushToStartTokens.filter { registration in
            !step.state.activities.contains(where: { $0.deviceID == registration.deviceID })
                && (registration.userID == record.userID || step.state.followers.contains(registration.userID))
        }
        let own = candidates.filter { $0.userID == record.userID }
        var refused: [String] = []
        for registration in own + candidates.filter({ $0.userID != record.userID }) {
            guard registration.attributesType == mapping.attributesType else {
                if announce {
                    step.decisions.append(
                        Decision(
                            .startWrongAttributesType,
                            "device \(registration.deviceID)'s push-to-start token is for \(registration.attributesType), not \(mapping.attributesType); not used"
                        ))
                }
                continue
            }
            guard policy.startOn.contains(record.status) else {
                if announce {
                    step.decisions.append(
                        Decision(
                            .startNotOnStatus,
                            "device \(registration.deviceID) can be started remotely, but not at \(record.status) (startOn: \(policy.startOn.sorted().map(\.rawValue).joined(separator: ", ")))"
                        ))
                }
                continue
            }
            if let settings = context.deviceSettings[registration.deviceID], !settings.activitiesEnabled {
                if announce {
                    step.decisions.append(
                        Decision(
                            .startActivitiesDisabled,
                            "device \(registration.deviceID) can be started remotely, but Live Activities are off there"
                        ))
                }
                continue
            }
            var joins: String?
            if registration.userID != record.userID, let channel, channel.broadcast?.app == registration.app {
                switch channel.phase {
                case .pendingStart:
                    if announce {
                        step.decisions.append(
                            Decision(
                                .waitingForChannel,
                                "device \(registration.deviceID) of follower \(registration.userID) starts once the order's broadcast channel is open"
                            ))
                    }
                    continue
                case .active:
                    joins = channel.channelID
                default:
                    break
                }
            }
            guard step.state.activities.count < OrderState.maxActivities else {
                refused.append(registration.deviceID)
                continue
            }
            var activity = ActivityState(
                key: "device:\(registration.deviceID)", activityID: nil, deviceID: registration.deviceID,
                phase: .pendingStart, now: now)
            activity.channelID = joins
            activity.frequentPushes = context.deviceSettings[registration.deviceID]?.frequentPushesEnabled
            if activity.frequentPushes == true {
                step.decisions.append(frequentUpdates(true, activity: activity.key, device: registration.deviceID))
            }
            activity.startToken = registration
            if context.startRefusedDevices.contains(registration.deviceID) {
                step.decisions.append(
                    Decision(
                        .startDeviceRefused, activity: activity.key,
                        "device \(registration.deviceID) is at its start limit; the start waits"))
            }
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
        build(
            .start, &activity, &step, record: record, content: content, mark: mark, now: now,
            alert: alert, alertStep: mark.step, alertKind: "status", priority: 10,
            attributes: mapping.attributes(for: record), fallbackAlert: fallback, dismissAfter: nil, notes: notes,
            reason: "remote start at \(record.status) via push-to-start token \(activity.startToken!.token)"
                + (activity.channelID.map { " into broadcast channel \($0)" } ?? ""))
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
            let essential = rule.essential && alertKind == "status"
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
        build(
            .update, &activity, &step, record: record, content: content, mark: mark, now: now, alert: alert,
            alertStep: alertStep, alertKind: alertKind, priority: priority, attributes: nil, fallbackAlert: nil,
            dismissAfter: nil, notes: notes, reason: what)
    }

    func planEnd(
        _ activity: inout ActivityState, _ step: inout Step, record: OrderRecord, content: JSONObject,
        mark: ActivityState.ContentMark, now: Date, sweep: Decision.Code?
    ) {
        let key = activity.key
        var notes: [Decision] = []
        var alert: AlertContent?
        var alertStep: String?
        var alertKind: String?
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
        build(
            .end, &activity, &step, record: record, content: content, mark: mark, now: now, alert: alert,
            alertStep: alertStep, alertKind: alertKind, priority: 10, attributes: nil, fallbackAlert: nil,
            dismissAfter: dismissAfter, notes: notes,
            reason: (sweep.map { "\($0.rawValue): " } ?? "") + why
                + "; final content, dismissed \(dismissLabel(dismissAfter)) after the end")
        if activity.pending?.kind == .end { activity.phase = .ending }
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
    ) -> (AlertContent?, String?, String?) {
        let key = activity.key
        let rule = policy.rule(for: record.status)
        func render(_ kind: String) -> AlertContent? {
            // The template values only when an alert is rendered: most pushes carry none.
            let values = AlertTemplate.values(for: record, now: now)
            let texts = kind == "eta_slip" ? policy.etaSlipTexts : rule.texts
            guard let alert = texts.lazy.compactMap({ $0.render(values, sound: self.policy.alertSound) }).first else {
                notes.append(
                    Decision(
                        .alertNoText, activity: key,
                        "no alert text of \(kind == "eta_slip" ? "alerts.etaSlip" : "statuses.\(record.status)") can be filled; no alert"
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
        var kind: String?
        if rule.alert && activity.planned?.step != mark.step {
            kind = "status"
        } else if let old = activity.planned?.eta, let eta = mark.eta, activity.planned?.step == mark.step {
            let slip = eta.latest.timeIntervalSince(old.latest)
            if slip > policy.etaSlipThreshold {
                kind = "eta_slip"
            } else if slip > 0 {
                notes.append(
                    Decision(
                        .noAlert, activity: key,
                        "no alert: the ETA moved \(minutes(slip)), within the \(minutes(policy.etaSlipThreshold)) threshold"
                    ))
                return (nil, nil, nil)
            }
        }
        guard let kind else {
            notes.append(
                Decision(
                    .noAlert, activity: key,
                    rule.alert ? "no alert: still \(mark.step)" : "no alert: \(record.status) is not an alerting moment"
                ))
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
            kind == "eta_slip"
                ? Decision(
                    .alertETASlip, activity: key,
                    "alert: the ETA slipped more than \(minutes(policy.etaSlipThreshold)) (\(mark.step) has not alerted yet)"
                )
                : Decision(.alert, activity: key, "alert: reaching \(mark.step) is an alerting moment"))
        return (alert, mark.step, kind)
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

    func build(
        _ kind: PlannedPush.Kind, _ activity: inout ActivityState, _ step: inout Step, record: OrderRecord,
        content: JSONObject, mark: ActivityState.ContentMark, now: Date, alert: AlertContent?, alertStep: String?,
        alertKind: String?, priority: Int, attributes: JSONObject?, fallbackAlert: AlertContent?,
        dismissAfter: TimeInterval?, notes: [Decision], reason: String
    ) {
        let target: (token: DeviceToken?, bundleID: String, environment: APNsEnvironment)
        if let broadcast = activity.broadcast {
            target = (nil, broadcast.bundleID, broadcast.environment)
        } else if let device = activity.pushTarget {
            target = (device.token, device.bundleID, device.environment)
        } else {
            step.decisions.append(Decision(.waitingForToken, activity: activity.key, "no token to push to yet"))
            return
        }
        var decisions = notes
        let key = activity.key
        let nowSeconds = Int(now.timeIntervalSince1970.rounded(.down))
        let timestamp = max(nowSeconds, activity.lastTimestamp + 1)
        if timestamp > nowSeconds {
            decisions.append(
                Decision(
                    .timestampHeld, activity: key,
                    "aps.timestamp must exceed the previous \(activity.lastTimestamp): not sent before \(RFC3339.format(Date(timeIntervalSince1970: Double(timestamp))))"
                ))
        }
        let rule = policy.rule(for: record.status)
        var staleDate: Int?
        if kind != .end {
            var stale =
                record.eta.map { $0.value.latest.addingTimeInterval(policy.staleAfterETA) }
                ?? now.addingTimeInterval(policy.staleWithoutETA)
            stale = max(
                stale, Date(timeIntervalSince1970: Double(timestamp)).addingTimeInterval(policy.staleMinimumAhead))
            staleDate = Int(stale.timeIntervalSince1970.rounded(.up))
        }
        var dismissalDate: Int?
        if let dismissAfter {
            let clamped = min(max(dismissAfter, 0), 4 * 3600)
            dismissalDate = clamped == 0 ? timestamp - 1 : timestamp + Int(clamped)
        }
        assert(mark.contentState == JSONValue.object(content).compactText, "the mark is of this content")
        let builder = PayloadBuilder(
            kind: kind, contentState: content, attributesType: kind == .start ? mapping.attributesType : nil,
            attributes: attributes, timestamp: timestamp, staleDate: staleDate, dismissalDate: dismissalDate,
            relevance: rule.relevance, alert: alert, startFallbackAlert: fallbackAlert,
            inputPushToken: policy.inputPushToken, inputPushChannel: kind == .start ? activity.channelID : nil,
            contentStateJSON: mark.contentState)
        let payload: [UInt8]
        let finalAlert: AlertContent?
        switch builder.build(maxBytes: policy.maxPayloadBytes) {
        case .refused(let why):
            step.decisions.append(
                Decision(.payloadRefused, activity: activity.key, "\(kind.rawValue) not sent: \(why)"))
            return
        case .built(let bytes, let kept, let trimNotes):
            payload = bytes
            finalAlert = kept
            for note in trimNotes { decisions.append(Decision(.payloadTrimmed, activity: key, note)) }
        }
        let expirationSeconds =
            switch kind {
            case .start: policy.startExpiration
            case .update: policy.updateExpiration
            case .end, .openChannel, .closeChannel: policy.endExpiration
            }
        // A channel that stores no message takes only `apns-expiration: 0`.
        let expiration =
            activity.broadcast.map { !$0.storesMostRecent } ?? false ? 0 : nowSeconds + Int(expirationSeconds)
        let apnsID = PushID.make([record.orderID, activity.key, kind.rawValue, String(timestamp), mark.contentState])
        let headers: [PlannedPush.Header]
        if let channelID = activity.broadcast != nil ? activity.channelID : nil {
            headers = [
                .init(name: "apns-push-type", value: "liveactivity"),
                .init(name: "apns-channel-id", value: channelID),
                .init(name: "apns-priority", value: String(priority)),
                .init(name: "apns-expiration", value: String(expiration)),
                .init(name: "apns-request-id", value: apnsID),
            ]
        } else {
            headers = [
                .init(name: "apns-push-type", value: "liveactivity"),
                .init(name: "apns-topic", value: "\(target.bundleID).push-type.liveactivity"),
                .init(name: "apns-priority", value: String(priority)),
                .init(name: "apns-expiration", value: String(expiration)),
                .init(name: "apns-id", value: apnsID),
            ]
        }
        let push = PlannedPush(
            orderID: record.orderID, activityKey: activity.key, activityID: activity.activityID, kind: kind,
            deviceToken: target.token, channelID: activity.broadcast != nil ? activity.channelID : nil,
            environment: target.environment, bundleID: target.bundleID, apnsID: apnsID,
            priority: priority, timestamp: timestamp, notBefore: Date(timeIntervalSince1970: Double(timestamp)),
            expiration: expiration, headers: headers, payload: payload, alert: finalAlert, step: mark.step,
            status: record.status, statusKey: record.statusKey, reason: reason, mark: mark)

        if let pending = activity.pending {
            decisions.insert(
                Decision(
                    .superseded, activity: key,
                    "replaces the pending \(pending.kind.rawValue) (timestamp \(pending.timestamp)) that APNs has not confirmed; only the newest matters"
                ), at: 0)
        }
        let keptAlert = finalAlert != nil ? alertStep : nil
        if let keptAlert, activity.pending?.alertStep != keptAlert || !activity.alertedSteps.contains(keptAlert) {
            if !activity.alertedSteps.contains(keptAlert) {
                activity.alertedSteps.append(keptAlert)
                activity.alertCount += 1
            }
        }
        activity.pending = ActivityState.PendingPush(
            apnsID: apnsID, kind: kind, timestamp: timestamp, priority: priority, alertStep: keptAlert,
            alertKind: keptAlert != nil ? alertKind : nil, mark: mark)
        activity.planned = mark
        activity.lastTimestamp = timestamp
        step.pushes.removeAll { $0.activityKey == activity.key }
        step.withdrawn.removeAll { $0 == activity.key }
        step.pushes.append(push)
        let code: Decision.Code =
            switch kind {
            case .start: .startPlanned
            case .update: .updatePlanned
            case .end: .endPlanned
            case .openChannel: .channelPlanned
            case .closeChannel: .channelClosePlanned
            }
        step.decisions.append(
            Decision(
                code, activity: key,
                "\(kind.rawValue): \(reason) (priority \(priority)" + (finalAlert.map { ", alert \"\($0)\"" } ?? "")
                    + ")"))
        step.decisions += decisions
    }
}
