-- Admin reporting: read-only views over the worker's tables (prefixed report_), and the role
-- livedelivery_reporting that may read these views and nothing else.
--
-- The views are owned by the user that runs the migrations, so they read the base tables with the
-- owner's rights: the reporting role needs SELECT on the views only, never on a table. Views never
-- expose message bodies, payloads or full device tokens. `livedelivery report NAME` prints them
-- (docs/reports.md has the column list and example queries).
--
-- Safe to run on many databases of one server at once (roles are cluster-wide): creating the role
-- tolerates a concurrent creation by another database's migration.

DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'livedelivery_reporting') THEN
        BEGIN
            CREATE ROLE livedelivery_reporting NOLOGIN;
        EXCEPTION WHEN duplicate_object OR unique_violation THEN
            NULL; -- another migration created it meanwhile
        END;
    END IF;
END
$$;

DO $$
BEGIN
    EXECUTE format('GRANT USAGE ON SCHEMA %I TO livedelivery_reporting', current_schema());
END
$$;

-- A message body as jsonb, or NULL when it is not UTF-8 JSON (dead letters are often neither).
CREATE OR REPLACE FUNCTION report_body_json(body bytea) RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
BEGIN
    RETURN convert_from(body, 'UTF8')::jsonb;
EXCEPTION WHEN others THEN
    RETURN NULL;
END
$$;

-- Live activities by state and app: one row per (app, environment, state).
CREATE OR REPLACE VIEW report_activities_by_state AS
SELECT coalesce(a.bundle_id, '(none)')                               AS app,
       coalesce(a.environment, '')                                   AS environment,
       a.state,
       a.state IN ('pending_start', 'starting', 'active', 'ending')  AS live,
       count(*)                                                      AS activities,
       count(DISTINCT a.order_id)                                    AS orders,
       min(a.created_at)                                             AS oldest_created_at,
       max(a.updated_at)                                             AS last_updated_at
FROM activities AS a
GROUP BY 1, 2, 3;

-- The timeline of each order: events received (inbox), refused messages that name the order
-- (dead_letters), the core's decisions (timeline: transitions, plans, sweeps, outcomes) and every
-- push attempt with what APNs said. Order rows by (at, rank, sort_id).
CREATE OR REPLACE VIEW report_order_timeline AS
SELECT i.order_id,
       i.processed_at                          AS at,
       'event'::text                           AS source,
       NULL::text                              AS activity_key,
       i.event_type                            AS subject,
       'received'::text                        AS code,
       'occurred at ' || to_char(i.occurred_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') AS detail,
       i.event_id                              AS ref,
       0                                       AS rank,
       0::bigint                               AS sort_id
FROM inbox AS i
WHERE i.order_id IS NOT NULL
UNION ALL
SELECT report_body_json(d.body) ->> 'order_id',
       d.received_at,
       'dead_letter',
       NULL,
       d.routing_key,
       d.reason,
       d.message || coalesce(' (field ' || d.field || ')', ''),
       'dead_letter ' || d.id,
       0,
       d.id
FROM dead_letters AS d
UNION ALL
SELECT p.order_id,
       p.attempted_at,
       'push',
       p.activity_key,
       p.kind || ' p' || p.priority,
       p.outcome,
       concat_ws(' ', p.status::text, p.reason, round(p.latency_ms::numeric, 1) || ' ms', 'attempt by ' || p.worker_id),
       p.apns_id::text,
       1,
       p.id
FROM push_attempts AS p
UNION ALL
SELECT t.order_id,
       t.at,
       CASE t.kind WHEN 'event' THEN 'decision' ELSE t.kind END,
       t.activity_key,
       NULL,
       t.code,
       t.message,
       NULL,
       2,
       t.id
FROM timeline AS t;

-- Push outcomes and reasons by hour and app, with APNs latency.
CREATE OR REPLACE VIEW report_push_outcomes_hourly AS
SELECT date_trunc('hour', p.attempted_at)                                              AS hour,
       p.bundle_id                                                                     AS app,
       p.outcome,
       coalesce(p.reason, '')                                                          AS reason,
       p.status,
       count(*)                                                                        AS attempts,
       count(DISTINCT (p.order_id, p.activity_key))                                    AS activities,
       round(avg(p.latency_ms)::numeric, 1)                                            AS avg_latency_ms,
       round((percentile_cont(0.95) WITHIN GROUP (ORDER BY p.latency_ms))::numeric, 1) AS p95_latency_ms
FROM push_attempts AS p
GROUP BY 1, 2, 3, 4, 5;

-- Alert volume per activity: alerts the core counted and planned, alerts it held back (cap, already
-- sent for the step, budget), and priority-10 pushes APNs accepted (they draw on the device budget).
CREATE OR REPLACE VIEW report_alerts_per_activity AS
SELECT a.order_id,
       a.activity_key,
       coalesce(a.bundle_id, '(none)')                  AS app,
       a.state,
       a.alert_count,
       coalesce(t.alerts_planned, 0)                    AS alerts_planned,
       coalesce(t.eta_slip_alerts, 0)                   AS eta_slip_alerts,
       coalesce(t.alerts_held_back, 0)                  AS alerts_held_back,
       coalesce(t.budget_downgrades, 0)                 AS budget_downgrades,
       coalesce(p.delivered, 0)                         AS pushes_delivered,
       coalesce(p.high_priority_delivered, 0)           AS high_priority_delivered,
       t.first_alert_at,
       t.last_alert_at,
       a.updated_at
FROM activities AS a
LEFT JOIN (
    SELECT order_id, activity_key,
           count(*) FILTER (WHERE code IN ('alert', 'alert_eta_slip'))                          AS alerts_planned,
           count(*) FILTER (WHERE code = 'alert_eta_slip')                                      AS eta_slip_alerts,
           count(*) FILTER (WHERE code IN ('alert_cap_reached', 'alert_already_sent_for_step')) AS alerts_held_back,
           count(*) FILTER (WHERE code = 'budget_downgrade')                                    AS budget_downgrades,
           min(at) FILTER (WHERE code IN ('alert', 'alert_eta_slip'))                           AS first_alert_at,
           max(at) FILTER (WHERE code IN ('alert', 'alert_eta_slip'))                           AS last_alert_at
    FROM timeline
    WHERE activity_key IS NOT NULL
    GROUP BY order_id, activity_key
) AS t USING (order_id, activity_key)
LEFT JOIN (
    SELECT order_id, activity_key,
           count(*) FILTER (WHERE outcome = 'delivered')                   AS delivered,
           count(*) FILTER (WHERE outcome = 'delivered' AND priority = 10) AS high_priority_delivered
    FROM push_attempts
    GROUP BY order_id, activity_key
) AS p USING (order_id, activity_key);

-- Time to first update and to end, per activity. The clock starts when the activity started (start
-- accepted by APNs, or the app's activity first seen), else when the worker first knew it.
-- *_s columns are seconds; event_to_first_update_s starts at the order's first event. The worker
-- projects started_at/ended_at to whole seconds, so sub-second figures are approximate (start_s is
-- clamped at 0).
CREATE OR REPLACE VIEW report_activity_timings AS
SELECT a.order_id,
       a.activity_key,
       coalesce(a.bundle_id, '(none)')                                                             AS app,
       a.state,
       a.end_reason,
       a.created_at,
       a.started_at,
       f.first_delivered_at,
       f.first_update_at,
       a.ended_at,
       greatest(round(extract(epoch FROM a.started_at - a.created_at)::numeric, 3), 0)             AS start_s,
       round(extract(epoch FROM f.first_update_at - coalesce(a.started_at, a.created_at))::numeric, 3) AS first_update_s,
       round(extract(epoch FROM f.first_update_at - o.created_at)::numeric, 3)                     AS event_to_first_update_s,
       round(extract(epoch FROM a.ended_at - coalesce(a.started_at, a.created_at))::numeric, 3)    AS end_s
FROM activities AS a
JOIN orders AS o USING (order_id)
LEFT JOIN (
    SELECT order_id, activity_key,
           min(attempted_at) FILTER (WHERE outcome = 'delivered')                     AS first_delivered_at,
           min(attempted_at) FILTER (WHERE outcome = 'delivered' AND kind = 'update') AS first_update_at
    FROM push_attempts
    GROUP BY order_id, activity_key
) AS f USING (order_id, activity_key);

-- The same, summarised per day (of the activity's creation) and app: medians and 95th percentiles.
CREATE OR REPLACE VIEW report_activity_timings_by_app AS
SELECT date_trunc('day', t.created_at)                                                        AS day,
       t.app,
       count(*)                                                                               AS activities,
       count(t.first_update_at)                                                               AS with_update,
       count(t.ended_at)                                                                      AS ended,
       round((percentile_cont(0.5) WITHIN GROUP (ORDER BY t.first_update_s))::numeric, 3)    AS p50_first_update_s,
       round((percentile_cont(0.95) WITHIN GROUP (ORDER BY t.first_update_s))::numeric, 3)   AS p95_first_update_s,
       round((percentile_cont(0.5) WITHIN GROUP (ORDER BY t.end_s))::numeric, 3)             AS p50_end_s,
       round((percentile_cont(0.95) WITHIN GROUP (ORDER BY t.end_s))::numeric, 3)            AS p95_end_s,
       max(t.end_s)                                                                           AS max_end_s
FROM report_activity_timings AS t
GROUP BY 1, 2;

-- What the sweeper did, by day, app and reason: sweep_lifetime / sweep_idle (ended an activity),
-- sweep_never_adopted (gave up a start the app never adopted), end_finished_order (ended an activity
-- of a finished order still up), start_retried, update_replanned; operator_retry is
-- `livedelivery failed-pushes retry` (it runs the same sweep; what it plans is not counted again).
CREATE OR REPLACE VIEW report_sweeper_actions AS
WITH actions AS (
    SELECT t.order_id, t.activity_key, t.at,
           CASE
               WHEN t.code IN ('sweep_lifetime', 'sweep_idle', 'sweep_never_adopted', 'operator_retry') THEN t.code
               WHEN t.code = 'end_planned' THEN 'end_finished_order'
               WHEN t.code = 'start_planned' THEN 'start_retried'
               WHEN t.code = 'update_planned' THEN 'update_replanned'
           END AS reason
    FROM timeline AS t
    WHERE t.kind = 'sweep'
      AND t.code IN ('sweep_lifetime', 'sweep_idle', 'sweep_never_adopted', 'operator_retry', 'end_planned',
                     'start_planned', 'update_planned')
      -- An end planned because of sweep_lifetime/sweep_idle is that action, not a second one.
      AND NOT (t.code = 'end_planned' AND EXISTS (
          SELECT 1 FROM timeline AS s
          WHERE s.order_id = t.order_id AND s.activity_key = t.activity_key AND s.at = t.at
            AND s.kind = 'sweep' AND s.code IN ('sweep_lifetime', 'sweep_idle')))
      AND NOT (t.code LIKE '%\_planned' AND EXISTS (
          SELECT 1 FROM timeline AS r
          WHERE r.order_id = t.order_id AND r.at = t.at AND r.kind = 'sweep' AND r.code = 'operator_retry'))
)
SELECT date_trunc('day', x.at)            AS day,
       coalesce(a.bundle_id, '(none)')    AS app,
       x.reason,
       count(*)                           AS actions,
       count(DISTINCT x.order_id)         AS orders,
       min(x.at)                          AS first_at,
       max(x.at)                          AS last_at
FROM actions AS x
LEFT JOIN activities AS a USING (order_id, activity_key)
GROUP BY 1, 2, 3;

-- Dead-lettered messages, one row each (without the body: `livedelivery dead-letters show ID`).
CREATE OR REPLACE VIEW report_dead_letters AS
SELECT d.id,
       d.received_at,
       d.reason,
       d.routing_key,
       d.event_id,
       d.field,
       d.message,
       octet_length(d.body)          AS body_bytes,
       d.replayed_at
FROM dead_letters AS d;

-- Dead-lettered messages by reason and routing key; pending = not replayed yet.
CREATE OR REPLACE VIEW report_dead_letters_by_reason AS
SELECT d.reason,
       d.routing_key,
       count(*)                                   AS messages,
       count(*) FILTER (WHERE d.replayed_at IS NULL) AS pending,
       count(d.replayed_at)                       AS replayed,
       min(d.received_at)                         AS first_received_at,
       max(d.received_at)                         AS last_received_at
FROM dead_letters AS d
GROUP BY 1, 2;

-- Pushes given up for good: APNs refused them (payload fault, token gone) or retries ran out. The
-- core's decision (push_dropped or token_gone) is recorded in the same transaction as the attempt.
-- recovered_at: a later push to the same activity was delivered.
CREATE OR REPLACE VIEW report_failed_pushes AS
SELECT p.id,
       p.attempted_at,
       p.order_id,
       p.activity_key,
       p.bundle_id                        AS app,
       p.kind,
       p.priority,
       p.status,
       p.outcome,
       coalesce(p.reason, '')             AS reason,
       t.code                             AS decision,
       a.state                            AS activity_state,
       r.recovered_at,
       t.message
FROM push_attempts AS p
JOIN LATERAL (
    SELECT tl.code, tl.message FROM timeline AS tl
    WHERE tl.order_id = p.order_id AND tl.activity_key = p.activity_key AND tl.at = p.attempted_at
      AND tl.kind = 'outcome' AND tl.code IN ('push_dropped', 'token_gone')
    ORDER BY tl.id
    LIMIT 1
) AS t ON true
LEFT JOIN activities AS a USING (order_id, activity_key)
LEFT JOIN LATERAL (
    SELECT min(q.attempted_at) AS recovered_at FROM push_attempts AS q
    WHERE q.order_id = p.order_id AND q.activity_key = p.activity_key AND q.id > p.id AND q.outcome = 'delivered'
) AS r ON true;

-- Duplicate starts (landscape §2.6): start pushes APNs accepted more than once for one activity.
CREATE OR REPLACE VIEW report_duplicate_starts AS
SELECT p.bundle_id                                                   AS app,
       count(*)                                                      AS starts_delivered,
       count(DISTINCT (p.order_id, p.activity_key))                  AS activities_started,
       count(*) - count(DISTINCT (p.order_id, p.activity_key))       AS duplicate_starts
FROM push_attempts AS p
WHERE p.kind = 'start' AND p.outcome = 'delivered'
GROUP BY 1;

GRANT SELECT ON
    report_activities_by_state,
    report_order_timeline,
    report_push_outcomes_hourly,
    report_alerts_per_activity,
    report_activity_timings,
    report_activity_timings_by_app,
    report_sweeper_actions,
    report_dead_letters,
    report_dead_letters_by_reason,
    report_failed_pushes,
    report_duplicate_starts
TO livedelivery_reporting;
