package import Foundation

/// Every tunable rule of the product, in the spirit of Apple's Human Interface Guidelines: start
/// when people expect it, alert only for essential moments, keep the stale date moving, end
/// promptly and leave the summary up for 15–30 minutes.
///
/// `Policy()` holds the defaults; `Config/policy.json` may override any key (see
/// ``Policy/decode(_:file:)`` for the key list). Durations are seconds.
package struct Policy: Sendable, Hashable {
    /// What happens when an order reaches one status.
    package struct StatusRule: Sendable, Hashable {
        /// The delivery moment this status belongs to. At most one alert per step and activity;
        /// statuses that share a step (`preparing`, `ready_for_pickup`) share its alert.
        package var step: String
        /// `relevance-score`: relative; higher for the moments that matter.
        package var relevance: Double
        /// Whether reaching this step alerts (lights the screen, plays a sound).
        package var alert: Bool
        /// An essential alert keeps priority 10 when the hourly budget is spent; others fall back to 5.
        package var essential: Bool
        /// Alert texts, tried in order; the first whose placeholders all have values is used. They
        /// also serve as the start alert when a push-to-start begins at this status.
        package var texts: [AlertTemplate]
        /// For terminal statuses: how long the ended activity stays on the Lock Screen (≤ 4 h).
        package var dismissAfter: TimeInterval?

        package init(
            step: String, relevance: Double, alert: Bool = false, essential: Bool = false,
            texts: [AlertTemplate] = [], dismissAfter: TimeInterval? = nil
        ) {
            self.step = step
            self.relevance = relevance
            self.alert = alert
            self.essential = essential
            self.texts = texts
            self.dismissAfter = dismissAfter
        }
    }

    /// Thresholds of the sweeper (``OrderTracker/sweep(_:context:now:)``).
    package struct Sweep: Sendable, Hashable {
        /// The system ends an activity 8 hours after it started.
        package var lifetime: TimeInterval = 8 * 3600
        /// End an activity this long before the system would, with its last content.
        package var lifetimeMargin: TimeInterval = 1800
        /// End the activities of an order that has had no event for this long.
        package var idleTimeout: TimeInterval = 4 * 3600
        /// A started activity whose app never reported its update token is given up after this long.
        package var adoptionTimeout: TimeInterval = 1800
        /// Dismissal after an end the sweeper sends (idle or lifetime).
        package var dismissAfter: TimeInterval = 900

        package init() {}
    }

    package var statuses: [OrderStatus: StatusRule]
    /// The statuses at which an activity may be started remotely (push-to-start).
    package var startOn: Set<OrderStatus>
    /// The start alert when no text of the status can be filled (it may not use placeholders).
    package var startFallback: AlertTemplate
    /// `sound` inside alerts; nil for silent alerts.
    package var alertSound: String?
    /// At most this many alerts per activity, start and end included.
    package var alertCap: Int
    /// Within one step, an ETA that moves later by more than this alerts (if the step has not
    /// alerted yet: it counts as the step's one alert).
    package var etaSlipThreshold: TimeInterval
    package var etaSlipTexts: [AlertTemplate]
    /// The modelled per-activity budget of priority-10 pushes per rolling hour.
    package var priority10PerHour: Int
    /// The same where the person has frequent updates on (the app declares
    /// `NSSupportsLiveActivitiesFrequentUpdates` and reports `frequentPushesEnabled` in `activity.settings`).
    /// Apple publishes no figure for either budget.
    package var frequentPriority10PerHour: Int
    /// `stale-date` = `eta.latest` + this, when an ETA is known…
    package var staleAfterETA: TimeInterval
    /// … else now + this; never less than now + ``staleMinimumAhead``.
    package var staleWithoutETA: TimeInterval
    package var staleMinimumAhead: TimeInterval
    /// `apns-expiration` = now + this, per push kind.
    package var startExpiration: TimeInterval
    package var updateExpiration: TimeInterval
    package var endExpiration: TimeInterval
    package var sweep: Sweep
    /// The largest payload produced; APNs refuses more than 4096 bytes.
    package var maxPayloadBytes: Int
    /// Add `input-push-token: 1` to starts (iOS 18+: the started activity gets an update token).
    package var inputPushToken: Bool

    /// When an order's followers share a broadcast channel (iOS 18), and the channel's settings.
    package var broadcast: Broadcast

    /// Broadcast channels: one per order that enough people follow (`order.followers`). Their devices are
    /// started into the channel (`input-push-channel`), and each update reaches all of them in one request.
    package struct Broadcast: Sendable, Hashable {
        /// An order gets a channel once this many people follow it (its own user not counted); 0: never.
        package var minimumFollowers = 2
        /// The channel's message storage policy, chosen at creation and never changed: true keeps the most
        /// recent message for a device that is offline (up to 8 h), false stores nothing (a higher
        /// publishing budget; every broadcast then has `apns-expiration: 0`).
        package var storeMostRecent = true
        /// Apple's limit of channels per app and environment.
        package var channelLimit = 10_000
        /// No new channel once this few are left under the limit: the order's followers get per-token
        /// pushes instead.
        package var channelHeadroom = 500

        package init() {}
    }

    /// The rule of a status (every known status has one).
    package func rule(for status: OrderStatus) -> StatusRule {
        statuses[status] ?? StatusRule(step: status.rawValue, relevance: 50)
    }

    package init() {
        func t(_ title: String, _ body: String? = nil) -> AlertTemplate {
            AlertTemplate(title: .plain(title), body: body.map { .plain($0) })
        }
        statuses = [
            .placed: StatusRule(
                step: "ordered", relevance: 30,
                texts: [t("Order placed", "Waiting for {merchant} to confirm"), t("Order placed")]),
            .confirmed: StatusRule(
                step: "confirmed", relevance: 40,
                texts: [t("Order confirmed", "{merchant} has your order"), t("Order confirmed")]),
            .preparing: StatusRule(
                step: "preparing", relevance: 50,
                texts: [t("Preparing your order", "{merchant} is on it"), t("Preparing your order")]),
            .readyForPickup: StatusRule(
                step: "preparing", relevance: 55, texts: [t("Your order is ready", "Waiting for the courier")]),
            .pickedUp: StatusRule(
                step: "picked_up", relevance: 70,
                texts: [t("{courier} picked up your order"), t("Your order was picked up")]),
            .outForDelivery: StatusRule(
                step: "on_the_way", relevance: 85, alert: true,
                texts: [
                    t("{courier} is on the way", "Arriving in about {eta_minutes} min"),
                    t("{courier} is on the way"), t("Your order is on the way"),
                ]),
            .arriving: StatusRule(
                step: "arriving", relevance: 100, alert: true, essential: true,
                texts: [t("{courier} is arriving", "Time to meet your courier"), t("Your order is arriving")]),
            .delivered: StatusRule(
                step: "delivered", relevance: 10, alert: true, essential: true,
                texts: [t("Delivered", "Enjoy your order!")], dismissAfter: 1800),
            .cancelled: StatusRule(
                step: "cancelled", relevance: 10, alert: true, essential: true,
                texts: [t("Order cancelled", "Open the app for details")], dismissAfter: 300),
            .deliveryFailed: StatusRule(
                step: "delivery_failed", relevance: 10, alert: true, essential: true,
                texts: [t("Delivery failed", "Open the app for details")], dismissAfter: 1800),
        ]
        startOn = [.confirmed, .preparing, .readyForPickup, .pickedUp, .outForDelivery, .arriving]
        startFallback = t("Tracking your order")
        alertSound = "default"
        alertCap = 5
        etaSlipThreshold = 600
        etaSlipTexts = [t("Running late", "Now arriving in about {eta_minutes} min"), t("Your order is running late")]
        priority10PerHour = 6
        frequentPriority10PerHour = 24
        staleAfterETA = 900
        staleWithoutETA = 1800
        staleMinimumAhead = 300
        startExpiration = 600
        updateExpiration = 3600
        endExpiration = 4 * 3600
        sweep = Sweep()
        maxPayloadBytes = 4096
        inputPushToken = true
        broadcast = Broadcast()
    }
}
