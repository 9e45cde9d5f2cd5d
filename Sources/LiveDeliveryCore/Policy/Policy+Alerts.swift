import Foundation
import LiveDeliveryJSON

/// Which alert a push carries and the priority-10 budget it draws on: the alert policy, apart from the tracker
/// that plans the pushes.
extension Policy {
    /// The alert a push carries: its texts, the step it alerts for (counted once per step) and which texts it used.
    struct ChosenAlert {
        var content: AlertContent?
        var step: String?
        var kind: ActivityState.AlertKind?

        static let none = ChosenAlert()
    }

    /// The alert an update or end carries, if any: reaching an alerting step, or an ETA slip past
    /// the threshold; at most once per step, at most ``Policy/alertCap`` per activity.
    func chooseAlert(
        _ activity: ActivityState, record: OrderRecord, mark: ActivityState.ContentMark, now: Date,
        notes: inout [Decision]
    ) -> ChosenAlert {
        let key = activity.key
        let rule = rule(for: record.status)
        func render(_ kind: ActivityState.AlertKind) -> AlertContent? {
            // The template values only when an alert is rendered: most pushes carry none.
            let values = AlertTemplate.values(for: record, now: now)
            let texts = kind == .etaSlip ? etaSlipTexts : rule.texts
            guard let alert = texts.lazy.compactMap({ $0.render(values, sound: self.alertSound) }).first else {
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
            return ChosenAlert(content: render(kind), step: step, kind: kind)
        }
        guard let kind = alertMoment(activity, record: record, mark: mark, notes: &notes) else {
            return .none
        }
        if activity.alertedSteps.contains(mark.step) {
            notes.append(
                Decision(.alertAlreadySent, activity: key, "no alert: \(mark.step) has alerted already (once per step)")
            )
            return .none
        }
        if activity.alertCount >= alertCap {
            notes.append(
                Decision(
                    .alertCapReached, activity: key,
                    "no alert: \(activity.alertCount) alerts already, the cap is \(alertCap)"))
            return .none
        }
        guard let alert = render(kind) else { return .none }
        notes.append(
            kind == .etaSlip
                ? Decision(
                    .alertETASlip, activity: key,
                    "alert: the ETA slipped more than \(minutes(etaSlipThreshold)) (\(mark.step) has not alerted yet)"
                )
                : Decision(.alert, activity: key, "alert: reaching \(mark.step) is an alerting moment"))
        return ChosenAlert(content: alert, step: mark.step, kind: kind)
    }

    /// Which texts the push is a moment to alert with, if any: reaching an alerting step, or an ETA slip past
    /// the threshold within a step.
    private func alertMoment(
        _ activity: ActivityState, record: OrderRecord, mark: ActivityState.ContentMark, notes: inout [Decision]
    ) -> ActivityState.AlertKind? {
        let rule = rule(for: record.status)
        if rule.alert && activity.planned?.step != mark.step { return .status }
        if let old = activity.planned?.eta, let eta = mark.eta, activity.planned?.step == mark.step {
            let slip = eta.latest.timeIntervalSince(old.latest)
            if slip > etaSlipThreshold { return .etaSlip }
            if slip > 0 {
                notes.append(
                    Decision(
                        .noAlert, activity: activity.key,
                        "no alert: the ETA moved \(minutes(slip)), within the \(minutes(etaSlipThreshold)) threshold"
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

    /// An update's priority: 10 when it alerts and its alert is essential or the hour's budget has room; else 5,
    /// and the alert is dropped.
    func updatePriority(
        _ activity: ActivityState, record: OrderRecord, alert: inout ChosenAlert, now: Date, notes: inout [Decision]
    ) -> Int {
        let key = activity.key
        guard alert.content != nil else {
            notes.append(Decision(.priority, activity: key, "priority 5: no alert, a routine update"))
            return 5
        }
        let essential = rule(for: record.status).essential && alert.kind == .status
        guard essential || budgetLeft(activity, now: now) else {
            notes.append(
                Decision(
                    .budgetDowngrade, activity: key,
                    "\(budget(activity)) priority-10 pushes already this hour and the alert is not essential: priority 5, alert dropped"
                ))
            alert = .none
            return 5
        }
        notes.append(
            Decision(
                .priority, activity: key,
                "priority 10: it alerts"
                    + (essential
                        ? " (essential)"
                        : " (budget: \(budgetUsed(activity, now: now)) of \(budget(activity)) used this hour)")
            ))
        return 10
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
        activity.frequentPushes == true ? frequentPriority10PerHour : priority10PerHour
    }

    /// The decision that an activity's budget follows its device's frequent-updates setting.
    func frequentUpdates(_ on: Bool, activity: String, device: String) -> Decision {
        on
            ? Decision(
                .frequentUpdatesOn, activity: activity,
                "frequent updates are on on device \(device): \(frequentPriority10PerHour) priority-10 pushes an hour"
            )
            : Decision(
                .frequentUpdatesOff, activity: activity,
                "frequent updates are off on device \(device): \(priority10PerHour) priority-10 pushes an hour, the rest at priority 5"
            )
    }
}
