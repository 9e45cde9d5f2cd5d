-- A rollup round reads its work tables by index, so that what it costs does not follow how large they once
-- grew.
--
-- Why: report_failed_pushes_staged holds the pushes given up to the activities not rolled up yet (about 140 rows
-- at 10M attempts a month), but it keeps the pages of the most it ever held: after the rollups caught up with a
-- history (every given-up push passes through it), 3,168 pages at 30 days of history, 9,588 at 90 days. Each
-- round read it whole three times (hash joins: the staged pushes not yet recovered, twice, in
-- report_rollup_slice; those of the activities rolled up, in report_rollup_final), so a day of the workers'
-- five-minute rounds cost 6.3 s with 30 days kept and 10.2 s with 90, for the same rows (docs/benchmarks.md).
--
-- How, with the same rows rolled up:
--   * a partial index holds the staged pushes not yet recovered, the only ones report_rollup_slice updates;
--   * report_rollup_final looks up each final activity's staged pushes by its key (one index probe an
--     activity), as it already does its partials.
--
-- Privileges: the functions replaced keep their owner and grants (the owner's alone).

DO $$
BEGIN
    IF current_schema() ~ '[''$]' THEN
        RAISE EXCEPTION 'the schema % has a quote or a dollar sign in its name; migrate into a schema without them', current_schema();
    END IF;
END
$$;

CREATE FUNCTION migration_128_define(definition text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE replace(definition, '@schema@', quote_ident(current_schema()));
END
$$;

CREATE INDEX report_failed_pushes_staged_unrecovered ON report_failed_pushes_staged (id, attempted_at)
    WHERE recovered_at IS NULL;

-- report_rollup_slice and report_rollup_final of sql/124, with the two changes above.
SELECT migration_128_define($definition$
CREATE OR REPLACE FUNCTION @schema@.report_rollup_slice(since timestamptz, until timestamptz, rolled_until timestamptz)
RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, @schema@, pg_temp SET work_mem = '64MB' SET jit = off
SET enable_nestloop = off SET plan_cache_mode = force_generic_plan AS $$
BEGIN
    IF since >= until THEN
        RETURN;
    END IF;
    -- One statement: every part reads the partials as they were before the slice. An activity's attempts and
    -- decisions are never older than the activity (as the live readers assume).
    WITH attempts AS MATERIALIZED (
        SELECT p.id, p.order_id, p.activity_key, p.attempted_at, p.kind, p.bundle_id, p.priority, p.status,
               p.outcome, p.reason
        FROM @schema@.push_attempts AS p
        WHERE p.attempted_at >= since AND p.attempted_at < until
    ),
    per_key AS MATERIALIZED (
        SELECT order_id, activity_key,
               min(attempted_at) FILTER (WHERE outcome = 'delivered')                              AS first_delivered_at,
               min(attempted_at) FILTER (WHERE outcome = 'delivered' AND kind = 'update')          AS first_update_at,
               count(*) FILTER (WHERE outcome = 'delivered')                                       AS delivered,
               count(*) FILTER (WHERE outcome = 'delivered' AND priority = 10)                     AS high_priority_delivered,
               max(attempted_at) FILTER (WHERE kind = 'start' AND outcome = 'delivered')           AS last_start_at
        FROM attempts GROUP BY 1, 2
    ),
    decisions AS MATERIALIZED (
        SELECT tl.id, tl.order_id, tl.at, tl.kind, d.activity_key, d.code, d.message, d.position
        FROM @schema@.timeline AS tl
        CROSS JOIN LATERAL unnest(tl.activity_keys, tl.codes, tl.messages) WITH ORDINALITY
            AS d(activity_key, code, message, position)
        WHERE tl.at >= since AND tl.at < until
          AND tl.codes && ARRAY['alert', 'alert_eta_slip', 'alert_cap_reached', 'alert_already_sent_for_step',
                                'budget_downgrade', 'push_dropped', 'token_gone']
          AND d.activity_key IS NOT NULL
    ),
    -- The activities the slice names, each found once by its key, and which of them are tracked.
    named AS MATERIALIZED (
        SELECT k.order_id, k.activity_key, a.created_at, a.created_at IS NOT NULL AS known,
               a.created_at >= rolled_until
               OR EXISTS (SELECT 1 FROM @schema@.report_activities_pending AS w
                          WHERE w.order_id = k.order_id AND w.activity_key = k.activity_key) AS tracked
        FROM (SELECT order_id, activity_key FROM per_key
              UNION SELECT order_id, activity_key FROM decisions) AS k
        LEFT JOIN LATERAL (
            SELECT b.created_at FROM @schema@.activities AS b
            WHERE b.order_id = k.order_id AND b.activity_key = k.activity_key
            OFFSET 0
        ) AS a ON true
    ),
    keys AS MATERIALIZED (
        SELECT order_id, activity_key, created_at FROM named WHERE known AND tracked
    ),
    -- Pushes given up to no activity row are final at once.
    lost AS (
        INSERT INTO @schema@.report_failed_pushes_rollup
        SELECT DISTINCT ON (p.id, p.attempted_at) p.id, p.attempted_at, p.order_id, p.activity_key, p.bundle_id,
               p.kind, p.priority, p.status, p.outcome, coalesce(p.reason, ''), d.code, NULL,
               @schema@.report_recovered_at(p.order_id, p.activity_key, p.id, p.attempted_at), d.message
        FROM attempts AS p
        JOIN named AS k ON k.order_id = p.order_id AND k.activity_key = p.activity_key AND NOT k.known
        JOIN decisions AS d ON d.order_id = p.order_id AND d.at = p.attempted_at AND d.kind = 'outcome'
                           AND d.activity_key = p.activity_key AND d.code IN ('push_dropped', 'token_gone')
        WHERE p.outcome <> 'delivered'
        ORDER BY p.id, p.attempted_at, d.id, d.position
    ),
    -- Accepted starts: the previous one of the same activity (by time, then id) is in the slice, or among
    -- the activity's partials; for an activity not tracked (rolled up, or no activity row) it is looked up.
    starts AS MATERIALIZED (
        SELECT s.attempted_at, s.bundle_id, k.order_id IS NOT NULL AS is_tracked, s.order_id, s.activity_key,
               s.id,
               lag(s.attempted_at) OVER (PARTITION BY s.order_id, s.activity_key ORDER BY s.attempted_at, s.id)
                   AS previous_here
        FROM attempts AS s
        LEFT JOIN keys AS k ON k.order_id = s.order_id AND k.activity_key = s.activity_key
        WHERE s.kind = 'start' AND s.outcome = 'delivered'
    ),
    counted AS (
        INSERT INTO @schema@.report_duplicate_starts_rollup AS r (hour, app, starts)
        SELECT date_trunc('hour', s.attempted_at, 'UTC'), s.bundle_id, count(*) FROM starts AS s GROUP BY 1, 2
        ON CONFLICT (hour, app) DO UPDATE SET starts = r.starts + excluded.starts
    ),
    repeated AS (
        INSERT INTO @schema@.report_repeat_starts_rollup (attempted_at, app, previous_at)
        SELECT x.attempted_at, x.bundle_id, x.previous_at
        FROM (
            SELECT s.attempted_at, s.bundle_id,
                   CASE WHEN s.is_tracked THEN coalesce(s.previous_here, t.last_start_at)
                        ELSE @schema@.report_previous_start(s.order_id, s.activity_key, s.attempted_at, s.id)
                   END AS previous_at
            FROM starts AS s
            LEFT JOIN LATERAL (
                SELECT v.last_start_at FROM @schema@.report_activity_partials AS v
                WHERE s.is_tracked AND s.previous_here IS NULL AND v.order_id = s.order_id
                  AND v.activity_key = s.activity_key
                OFFSET 0
            ) AS t ON true
        ) AS x
        WHERE x.previous_at IS NOT NULL
    ),
    given_up AS MATERIALIZED (
        SELECT DISTINCT ON (p.id, p.attempted_at) p.*, d.code, d.message
        FROM attempts AS p
        JOIN keys AS k ON k.order_id = p.order_id AND k.activity_key = p.activity_key
        JOIN decisions AS d ON d.order_id = p.order_id AND d.at = p.attempted_at AND d.kind = 'outcome'
                           AND d.activity_key = p.activity_key AND d.code IN ('push_dropped', 'token_gone')
        WHERE p.outcome <> 'delivered'
        ORDER BY p.id, p.attempted_at, d.id, d.position
    ),
    staged AS (
        INSERT INTO @schema@.report_failed_pushes_staged
        SELECT g.id, g.attempted_at, g.order_id, g.activity_key, g.bundle_id, g.kind, g.priority, g.status,
               g.outcome, coalesce(g.reason, ''), g.code, NULL, r.recovered_at, g.message
        FROM given_up AS g
        LEFT JOIN (
            SELECT g2.id, g2.attempted_at, min(q.attempted_at) AS recovered_at
            FROM given_up AS g2
            JOIN attempts AS q ON q.order_id = g2.order_id AND q.activity_key = g2.activity_key
            WHERE q.id > g2.id AND q.attempted_at >= g2.attempted_at AND q.outcome = 'delivered'
            GROUP BY 1, 2
        ) AS r ON r.id = g.id AND r.attempted_at = g.attempted_at
    ),
    recovered AS (
        UPDATE @schema@.report_failed_pushes_staged AS f SET recovered_at = m.recovered_at
        FROM (
            SELECT f2.id, f2.attempted_at, min(q.attempted_at) AS recovered_at
            FROM @schema@.report_failed_pushes_staged AS f2
            JOIN attempts AS q ON q.order_id = f2.order_id AND q.activity_key = f2.activity_key
            WHERE f2.recovered_at IS NULL AND q.id > f2.id AND q.attempted_at >= f2.attempted_at
              AND q.outcome = 'delivered'
            GROUP BY 1, 2
        ) AS m
        WHERE f.id = m.id AND f.attempted_at = m.attempted_at AND f.recovered_at IS NULL
    )
    INSERT INTO @schema@.report_activity_partials AS r
    SELECT k.order_id, k.activity_key, p.first_delivered_at, p.first_update_at, coalesce(p.delivered, 0),
           coalesce(p.high_priority_delivered, 0), p.last_start_at, coalesce(t.alerts_planned, 0),
           coalesce(t.eta_slip_alerts, 0), coalesce(t.alerts_held_back, 0), coalesce(t.budget_downgrades, 0),
           t.first_alert_at, t.last_alert_at
    FROM keys AS k
    LEFT JOIN per_key AS p ON p.order_id = k.order_id AND p.activity_key = k.activity_key
    LEFT JOIN (
        SELECT d.order_id, d.activity_key,
               count(*) FILTER (WHERE d.code IN ('alert', 'alert_eta_slip'))                          AS alerts_planned,
               count(*) FILTER (WHERE d.code = 'alert_eta_slip')                                      AS eta_slip_alerts,
               count(*) FILTER (WHERE d.code IN ('alert_cap_reached', 'alert_already_sent_for_step')) AS alerts_held_back,
               count(*) FILTER (WHERE d.code = 'budget_downgrade')                                    AS budget_downgrades,
               min(d.at) FILTER (WHERE d.code IN ('alert', 'alert_eta_slip'))                         AS first_alert_at,
               max(d.at) FILTER (WHERE d.code IN ('alert', 'alert_eta_slip'))                         AS last_alert_at
        FROM decisions AS d
        GROUP BY 1, 2
    ) AS t ON t.order_id = k.order_id AND t.activity_key = k.activity_key
    ON CONFLICT (order_id, activity_key) DO UPDATE SET
        first_delivered_at = least(r.first_delivered_at, excluded.first_delivered_at),
        first_update_at = least(r.first_update_at, excluded.first_update_at),
        delivered = r.delivered + excluded.delivered,
        high_priority_delivered = r.high_priority_delivered + excluded.high_priority_delivered,
        last_start_at = greatest(r.last_start_at, excluded.last_start_at),
        alerts_planned = r.alerts_planned + excluded.alerts_planned,
        eta_slip_alerts = r.eta_slip_alerts + excluded.eta_slip_alerts,
        alerts_held_back = r.alerts_held_back + excluded.alerts_held_back,
        budget_downgrades = r.budget_downgrades + excluded.budget_downgrades,
        first_alert_at = least(r.first_alert_at, excluded.first_alert_at),
        last_alert_at = greatest(r.last_alert_at, excluded.last_alert_at);
END
$$
$definition$);

-- The rows of the final activities given: their partials, and what was written in [since, until) (since: the
-- slices' bound; until: infinity, all of the last minutes), read by time. Joins hashed, lookups by key one per
-- activity, as above.
SELECT migration_128_define($definition$
CREATE OR REPLACE FUNCTION @schema@.report_rollup_final(order_ids text[], activity_keys text[], since timestamptz,
                                              until timestamptz) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, @schema@, pg_temp SET work_mem = '64MB' SET jit = off
SET enable_nestloop = off SET plan_cache_mode = force_generic_plan AS $$
BEGIN
    IF cardinality(order_ids) = 0 THEN
        RETURN;
    END IF;
    WITH f AS MATERIALIZED (
        SELECT a.*, (SELECT o.created_at FROM @schema@.orders AS o WHERE o.order_id = a.order_id) AS order_created_at
        FROM unnest(order_ids, activity_keys) AS k(order_id, activity_key)
        CROSS JOIN LATERAL (
            SELECT b.* FROM @schema@.activities AS b
            WHERE b.order_id = k.order_id AND b.activity_key = k.activity_key
            OFFSET 0
        ) AS a
    ),
    late AS MATERIALIZED (
        SELECT q.id, q.order_id, q.activity_key, q.attempted_at, q.kind, q.bundle_id, q.priority, q.status,
               q.outcome, q.reason
        FROM @schema@.push_attempts AS q
        JOIN f ON f.order_id = q.order_id AND f.activity_key = q.activity_key
        WHERE q.attempted_at >= since AND q.attempted_at < until AND q.attempted_at >= f.created_at
    ),
    late_decisions AS MATERIALIZED (
        SELECT tl.id, tl.order_id, tl.at, tl.kind, d.activity_key, d.code, d.message, d.position
        FROM @schema@.timeline AS tl
        CROSS JOIN LATERAL unnest(tl.activity_keys, tl.codes, tl.messages) WITH ORDINALITY
            AS d(activity_key, code, message, position)
        JOIN f ON f.order_id = tl.order_id AND f.activity_key = d.activity_key
        WHERE tl.at >= since AND tl.at < until AND tl.at >= f.created_at
          AND tl.codes && ARRAY['alert', 'alert_eta_slip', 'alert_cap_reached', 'alert_already_sent_for_step',
                                'budget_downgrade', 'push_dropped', 'token_gone']
    ),
    c AS MATERIALIZED (
        SELECT f.*,
               least(w.first_delivered_at, l.first_delivered_at) AS first_delivered_at,
               least(w.first_update_at, l.first_update_at) AS first_update_at,
               coalesce(w.delivered, 0) + coalesce(l.delivered, 0) AS delivered,
               coalesce(w.high_priority_delivered, 0) + coalesce(l.high_priority_delivered, 0) AS high_priority_delivered,
               coalesce(w.alerts_planned, 0) + coalesce(m.alerts_planned, 0) AS alerts_planned,
               coalesce(w.eta_slip_alerts, 0) + coalesce(m.eta_slip_alerts, 0) AS eta_slip_alerts,
               coalesce(w.alerts_held_back, 0) + coalesce(m.alerts_held_back, 0) AS alerts_held_back,
               coalesce(w.budget_downgrades, 0) + coalesce(m.budget_downgrades, 0) AS budget_downgrades,
               least(w.first_alert_at, m.first_alert_at) AS first_alert_at,
               greatest(w.last_alert_at, m.last_alert_at) AS last_alert_at
        FROM f
        LEFT JOIN LATERAL (
            SELECT v.* FROM @schema@.report_activity_partials AS v
            WHERE v.order_id = f.order_id AND v.activity_key = f.activity_key
            OFFSET 0
        ) AS w ON true
        LEFT JOIN (
            SELECT order_id, activity_key,
                   min(attempted_at) FILTER (WHERE outcome = 'delivered')                     AS first_delivered_at,
                   min(attempted_at) FILTER (WHERE outcome = 'delivered' AND kind = 'update') AS first_update_at,
                   count(*) FILTER (WHERE outcome = 'delivered')                              AS delivered,
                   count(*) FILTER (WHERE outcome = 'delivered' AND priority = 10)            AS high_priority_delivered
            FROM late GROUP BY 1, 2
        ) AS l ON l.order_id = f.order_id AND l.activity_key = f.activity_key
        LEFT JOIN (
            SELECT order_id, activity_key,
                   count(*) FILTER (WHERE code IN ('alert', 'alert_eta_slip'))                          AS alerts_planned,
                   count(*) FILTER (WHERE code = 'alert_eta_slip')                                      AS eta_slip_alerts,
                   count(*) FILTER (WHERE code IN ('alert_cap_reached', 'alert_already_sent_for_step')) AS alerts_held_back,
                   count(*) FILTER (WHERE code = 'budget_downgrade')                                    AS budget_downgrades,
                   min(at) FILTER (WHERE code IN ('alert', 'alert_eta_slip'))                           AS first_alert_at,
                   max(at) FILTER (WHERE code IN ('alert', 'alert_eta_slip'))                           AS last_alert_at
            FROM late_decisions GROUP BY 1, 2
        ) AS m ON m.order_id = f.order_id AND m.activity_key = f.activity_key
    ),
    timings AS (
        INSERT INTO @schema@.report_activity_timings_rollup
        SELECT c.order_id, c.activity_key, coalesce(c.bundle_id, '(none)'), c.state, c.end_reason, c.created_at,
               c.started_at, c.first_delivered_at, c.first_update_at, c.ended_at,
               greatest(round(extract(epoch FROM c.started_at - c.created_at)::numeric, 3), 0),
               round(extract(epoch FROM c.first_update_at - coalesce(c.started_at, c.created_at))::numeric, 3),
               round(extract(epoch FROM c.first_update_at - c.order_created_at)::numeric, 3),
               round(extract(epoch FROM c.ended_at - coalesce(c.started_at, c.created_at))::numeric, 3)
        FROM c
        RETURNING *
    ),
    hourly AS (
        INSERT INTO @schema@.report_activity_timings_by_app_rollup
        SELECT * FROM @schema@.report_timings_by_hour(ARRAY(
            SELECT ROW(r.*)::@schema@.report_activity_timings_rollup FROM timings AS r))
    ),
    alerts AS (
        INSERT INTO @schema@.report_alerts_per_activity_rollup
        SELECT c.created_at, c.order_id, c.activity_key, coalesce(c.bundle_id, '(none)'), c.state, c.alert_count,
               c.alerts_planned, c.eta_slip_alerts, c.alerts_held_back, c.budget_downgrades, c.delivered,
               c.high_priority_delivered, c.first_alert_at, c.last_alert_at, c.updated_at
        FROM c
    ),
    late_given_up AS (
        SELECT DISTINCT ON (p.id, p.attempted_at) p.*, d.code, d.message
        FROM late AS p
        JOIN late_decisions AS d ON d.order_id = p.order_id AND d.at = p.attempted_at AND d.kind = 'outcome'
                                AND d.activity_key = p.activity_key AND d.code IN ('push_dropped', 'token_gone')
        WHERE p.outcome <> 'delivered'
        ORDER BY p.id, p.attempted_at, d.id, d.position
    )
    INSERT INTO @schema@.report_failed_pushes_rollup
    SELECT s.id, s.attempted_at, s.order_id, s.activity_key, s.app, s.kind, s.priority, s.status, s.outcome, s.reason,
           s.decision, f.state,
           coalesce(s.recovered_at,
                    (SELECT min(q.attempted_at) FROM late AS q
                     WHERE q.order_id = s.order_id AND q.activity_key = s.activity_key AND q.id > s.id
                       AND q.attempted_at >= s.attempted_at AND q.outcome = 'delivered')),
           s.message
    FROM f
    CROSS JOIN LATERAL (
        SELECT w.* FROM @schema@.report_failed_pushes_staged AS w
        WHERE w.order_id = f.order_id AND w.activity_key = f.activity_key
        OFFSET 0
    ) AS s
    UNION ALL
    SELECT g.id, g.attempted_at, g.order_id, g.activity_key, g.bundle_id, g.kind, g.priority, g.status, g.outcome,
           coalesce(g.reason, ''), g.code, f.state,
           (SELECT min(q.attempted_at) FROM late AS q
            WHERE q.order_id = g.order_id AND q.activity_key = g.activity_key AND q.id > g.id
              AND q.attempted_at >= g.attempted_at AND q.outcome = 'delivered'),
           g.message
    FROM late_given_up AS g
    JOIN f ON f.order_id = g.order_id AND f.activity_key = g.activity_key;
END
$$
$definition$);

DROP FUNCTION migration_128_define(text);
