-- Reports over a time window: for each report over history, a function of the same name as its view,
-- taking (since, until), returning the view's row type, that reads only the window's day partitions
-- and the indexes made for it (sql/112). On a large deployment the views scan all history; the
-- functions are what dashboards and `livedelivery report` call:
--
--     SELECT * FROM report_push_outcomes_hourly(now() - interval '24 hours', now());
--
-- Every function returns exactly the rows the view would return for the same window (a test checks it
-- on the same data). The window is half-open, [since, until), on the report's time:
--   report_push_outcomes_hourly   attempts made in the window, by hour (the first and last hours are
--                                 the window's share of them)
--   report_failed_pushes          pushes given up in the window
--   report_sweeper_actions        the sweeper's actions in the window, by day
--   report_duplicate_starts       start pushes accepted in the window
--   report_activity_timings       activities created in the window
--   report_activity_timings_by_app  the same, by day and app
--   report_alerts_per_activity    activities created in the window
-- The columns, and their comments, are the view's (\d+ report_push_outcomes_hourly).
--
-- SECURITY DEFINER, like the views: the owner reads the tables; the reporting role may only EXECUTE.
-- Each runs its query with EXECUTE … USING: a one-shot plan for the window's own values, so that the
-- planner prunes the partitions and estimates the rows for that window (a SQL function's query is
-- planned for unknown parameters). Their work_mem is 64 MB: a day's grouping by activity fits in it.

CREATE FUNCTION report_push_outcomes_hourly(since timestamptz, until timestamptz)
RETURNS SETOF report_push_outcomes_hourly
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path FROM CURRENT SET work_mem = '64MB' SET jit = off AS $$
BEGIN
    RETURN QUERY EXECUTE $query$
        SELECT date_trunc('hour', p.attempted_at),
               p.bundle_id,
               p.outcome,
               coalesce(p.reason, ''),
               p.status,
               count(*),
               count(DISTINCT (p.order_id, p.activity_key)),
               round(avg(p.latency_ms)::numeric, 1),
               round((percentile_cont(0.95) WITHIN GROUP (ORDER BY p.latency_ms))::numeric, 1)
        FROM push_attempts AS p
        WHERE p.attempted_at >= $1 AND p.attempted_at < $2
        GROUP BY 1, 2, 3, 4, 5
    $query$ USING since, until;
END
$$;

-- Only attempts APNs did not accept can be given up (push_attempts_not_delivered); the decision is
-- found through timeline_give_ups, a recovery through the activity's later attempts.
CREATE FUNCTION report_failed_pushes(since timestamptz, until timestamptz)
RETURNS SETOF report_failed_pushes
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path FROM CURRENT SET work_mem = '64MB' SET jit = off AS $$
BEGIN
    RETURN QUERY EXECUTE $query$
        SELECT p.id, p.attempted_at, p.order_id, p.activity_key, p.bundle_id, p.kind, p.priority, p.status, p.outcome,
               coalesce(p.reason, ''), t.code, a.state, r.recovered_at, t.message
        FROM push_attempts AS p
        JOIN LATERAL (
            SELECT tl.code, tl.message FROM timeline AS tl
            WHERE tl.order_id = p.order_id AND tl.activity_key = p.activity_key AND tl.at = p.attempted_at
              AND tl.kind = 'outcome' AND tl.code IN ('push_dropped', 'token_gone')
            -- The first decision, found through timeline_give_ups (`+ 0`: ordering by the bare id made
            -- the planner walk each partition's (order_id, id) index instead).
            ORDER BY tl.id + 0
            LIMIT 1
        ) AS t ON true
        LEFT JOIN activities AS a USING (order_id, activity_key)
        LEFT JOIN LATERAL (
            SELECT min(q.attempted_at) AS recovered_at FROM push_attempts AS q
            WHERE q.order_id = p.order_id AND q.activity_key = p.activity_key AND q.id > p.id
              AND q.attempted_at >= p.attempted_at AND q.outcome = 'delivered'
        ) AS r ON true
        WHERE p.attempted_at >= $1 AND p.attempted_at < $2 AND p.outcome <> 'delivered'
    $query$ USING since, until;
END
$$;

-- The sweeper's rows in the window (timeline_sweeps); the companion rows of an action share its instant.
CREATE FUNCTION report_sweeper_actions(since timestamptz, until timestamptz)
RETURNS SETOF report_sweeper_actions
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path FROM CURRENT SET work_mem = '64MB' SET jit = off AS $$
BEGIN
    RETURN QUERY EXECUTE $query$
        WITH sweeps AS (
            SELECT t.order_id, t.activity_key, t.at, t.code
            FROM timeline AS t
            WHERE t.kind = 'sweep' AND t.at >= $1 AND t.at < $2
        ),
        actions AS (
            SELECT t.order_id, t.activity_key, t.at,
                   CASE
                       WHEN t.code IN ('sweep_lifetime', 'sweep_idle', 'sweep_never_adopted', 'sweep_terminal_not_ended',
                                       'operator_retry') THEN t.code
                       WHEN t.code = 'end_planned' THEN 'end_finished_order'
                       WHEN t.code = 'start_planned' THEN 'start_retried'
                       WHEN t.code = 'update_planned' THEN 'update_replanned'
                   END AS reason
            FROM sweeps AS t
            WHERE t.code IN ('sweep_lifetime', 'sweep_idle', 'sweep_never_adopted', 'sweep_terminal_not_ended',
                             'operator_retry', 'end_planned', 'start_planned', 'update_planned')
              AND NOT (t.code = 'end_planned' AND EXISTS (
                  SELECT 1 FROM sweeps AS s
                  WHERE s.order_id = t.order_id AND s.activity_key = t.activity_key AND s.at = t.at
                    AND s.code IN ('sweep_lifetime', 'sweep_idle', 'sweep_terminal_not_ended')))
              AND NOT (t.code LIKE '%\_planned' AND EXISTS (
                  SELECT 1 FROM sweeps AS r
                  WHERE r.order_id = t.order_id AND r.at = t.at AND r.code = 'operator_retry'))
        )
        SELECT date_trunc('day', x.at), coalesce(a.bundle_id, '(none)'), x.reason, count(*), count(DISTINCT x.order_id),
               min(x.at), max(x.at)
        FROM actions AS x
        LEFT JOIN activities AS a USING (order_id, activity_key)
        GROUP BY 1, 2, 3
    $query$ USING since, until;
END
$$;

CREATE FUNCTION report_duplicate_starts(since timestamptz, until timestamptz)
RETURNS SETOF report_duplicate_starts
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path FROM CURRENT SET work_mem = '64MB' SET jit = off AS $$
BEGIN
    RETURN QUERY EXECUTE $query$
        SELECT p.bundle_id, count(*), count(DISTINCT (p.order_id, p.activity_key)),
               count(*) - count(DISTINCT (p.order_id, p.activity_key))
        FROM push_attempts AS p
        WHERE p.kind = 'start' AND p.outcome = 'delivered' AND p.attempted_at >= $1 AND p.attempted_at < $2
        GROUP BY 1
    $query$ USING since, until;
END
$$;

-- An activity's attempts are never older than the activity (the worker records them after it knows
-- it), so the attempts read start at the window's start. Every activity has its order (a foreign key),
-- read through its key: joining the orders table whole made the planner scan all of it.
CREATE FUNCTION report_activity_timings(since timestamptz, until timestamptz)
RETURNS SETOF report_activity_timings
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path FROM CURRENT SET work_mem = '64MB' SET jit = off AS $$
BEGIN
    RETURN QUERY EXECUTE $query$
        WITH created AS (
            SELECT * FROM activities AS a WHERE a.created_at >= $1 AND a.created_at < $2
        ),
        firsts AS (
            SELECT p.order_id, p.activity_key,
                   min(p.attempted_at) FILTER (WHERE p.outcome = 'delivered')                       AS first_delivered_at,
                   min(p.attempted_at) FILTER (WHERE p.outcome = 'delivered' AND p.kind = 'update') AS first_update_at
            FROM push_attempts AS p
            WHERE p.attempted_at >= $1 AND (p.order_id, p.activity_key) IN (SELECT order_id, activity_key FROM created)
            GROUP BY p.order_id, p.activity_key
        )
        SELECT a.order_id, a.activity_key, coalesce(a.bundle_id, '(none)'), a.state, a.end_reason, a.created_at,
               a.started_at, f.first_delivered_at, f.first_update_at, a.ended_at,
               greatest(round(extract(epoch FROM a.started_at - a.created_at)::numeric, 3), 0),
               round(extract(epoch FROM f.first_update_at - coalesce(a.started_at, a.created_at))::numeric, 3),
               round(extract(epoch FROM f.first_update_at
                                        - (SELECT o.created_at FROM orders AS o WHERE o.order_id = a.order_id))::numeric, 3),
               round(extract(epoch FROM a.ended_at - coalesce(a.started_at, a.created_at))::numeric, 3)
        FROM created AS a
        LEFT JOIN firsts AS f USING (order_id, activity_key)
    $query$ USING since, until;
END
$$;

CREATE FUNCTION report_activity_timings_by_app(since timestamptz, until timestamptz)
RETURNS SETOF report_activity_timings_by_app
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path FROM CURRENT SET work_mem = '64MB' SET jit = off AS $$
BEGIN
    RETURN QUERY EXECUTE $query$
        SELECT date_trunc('day', t.created_at), t.app, count(*), count(t.first_update_at), count(t.ended_at),
               round((percentile_cont(0.5) WITHIN GROUP (ORDER BY t.first_update_s))::numeric, 3),
               round((percentile_cont(0.95) WITHIN GROUP (ORDER BY t.first_update_s))::numeric, 3),
               round((percentile_cont(0.5) WITHIN GROUP (ORDER BY t.end_s))::numeric, 3),
               round((percentile_cont(0.95) WITHIN GROUP (ORDER BY t.end_s))::numeric, 3),
               max(t.end_s)
        FROM report_activity_timings($1, $2) AS t
        GROUP BY 1, 2
    $query$ USING since, until;
END
$$;

-- Activities created in the window (their creation time has an index; their last change, updated at
-- every push, must not). Their timeline and attempts are never older than they are, so those are read
-- from the window's start on, each in one pass grouped by activity.
CREATE FUNCTION report_alerts_per_activity(since timestamptz, until timestamptz)
RETURNS SETOF report_alerts_per_activity
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path FROM CURRENT SET work_mem = '64MB' SET jit = off AS $$
BEGIN
    RETURN QUERY EXECUTE $query$
        WITH created AS (
            SELECT * FROM activities AS a WHERE a.created_at >= $1 AND a.created_at < $2
        ),
        decisions AS (
            SELECT tl.order_id, tl.activity_key,
                   count(*) FILTER (WHERE code IN ('alert', 'alert_eta_slip'))                          AS alerts_planned,
                   count(*) FILTER (WHERE code = 'alert_eta_slip')                                      AS eta_slip_alerts,
                   count(*) FILTER (WHERE code IN ('alert_cap_reached', 'alert_already_sent_for_step')) AS alerts_held_back,
                   count(*) FILTER (WHERE code = 'budget_downgrade')                                    AS budget_downgrades,
                   min(at) FILTER (WHERE code IN ('alert', 'alert_eta_slip'))                           AS first_alert_at,
                   max(at) FILTER (WHERE code IN ('alert', 'alert_eta_slip'))                           AS last_alert_at
            FROM timeline AS tl
            WHERE tl.at >= $1 AND (tl.order_id, tl.activity_key) IN (SELECT order_id, activity_key FROM created)
            GROUP BY tl.order_id, tl.activity_key
        ),
        pushes AS (
            SELECT q.order_id, q.activity_key,
                   count(*) FILTER (WHERE outcome = 'delivered')                   AS delivered,
                   count(*) FILTER (WHERE outcome = 'delivered' AND priority = 10) AS high_priority_delivered
            FROM push_attempts AS q
            WHERE q.attempted_at >= $1 AND (q.order_id, q.activity_key) IN (SELECT order_id, activity_key FROM created)
            GROUP BY q.order_id, q.activity_key
        )
        SELECT a.order_id, a.activity_key, coalesce(a.bundle_id, '(none)'), a.state, a.alert_count,
               coalesce(t.alerts_planned, 0), coalesce(t.eta_slip_alerts, 0), coalesce(t.alerts_held_back, 0),
               coalesce(t.budget_downgrades, 0), coalesce(p.delivered, 0), coalesce(p.high_priority_delivered, 0),
               t.first_alert_at, t.last_alert_at, a.updated_at
        FROM created AS a
        LEFT JOIN decisions AS t USING (order_id, activity_key)
        LEFT JOIN pushes AS p USING (order_id, activity_key)
    $query$ USING since, until;
END
$$;

-- created_at never changes, so this index leaves the activity's in-place (HOT) updates as they are;
-- one on updated_at would not.
CREATE INDEX activities_created_at ON activities (created_at);

COMMENT ON FUNCTION report_push_outcomes_hourly(timestamptz, timestamptz) IS
    'report_push_outcomes_hourly for the attempts made in [since, until): the view''s columns, reading only that window.';
COMMENT ON FUNCTION report_failed_pushes(timestamptz, timestamptz) IS
    'report_failed_pushes for the pushes given up in [since, until): the view''s columns, reading only that window.';
COMMENT ON FUNCTION report_sweeper_actions(timestamptz, timestamptz) IS
    'report_sweeper_actions for the sweeper''s actions in [since, until): the view''s columns, reading only that window.';
COMMENT ON FUNCTION report_duplicate_starts(timestamptz, timestamptz) IS
    'report_duplicate_starts for the start pushes accepted in [since, until): the view''s columns, reading only that window.';
COMMENT ON FUNCTION report_activity_timings(timestamptz, timestamptz) IS
    'report_activity_timings for the activities created in [since, until): the view''s columns (seconds), reading only that window.';
COMMENT ON FUNCTION report_activity_timings_by_app(timestamptz, timestamptz) IS
    'report_activity_timings_by_app for the activities created in [since, until): the view''s columns (seconds), reading only that window.';
COMMENT ON FUNCTION report_alerts_per_activity(timestamptz, timestamptz) IS
    'report_alerts_per_activity for the activities created in [since, until): the view''s columns, reading only their rows.';

REVOKE EXECUTE ON FUNCTION report_push_outcomes_hourly(timestamptz, timestamptz),
    report_failed_pushes(timestamptz, timestamptz), report_sweeper_actions(timestamptz, timestamptz),
    report_duplicate_starts(timestamptz, timestamptz), report_activity_timings(timestamptz, timestamptz),
    report_activity_timings_by_app(timestamptz, timestamptz), report_alerts_per_activity(timestamptz, timestamptz)
    FROM PUBLIC;
GRANT EXECUTE ON FUNCTION report_push_outcomes_hourly(timestamptz, timestamptz),
    report_failed_pushes(timestamptz, timestamptz), report_sweeper_actions(timestamptz, timestamptz),
    report_duplicate_starts(timestamptz, timestamptz), report_activity_timings(timestamptz, timestamptz),
    report_activity_timings_by_app(timestamptz, timestamptz), report_alerts_per_activity(timestamptz, timestamptz)
    TO livedelivery_reporting;
