// LiveDeliveryCore: every rule of the product, as pure values and functions.
//
// No I/O, no C, no clock of its own (every call takes `now`), no randomness (apns-id values are
// derived from the push). Everything is a Sendable, Codable (or Hashable) value, so the worker can
// store an order as JSON and the tests can replay anything.
//
// The pipeline, in the order the worker uses it:
//
//   bytes ──EventDecoder.decode(_:routingKey:messageID:)──▶ Result<InboundEvent, EventRejection>
//         (events.md exactly: a machine-readable `reason`, the offending `field`, a message without secrets)
//
//   OrderTracker(configuration:)                       configuration = DefaultConfiguration.load(
//     .apply(event, to: state, context:, now:) ─▶ Step        policyJSON:, mappingJSON:)   (Config/*.json)
//     .record(outcome, for: push, in: state, now:) ─▶ Step
//     .retry(state, now:) ─▶ Step
//     .sweep(state, context:, now:) ─▶ Step
//
//   Step { state: OrderState, pushes: [PlannedPush], withdrawn: [activity key],
//          retiredPushToStartTokens, decisions: [Decision], changed }
//
//   PlannedPush: exactly what to POST to /3/device/<token> on the environment's host: headers
//   (apns-push-type, apns-topic, apns-priority, apns-expiration, apns-id), the payload bytes
//   (≤ 4096), priority, alert, timestamp and notBefore, plus the reason.
//
// Folders: Events/ (contract types, decoder, RFC 3339), Policy/ (Policy, alert templates),
// Mapping/ (ContentMapping: attributes and content-state from the order), Tracking/ (OrderRecord,
// ActivityState, OrderState, OrderTracker), Payload/ (PlannedPush, PayloadBuilder),
// Configuration/ (file reading helpers, TrackingConfiguration), JSON/ (ordered JSON values).
//
// Semantics worth knowing (each type's documentation has the details):
// - Newest wins: by `sequence` when both events have one, else `occurred_at`, ties by `event_id`.
//   An order's details merge per field (a field an event leaves out is kept), so the record is
//   the same whatever the arrival order; a terminal status absorbs everything after it.
// - One activity per device. A push-to-start token starts one (`start`, alert, attributes,
//   `input-push-token: 1`) when the status is in `startOn`; the activity is `starting` until the
//   app reports its update token, then the newest state follows as an update.
// - Nothing is sent when content-state and relevance are unchanged. At most one pending push per
//   activity: a newer state replaces a pending one (keeping its alert if the step is the same).
// - Alerts: only for alerting steps or ETA slips past a threshold, once per step, capped per
//   activity. Priority 10 for alerts, starts and ends; non-essential alerts fall back to 5 when
//   the modelled hourly budget is spent. aps.timestamp strictly increases per activity and a push
//   is never sent before it (notBefore).
// - The worker keeps one push in flight per activity and records each outcome before sending the
//   next one; an accepted start withdraws a newer pending start, so an activity never starts twice.
