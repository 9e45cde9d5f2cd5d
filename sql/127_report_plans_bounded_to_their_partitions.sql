-- The reports' live readers are planned for the day partitions they read, not for every partition kept.
--
-- Why: a report over a window reads its rolled-up rows, plus a few activities live (those still live and those
-- created in the last minutes) and the pushes given up to them. Those live lookups joined push_attempts and
-- timeline by key with a bound that was not known when the statement was planned (the activity's creation, the
-- given-up push's time), so every plan spanned every day partition: with 90 days kept instead of 30, the same
-- window over the same rows cost more (failed-pushes over the last hour 16 → 29 ms, activity-timings-by-app
-- 26 → 38 ms, docs/benchmarks.md). The report functions could also switch to a generic plan after five calls on
-- one connection, which spans every partition too.
--
-- How, with the same rows returned:
--   * report_live_activity_timings and report_live_alerts_per_activity read history from the earliest creation
--     among the activities given (no activity's attempts or decisions are older than the activity), a value
--     the plan is made for;
--   * report_live_failed_pushes looks up a given-up push's decision within the window it reads (the decision
--     has the push's time) and its recovery from the window's start (a recovery follows the push);
--   * the report functions that read history are planned at each call (plan_cache_mode force_custom_plan),
--     with their window's bounds as constants, so only the partitions of the window are in the plan.
--
-- Privileges: the functions replaced keep their owner and grants; the new helper is the owner's alone, as the
-- other live readers.

DO $$
BEGIN
    IF current_schema() ~ '[''$]' THEN
        RAISE EXCEPTION 'the schema % has a quote or a dollar sign in its name; migrate into a schema without them', current_schema();
    END IF;
END
$$;

CREATE FUNCTION migration_127_define(definition text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE replace(definition, '@schema@', quote_ident(current_schema()));
END
$$;

-- The earliest creation among the activities given (NULL for none): no attempt or decision of theirs is older.
SELECT migration_127_define($definition$
CREATE FUNCTION @schema@.report_activities_earliest(order_ids text[], activity_keys text[]) RETURNS timestamptz
LANGUAGE sql STABLE SET search_path = pg_catalog, @schema@, pg_temp AS $$
    SELECT min(a.created_at)
    FROM unnest(order_ids, activity_keys) AS k(order_id, activity_key)
    JOIN @schema@.activities AS a ON a.order_id = k.order_id AND a.activity_key = k.activity_key
$$
$definition$);

SELECT migration_127_define($definition$
CREATE OR REPLACE FUNCTION @schema@.report_live_activity_timings(order_ids text[], activity_keys text[])
RETURNS SETOF @schema@.report_activity_timings
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, @schema@, pg_temp SET work_mem = '64MB' SET jit = off
SET plan_cache_mode = force_custom_plan AS $$
DECLARE
    earliest timestamptz := @schema@.report_activities_earliest(order_ids, activity_keys);
BEGIN
    IF earliest IS NULL THEN
        RETURN;
    END IF;
    RETURN QUERY
    SELECT a.order_id, a.activity_key, coalesce(a.bundle_id, '(none)'), a.state, a.end_reason, a.created_at,
           a.started_at, f.first_delivered_at, f.first_update_at, a.ended_at,
           greatest(round(extract(epoch FROM a.started_at - a.created_at)::numeric, 3), 0),
           round(extract(epoch FROM f.first_update_at - coalesce(a.started_at, a.created_at))::numeric, 3),
           round(extract(epoch FROM f.first_update_at
                                    - (SELECT o.created_at FROM @schema@.orders AS o WHERE o.order_id = a.order_id))::numeric, 3),
           round(extract(epoch FROM a.ended_at - coalesce(a.started_at, a.created_at))::numeric, 3)
    FROM unnest(order_ids, activity_keys) AS k(order_id, activity_key)
    JOIN @schema@.activities AS a ON a.order_id = k.order_id AND a.activity_key = k.activity_key
    CROSS JOIN LATERAL (
        SELECT min(p.attempted_at) FILTER (WHERE p.outcome = 'delivered')                       AS first_delivered_at,
               min(p.attempted_at) FILTER (WHERE p.outcome = 'delivered' AND p.kind = 'update') AS first_update_at
        FROM @schema@.push_attempts AS p
        WHERE p.order_id = a.order_id AND p.activity_key = a.activity_key AND p.attempted_at >= a.created_at
          AND p.attempted_at >= earliest
    ) AS f;
END
$$
$definition$);

SELECT migration_127_define($definition$
CREATE OR REPLACE FUNCTION @schema@.report_live_alerts_per_activity(order_ids text[], activity_keys text[])
RETURNS SETOF @schema@.report_alerts_per_activity_rollup
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, @schema@, pg_temp SET work_mem = '64MB' SET jit = off
SET plan_cache_mode = force_custom_plan AS $$
DECLARE
    earliest timestamptz := @schema@.report_activities_earliest(order_ids, activity_keys);
BEGIN
    IF earliest IS NULL THEN
        RETURN;
    END IF;
    RETURN QUERY
    SELECT a.created_at, a.order_id, a.activity_key, coalesce(a.bundle_id, '(none)'), a.state, a.alert_count,
           t.alerts_planned, t.eta_slip_alerts, t.alerts_held_back, t.budget_downgrades, p.delivered,
           p.high_priority_delivered, t.first_alert_at, t.last_alert_at, a.updated_at
    FROM unnest(order_ids, activity_keys) AS k(order_id, activity_key)
    JOIN @schema@.activities AS a ON a.order_id = k.order_id AND a.activity_key = k.activity_key
    CROSS JOIN LATERAL (
        SELECT count(*) FILTER (WHERE d.code IN ('alert', 'alert_eta_slip'))                          AS alerts_planned,
               count(*) FILTER (WHERE d.code = 'alert_eta_slip')                                      AS eta_slip_alerts,
               count(*) FILTER (WHERE d.code IN ('alert_cap_reached', 'alert_already_sent_for_step')) AS alerts_held_back,
               count(*) FILTER (WHERE d.code = 'budget_downgrade')                                    AS budget_downgrades,
               min(tl.at) FILTER (WHERE d.code IN ('alert', 'alert_eta_slip'))                        AS first_alert_at,
               max(tl.at) FILTER (WHERE d.code IN ('alert', 'alert_eta_slip'))                        AS last_alert_at
        FROM @schema@.timeline AS tl
        CROSS JOIN LATERAL unnest(tl.activity_keys, tl.codes) AS d(activity_key, code)
        WHERE tl.order_id = a.order_id AND tl.at >= a.created_at AND tl.at >= earliest
          AND d.activity_key = a.activity_key
    ) AS t
    CROSS JOIN LATERAL (
        SELECT count(*) FILTER (WHERE q.outcome = 'delivered')                     AS delivered,
               count(*) FILTER (WHERE q.outcome = 'delivered' AND q.priority = 10) AS high_priority_delivered
        FROM @schema@.push_attempts AS q
        WHERE q.order_id = a.order_id AND q.activity_key = a.activity_key AND q.attempted_at >= a.created_at
          AND q.attempted_at >= earliest
    ) AS p;
END
$$
$definition$);

-- The pushes given up in [since, until): `scope` 'keys' those to the activities given; 'new' those to no
-- activity created before `rolled_until` (the activities created since, and pushes to no activity row).
SELECT migration_127_define($definition$
CREATE OR REPLACE FUNCTION @schema@.report_live_failed_pushes(scope text, since timestamptz, until timestamptz,
                                                              order_ids text[], activity_keys text[],
                                                              rolled_until timestamptz)
RETURNS SETOF @schema@.report_failed_pushes
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, @schema@, pg_temp SET work_mem = '64MB' SET jit = off AS $$
BEGIN
    IF since >= until OR (scope = 'keys' AND cardinality(order_ids) = 0) THEN
        RETURN;
    END IF;
    RETURN QUERY EXECUTE format($query$
        SELECT p.id, p.attempted_at, p.order_id, p.activity_key, p.bundle_id, p.kind, p.priority, p.status, p.outcome,
               coalesce(p.reason, ''), t.code, a.state, r.recovered_at, t.message
        FROM %s
        JOIN LATERAL (
            SELECT d.code, d.message
            FROM @schema@.timeline AS tl
            CROSS JOIN LATERAL unnest(tl.activity_keys, tl.codes, tl.messages) WITH ORDINALITY
                AS d(activity_key, code, message, position)
            WHERE tl.order_id = p.order_id AND tl.at = p.attempted_at AND tl.at >= $1 AND tl.at < $2
              AND tl.kind = 'outcome' AND tl.codes && ARRAY['push_dropped', 'token_gone']
              AND d.activity_key = p.activity_key AND d.code IN ('push_dropped', 'token_gone')
            ORDER BY tl.id + 0, d.position
            LIMIT 1
        ) AS t ON true
        LEFT JOIN @schema@.activities AS a ON a.order_id = p.order_id AND a.activity_key = p.activity_key
        LEFT JOIN LATERAL (
            SELECT min(q.attempted_at) AS recovered_at FROM @schema@.push_attempts AS q
            WHERE q.order_id = p.order_id AND q.activity_key = p.activity_key AND q.id > p.id
              AND q.attempted_at >= p.attempted_at AND q.attempted_at >= $1 AND q.outcome = 'delivered'
        ) AS r ON true
        WHERE p.attempted_at >= $1 AND p.attempted_at < $2 AND p.outcome <> 'delivered' %s
    $query$,
    CASE scope
        WHEN 'keys' THEN 'unnest($3, $4) AS k(order_id, activity_key) JOIN @schema@.activities AS c '
                         'ON c.order_id = k.order_id AND c.activity_key = k.activity_key '
                         'JOIN @schema@.push_attempts AS p ON p.order_id = c.order_id AND p.activity_key = c.activity_key '
                         'AND p.attempted_at >= c.created_at'
        WHEN 'new' THEN '@schema@.push_attempts AS p'
    END,
    CASE scope
        WHEN 'new' THEN 'AND NOT EXISTS (SELECT 1 FROM @schema@.activities AS b WHERE b.order_id = p.order_id '
                        'AND b.activity_key = p.activity_key AND b.created_at < $5)'
        ELSE ''
    END) USING since, until, order_ids, activity_keys, rolled_until;
END
$$
$definition$);

-- Planned at each call, for the window's partitions alone.
ALTER FUNCTION report_push_outcomes_hourly(timestamptz, timestamptz) SET plan_cache_mode = force_custom_plan;
ALTER FUNCTION report_activity_timings(timestamptz, timestamptz) SET plan_cache_mode = force_custom_plan;
ALTER FUNCTION report_activity_timings_by_app(timestamptz, timestamptz) SET plan_cache_mode = force_custom_plan;
ALTER FUNCTION report_alerts_per_activity(timestamptz, timestamptz) SET plan_cache_mode = force_custom_plan;
ALTER FUNCTION report_failed_pushes(timestamptz, timestamptz) SET plan_cache_mode = force_custom_plan;

REVOKE EXECUTE ON FUNCTION report_activities_earliest(text[], text[]) FROM PUBLIC;

DROP FUNCTION migration_127_define(text);
