-- A comment on every report view and every one of its columns, with units, so that BI tools
-- (Grafana, Metabase, Superset) and psql's \d+ show what each is. Comments change no data and
-- take no lock beyond a moment's on the catalog. The reporting role reads them like anyone.

COMMENT ON VIEW report_activities_by_state IS 'Activities counted per app, APNs environment and state (one row each).';
COMMENT ON COLUMN report_activities_by_state.app IS 'The app''s bundle id.';
COMMENT ON COLUMN report_activities_by_state.environment IS 'APNs environment: production or sandbox.';
COMMENT ON COLUMN report_activities_by_state.state IS 'The activity''s state (pending_start, starting, active, ending, ended, failed, …).';
COMMENT ON COLUMN report_activities_by_state.live IS 'True for states that may still be on a Lock Screen: pending_start, starting, active, ending.';
COMMENT ON COLUMN report_activities_by_state.activities IS 'Activities in this state (count).';
COMMENT ON COLUMN report_activities_by_state.orders IS 'Distinct orders with an activity in this state (count).';
COMMENT ON COLUMN report_activities_by_state.oldest_created_at IS 'When the oldest of these activities was first known to the worker.';
COMMENT ON COLUMN report_activities_by_state.last_updated_at IS 'When the most recently changed of these activities last changed.';

COMMENT ON VIEW report_order_timeline IS 'Everything that happened to an order: events, dead letters, the core''s decisions, push outcomes and sweeps, and every APNs attempt. Order rows by at, rank, sort_id.';
COMMENT ON COLUMN report_order_timeline.order_id IS 'The order.';
COMMENT ON COLUMN report_order_timeline.at IS 'When it happened.';
COMMENT ON COLUMN report_order_timeline.source IS 'event, dead_letter, decision, outcome, sweep or push.';
COMMENT ON COLUMN report_order_timeline.activity_key IS 'The activity it concerns, if any.';
COMMENT ON COLUMN report_order_timeline.subject IS 'The event type, or the push (kind and priority, e.g. update p10).';
COMMENT ON COLUMN report_order_timeline.code IS 'The decision code, dead-letter reason or APNs outcome.';
COMMENT ON COLUMN report_order_timeline.detail IS 'One line of explanation; never a payload or a full device token.';
COMMENT ON COLUMN report_order_timeline.ref IS 'The event id or the apns-id it refers to.';
COMMENT ON COLUMN report_order_timeline.rank IS 'Orders rows that share the same instant (sort key, no unit).';
COMMENT ON COLUMN report_order_timeline.sort_id IS 'Orders rows of the same rank (the underlying row id).';

COMMENT ON VIEW report_push_outcomes_hourly IS 'APNs attempts per hour, app, outcome, reason and HTTP status.';
COMMENT ON COLUMN report_push_outcomes_hourly.hour IS 'The hour (UTC, start of the hour).';
COMMENT ON COLUMN report_push_outcomes_hourly.app IS 'The app''s bundle id.';
COMMENT ON COLUMN report_push_outcomes_hourly.outcome IS 'delivered, retry, token_gone, payload_fault, config_fault, auth_refresh, …';
COMMENT ON COLUMN report_push_outcomes_hourly.reason IS 'APNs''s reason (e.g. BadDeviceToken), empty when delivered.';
COMMENT ON COLUMN report_push_outcomes_hourly.status IS 'The HTTP status APNs answered; null when no answer came (a timeout, a lost connection).';
COMMENT ON COLUMN report_push_outcomes_hourly.attempts IS 'APNs attempts (count).';
COMMENT ON COLUMN report_push_outcomes_hourly.activities IS 'Distinct activities those attempts were for (count).';
COMMENT ON COLUMN report_push_outcomes_hourly.avg_latency_ms IS 'Mean APNs round trip, milliseconds.';
COMMENT ON COLUMN report_push_outcomes_hourly.p95_latency_ms IS '95th percentile APNs round trip, milliseconds.';

COMMENT ON VIEW report_alerts_per_activity IS 'Alerts per activity: planned, held back, downgraded and delivered at priority 10. Too many alerts make people turn Live Activities off.';
COMMENT ON COLUMN report_alerts_per_activity.order_id IS 'The order.';
COMMENT ON COLUMN report_alerts_per_activity.activity_key IS 'The activity.';
COMMENT ON COLUMN report_alerts_per_activity.app IS 'The app''s bundle id.';
COMMENT ON COLUMN report_alerts_per_activity.state IS 'The activity''s state now.';
COMMENT ON COLUMN report_alerts_per_activity.alert_count IS 'Alerts the activity has used of its cap (count).';
COMMENT ON COLUMN report_alerts_per_activity.alerts_planned IS 'Alerts the core planned, ETA slips included (count).';
COMMENT ON COLUMN report_alerts_per_activity.eta_slip_alerts IS 'Of those, alerts for an ETA slip (count).';
COMMENT ON COLUMN report_alerts_per_activity.alerts_held_back IS 'Alerts not sent: the cap was reached, or the step had alerted already (count).';
COMMENT ON COLUMN report_alerts_per_activity.budget_downgrades IS 'Pushes sent at priority 5 because the modelled priority-10 budget was spent (count).';
COMMENT ON COLUMN report_alerts_per_activity.pushes_delivered IS 'Pushes APNs accepted for the activity (count).';
COMMENT ON COLUMN report_alerts_per_activity.high_priority_delivered IS 'Of those, at priority 10 (count).';
COMMENT ON COLUMN report_alerts_per_activity.first_alert_at IS 'When the first alert was planned.';
COMMENT ON COLUMN report_alerts_per_activity.last_alert_at IS 'When the last alert was planned.';
COMMENT ON COLUMN report_alerts_per_activity.updated_at IS 'When the activity last changed.';

COMMENT ON VIEW report_activity_timings IS 'How long each activity took to start, to show its first update and to end.';
COMMENT ON COLUMN report_activity_timings.order_id IS 'The order.';
COMMENT ON COLUMN report_activity_timings.activity_key IS 'The activity.';
COMMENT ON COLUMN report_activity_timings.app IS 'The app''s bundle id; (none) before the activity''s token named it.';
COMMENT ON COLUMN report_activity_timings.state IS 'The activity''s state now.';
COMMENT ON COLUMN report_activity_timings.end_reason IS 'Why it ended (the order finished, the user dismissed it, the sweeper, …), if it has.';
COMMENT ON COLUMN report_activity_timings.created_at IS 'When the worker first knew the activity.';
COMMENT ON COLUMN report_activity_timings.started_at IS 'When it started: its start accepted by APNs, or the app''s activity first seen (to the second).';
COMMENT ON COLUMN report_activity_timings.first_delivered_at IS 'When the first push APNs accepted for it was sent.';
COMMENT ON COLUMN report_activity_timings.first_update_at IS 'When the first update APNs accepted for it was sent.';
COMMENT ON COLUMN report_activity_timings.ended_at IS 'When it ended (to the second).';
COMMENT ON COLUMN report_activity_timings.start_s IS 'From created_at to started_at, seconds.';
COMMENT ON COLUMN report_activity_timings.first_update_s IS 'From the start (started_at, else created_at) to the first update accepted, seconds.';
COMMENT ON COLUMN report_activity_timings.event_to_first_update_s IS 'From the order''s first event (when the worker first knew the order) to the first update APNs accepted, seconds.';
COMMENT ON COLUMN report_activity_timings.end_s IS 'From the start (started_at, else created_at) to the end, seconds.';

COMMENT ON VIEW report_activity_timings_by_app IS 'report_activity_timings summed up per day and app.';
COMMENT ON COLUMN report_activity_timings_by_app.day IS 'The day (UTC, start of the day) the activities were created.';
COMMENT ON COLUMN report_activity_timings_by_app.app IS 'The app''s bundle id.';
COMMENT ON COLUMN report_activity_timings_by_app.activities IS 'Activities (count).';
COMMENT ON COLUMN report_activity_timings_by_app.with_update IS 'Of those, with an update accepted (count).';
COMMENT ON COLUMN report_activity_timings_by_app.ended IS 'Of those, ended (count).';
COMMENT ON COLUMN report_activity_timings_by_app.p50_first_update_s IS 'Median first_update_s, seconds.';
COMMENT ON COLUMN report_activity_timings_by_app.p95_first_update_s IS '95th percentile first_update_s, seconds.';
COMMENT ON COLUMN report_activity_timings_by_app.p50_end_s IS 'Median end_s, seconds.';
COMMENT ON COLUMN report_activity_timings_by_app.p95_end_s IS '95th percentile end_s, seconds.';
COMMENT ON COLUMN report_activity_timings_by_app.max_end_s IS 'Longest end_s, seconds (the 8-hour limit is 28800).';

COMMENT ON VIEW report_sweeper_actions IS 'What the sweeper (and an operator''s retry) did, per day, app and reason.';
COMMENT ON COLUMN report_sweeper_actions.day IS 'The day (UTC, start of the day).';
COMMENT ON COLUMN report_sweeper_actions.app IS 'The app''s bundle id.';
COMMENT ON COLUMN report_sweeper_actions.reason IS 'sweep_lifetime, sweep_idle, sweep_never_adopted, sweep_terminal_not_ended, end_finished_order, start_retried, update_replanned or operator_retry.';
COMMENT ON COLUMN report_sweeper_actions.actions IS 'Actions (count).';
COMMENT ON COLUMN report_sweeper_actions.orders IS 'Distinct orders acted on (count).';
COMMENT ON COLUMN report_sweeper_actions.first_at IS 'The first action of the day.';
COMMENT ON COLUMN report_sweeper_actions.last_at IS 'The last action of the day.';

COMMENT ON VIEW report_dead_letters IS 'Messages refused (malformed) or given up on by the broker (delivery limit), without their bodies.';
COMMENT ON COLUMN report_dead_letters.id IS 'The dead letter''s id (livedelivery dead-letters show ID).';
COMMENT ON COLUMN report_dead_letters.received_at IS 'When it was recorded.';
COMMENT ON COLUMN report_dead_letters.reason IS 'Machine-readable reason (malformed_json, missing_field, …, or the broker''s delivery_limit).';
COMMENT ON COLUMN report_dead_letters.routing_key IS 'The routing key it came with.';
COMMENT ON COLUMN report_dead_letters.event_id IS 'Its event id (message_id), if it had one.';
COMMENT ON COLUMN report_dead_letters.field IS 'The field at fault, if one.';
COMMENT ON COLUMN report_dead_letters.message IS 'One line saying what is wrong.';
COMMENT ON COLUMN report_dead_letters.body_bytes IS 'The body''s size, bytes.';
COMMENT ON COLUMN report_dead_letters.replayed_at IS 'When it was replayed (livedelivery dead-letters replay), if it was.';

COMMENT ON VIEW report_dead_letters_by_reason IS 'Dead letters counted per reason and routing key.';
COMMENT ON COLUMN report_dead_letters_by_reason.reason IS 'Machine-readable reason.';
COMMENT ON COLUMN report_dead_letters_by_reason.routing_key IS 'The routing key.';
COMMENT ON COLUMN report_dead_letters_by_reason.messages IS 'Dead letters (count).';
COMMENT ON COLUMN report_dead_letters_by_reason.pending IS 'Of those, not replayed (count).';
COMMENT ON COLUMN report_dead_letters_by_reason.replayed IS 'Of those, replayed (count).';
COMMENT ON COLUMN report_dead_letters_by_reason.first_received_at IS 'When the first was recorded.';
COMMENT ON COLUMN report_dead_letters_by_reason.last_received_at IS 'When the last was recorded.';

COMMENT ON VIEW report_failed_pushes IS 'Pushes given up for good: dropped (payload fault, retries exhausted) or to a token APNs says is gone.';
COMMENT ON COLUMN report_failed_pushes.id IS 'The attempt''s id (push_attempts.id; livedelivery failed-pushes show ID).';
COMMENT ON COLUMN report_failed_pushes.attempted_at IS 'When the attempt was made.';
COMMENT ON COLUMN report_failed_pushes.order_id IS 'The order.';
COMMENT ON COLUMN report_failed_pushes.activity_key IS 'The activity.';
COMMENT ON COLUMN report_failed_pushes.app IS 'The app''s bundle id.';
COMMENT ON COLUMN report_failed_pushes.kind IS 'start, update or end.';
COMMENT ON COLUMN report_failed_pushes.priority IS 'apns-priority: 10 or 5.';
COMMENT ON COLUMN report_failed_pushes.status IS 'The HTTP status APNs answered; null when no answer came.';
COMMENT ON COLUMN report_failed_pushes.outcome IS 'The attempt''s outcome (payload_fault, token_gone, retry, …).';
COMMENT ON COLUMN report_failed_pushes.reason IS 'APNs''s reason.';
COMMENT ON COLUMN report_failed_pushes.decision IS 'The core''s decision: push_dropped or token_gone.';
COMMENT ON COLUMN report_failed_pushes.activity_state IS 'The activity''s state now.';
COMMENT ON COLUMN report_failed_pushes.recovered_at IS 'The first later push to the same activity that APNs accepted, if any.';
COMMENT ON COLUMN report_failed_pushes.message IS 'One line saying why it was given up.';

COMMENT ON VIEW report_duplicate_starts IS 'Push-to-start pushes APNs accepted more than once for the same activity, per app.';
COMMENT ON COLUMN report_duplicate_starts.app IS 'The app''s bundle id.';
COMMENT ON COLUMN report_duplicate_starts.starts_delivered IS 'Start pushes APNs accepted (count).';
COMMENT ON COLUMN report_duplicate_starts.activities_started IS 'Distinct activities those started (count).';
COMMENT ON COLUMN report_duplicate_starts.duplicate_starts IS 'starts_delivered minus activities_started (count).';
