-- The activity rollups (sql/123) cost what a round's rows cost: each attempt and decision is read once, in the
-- round whose slice of time holds it, instead of looking each activity's rows up by key when it ends.
--
-- Why: a round looked up each final activity's attempts and decisions by its key in every day partition from
-- the activity's creation on (about 250 µs an activity, 14 s for a day of 55,000 activities at 10M attempts a
-- month; catching up old history probed every later partition for each activity).
--
-- How: the rollup keeps two bounds in report_rollups. 'attempts' is how far the attempts and the timeline have
-- been read: each round reads the next slice of them by time (at most max_hours), up to five minutes ago (by
-- the database's clock, as before), in one statement, and adds each tracked activity's share to report_activity_partials
-- (counts, first and last times, its latest accepted start) and its given-up pushes to
-- report_failed_pushes_staged (with the first recovery seen). An activity is tracked from its creation until
-- it is rolled up: created at or after 'activities'.complete_until, or pending. The same pass counts accepted
-- starts per hour and app and writes each repeated start with its previous start's time, so
-- 'start_hours'.complete_until follows 'attempts' (its whole hours). Pushes given up to no activity row are
-- rolled up at once, as before.
-- 'activities' moves as before once 'attempts' is caught up: the final activities among those pending and
-- those created in the round's range are rolled up from their partials, plus what was written since the
-- 'attempts' bound (the last minutes: read by time in the same snapshot, so a rolled-up row holds what the
-- report said at that moment, as before); then their partials go. While 'attempts' is behind (after an
-- upgrade, or a pause), rounds only read slices.
--
-- The report functions and views keep their names, columns and meaning; the rollup tables of sql/123 hold
-- the same rows. The timeline gets an index on `at` of the rows those reports count (alerts, give-ups), so
-- that a slice reads them by time.
--
-- Upgrading: the activities pending now get their partials from their history once (they are few), and the
-- starts of the hour the bound falls in are counted again from it. CREATE INDEX on timeline reads the whole
-- table and holds SHARE on it meanwhile (this migration took 25 s over 20M timeline rows on a 2-core machine);
-- stop the workers first (the schema check refuses older workers anyway).
--
-- Plans: the slice and the roll-up are static SQL with generic plans (made once per session: a five-minute
-- round spent most of its time planning statements over every day partition) and hashed joins (the planner
-- cannot tell how many rows a common table expression joins; a nested loop over two costs their product).
--
-- Privileges: as in sql/123, the new tables and the helpers are the owner's alone.

DO $$
BEGIN
    IF current_schema() ~ '[''$]' THEN
        RAISE EXCEPTION 'the schema % has a quote or a dollar sign in its name; migrate into a schema without them', current_schema();
    END IF;
END
$$;

CREATE FUNCTION migration_124_define(definition text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE replace(definition, '@schema@', quote_ident(current_schema()));
END
$$;

-- The timeline rows the activity reports count (alerts and what held them back, give-ups), by time: a slice
-- reads those alone. A small share of the rows, so the index is small and cheap to keep.
CREATE INDEX timeline_report_decisions ON timeline (at)
    WHERE codes && ARRAY['alert', 'alert_eta_slip', 'alert_cap_reached', 'alert_already_sent_for_step',
                         'budget_downgrade', 'push_dropped', 'token_gone'];

CREATE TABLE report_activity_partials (
    order_id                text COLLATE "C" NOT NULL,
    activity_key            text COLLATE "C" NOT NULL,
    first_delivered_at      timestamptz,
    first_update_at         timestamptz,
    delivered               bigint NOT NULL,
    high_priority_delivered bigint NOT NULL,
    last_start_at           timestamptz,
    alerts_planned          bigint NOT NULL,
    eta_slip_alerts         bigint NOT NULL,
    alerts_held_back        bigint NOT NULL,
    budget_downgrades       bigint NOT NULL,
    first_alert_at          timestamptz,
    last_alert_at           timestamptz,
    PRIMARY KEY (order_id, activity_key)
);
COMMENT ON TABLE report_activity_partials IS
    'Per tracked activity (not rolled up yet), what its attempts and decisions read so far (before report_rollups ''attempts''.complete_until) add up to: the parts of report_activity_timings and report_alerts_per_activity that history gives, and its latest accepted start.';

CREATE TABLE report_failed_pushes_staged AS SELECT * FROM report_failed_pushes WITH NO DATA;
ALTER TABLE report_failed_pushes_staged ALTER COLUMN order_id SET DATA TYPE text COLLATE "C",
    ALTER COLUMN activity_key SET DATA TYPE text COLLATE "C";
CREATE INDEX report_failed_pushes_staged_activity ON report_failed_pushes_staged (order_id, activity_key);
COMMENT ON TABLE report_failed_pushes_staged IS
    'The pushes given up to tracked activities, read so far, with the first recovery read so far; rolled up with their activity (activity_state is set then).';

-- The previous accepted start (by time, then id) of an activity not tracked (rolled up, or no activity row):
-- looked up by key from the activity's creation. Rare; planned only when called.
SELECT migration_124_define($definition$
CREATE FUNCTION @schema@.report_previous_start(order_id text, activity_key text, attempted_at timestamptz, id bigint)
RETURNS timestamptz
LANGUAGE sql STABLE SET search_path = pg_catalog, @schema@, pg_temp AS $$
    SELECT max(q.attempted_at) FROM @schema@.push_attempts AS q
    WHERE q.kind = 'start' AND q.outcome = 'delivered' AND q.activity_key = $2 AND q.order_id = $1
      AND q.attempted_at >= coalesce((SELECT b.created_at FROM @schema@.activities AS b
                                      WHERE b.order_id = $1 AND b.activity_key = $2), '-infinity')
      AND q.attempted_at <= $3 AND (q.attempted_at, q.id) < ($3, $4)
$$
$definition$);

-- The first delivered attempt after a given-up push to no activity row (by id, not earlier): looked up by key.
-- Rare; planned only when called.
SELECT migration_124_define($definition$
CREATE FUNCTION @schema@.report_recovered_at(order_id text, activity_key text, id bigint, attempted_at timestamptz)
RETURNS timestamptz
LANGUAGE sql STABLE SET search_path = pg_catalog, @schema@, pg_temp AS $$
    SELECT min(q.attempted_at) FROM @schema@.push_attempts AS q
    WHERE q.order_id = $1 AND q.activity_key = $2 AND q.id > $3 AND q.attempted_at >= $4 AND q.outcome = 'delivered'
$$
$definition$);

-- One slice [since, until) of the attempts and the timeline, read once: the tracked activities' partials and
-- given-up pushes, the recoveries of those staged before, the accepted starts per hour and app, and the
-- repeated starts. `rolled_until` is report_rollups 'activities'.complete_until. The planner cannot tell how
-- many rows a common table expression joins, and a nested loop over two of them costs their product: joins
-- are hashed, and the lookups by key that must be one per row are written as LATERAL … OFFSET 0.
SELECT migration_124_define($definition$
CREATE FUNCTION @schema@.report_rollup_slice(since timestamptz, until timestamptz, rolled_until timestamptz)
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
        WHERE f.id = m.id AND f.attempted_at = m.attempted_at
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
SELECT migration_124_define($definition$
CREATE FUNCTION @schema@.report_rollup_final(order_ids text[], activity_keys text[], since timestamptz,
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
    FROM @schema@.report_failed_pushes_staged AS s
    JOIN f ON f.order_id = s.order_id AND f.activity_key = s.activity_key
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

-- The hourly histograms with report_timing_bucket written out (a function with a pinned search_path is called,
-- not inlined: two calls per activity were most of the time spent on the histograms), in PL/pgSQL so that its
-- plan is made once per session, not at every call. Same buckets, same rows.
SELECT migration_124_define($definition$
CREATE OR REPLACE FUNCTION @schema@.report_timings_by_hour(timings @schema@.report_activity_timings_rollup[])
RETURNS SETOF @schema@.report_activity_timings_by_app_rollup
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, @schema@, pg_temp SET work_mem = '64MB' SET jit = off
SET plan_cache_mode = force_generic_plan AS $$
BEGIN
    RETURN QUERY
    WITH t AS MATERIALIZED (
        SELECT date_trunc('hour', r.created_at, 'UTC') AS hour, r.app, r.first_update_at, r.ended_at,
               r.first_update_s, r.end_s
        FROM unnest(timings) AS r
    ),
    d AS (
        SELECT hour, app, count(*) AS activities, count(first_update_at) AS with_update, count(ended_at) AS ended,
               max(end_s) AS max_end_s
        FROM t GROUP BY 1, 2
    ),
    f AS (
        SELECT x.hour, x.app, array_agg(x.bucket ORDER BY x.bucket) AS buckets, array_agg(x.n ORDER BY x.bucket) AS counts
        FROM (SELECT hour, app, CASE WHEN first_update_s = 0 THEN 0
                                 ELSE sign(first_update_s)::integer
                                      * (1 + greatest(floor(ln(abs(first_update_s)::float8 * 1000)
                                                            / ln(1.01::float8 / 0.99::float8)), 0)::integer)
                            END AS bucket, count(*) AS n
              FROM t WHERE first_update_s IS NOT NULL GROUP BY 1, 2, 3) AS x
        GROUP BY 1, 2
    ),
    e AS (
        SELECT x.hour, x.app, array_agg(x.bucket ORDER BY x.bucket) AS buckets, array_agg(x.n ORDER BY x.bucket) AS counts
        FROM (SELECT hour, app, CASE WHEN end_s = 0 THEN 0
                                 ELSE sign(end_s)::integer
                                      * (1 + greatest(floor(ln(abs(end_s)::float8 * 1000)
                                                            / ln(1.01::float8 / 0.99::float8)), 0)::integer)
                            END AS bucket, count(*) AS n
              FROM t WHERE end_s IS NOT NULL GROUP BY 1, 2, 3) AS x
        GROUP BY 1, 2
    )
    SELECT d.hour, d.app, d.activities, d.with_update, d.ended, d.max_end_s,
           coalesce(f.buckets, '{}'), coalesce(f.counts, '{}'), coalesce(e.buckets, '{}'), coalesce(e.counts, '{}')
    FROM d
    LEFT JOIN f ON f.hour = d.hour AND f.app = d.app
    LEFT JOIN e ON e.hour = d.hour AND e.app = d.app;
END
$$
$definition$);

-- One round: the next slice of attempts and timeline (at most max_hours, up to five minutes before `at` by the
-- database's clock, never ahead of it); then, once the slices are caught up, every activity final (ended,
-- expired, failed) among those pending and those created in the next at most max_hours is rolled up from its
-- partials and what was written since the slices' bound, with the pushes given up to it; the others become
-- pending. Returns the activities rolled up.
SELECT migration_124_define($definition$
CREATE OR REPLACE FUNCTION @schema@.report_rollup_activities(at timestamptz, max_hours integer) RETURNS integer
LANGUAGE plpgsql SET search_path = pg_catalog, @schema@, pg_temp SET work_mem = '64MB' SET jit = off AS $$
DECLARE
    bound timestamptz := least(at, now()) - interval '5 minutes';
    done timestamptz;
    upto timestamptz;
    seen timestamptz;
    seen_upto timestamptz;
    final_orders text[];
    final_keys text[];
    live_orders text[];
    live_keys text[];
    live_created timestamptz[];
    whole_until timestamptz;
BEGIN
    SELECT complete_until INTO done FROM @schema@.report_rollups WHERE name = 'activities' FOR UPDATE;
    IF done IS NULL THEN
        done := least((SELECT min(created_at) FROM @schema@.activities),
                      (SELECT min(attempted_at) FROM @schema@.push_attempts), bound);
        INSERT INTO @schema@.report_rollups VALUES ('activities', done, done);
    END IF;
    SELECT complete_until INTO seen FROM @schema@.report_rollups WHERE name = 'attempts' FOR UPDATE;
    IF seen IS NULL THEN
        seen := done;
        INSERT INTO @schema@.report_rollups VALUES ('attempts', seen, seen);
    END IF;
    PERFORM 1 FROM @schema@.report_rollups WHERE name = 'start_hours' FOR UPDATE;
    IF NOT FOUND THEN
        INSERT INTO @schema@.report_rollups
        VALUES ('start_hours', date_trunc('hour', seen, 'UTC'), date_trunc('hour', seen, 'UTC'));
    END IF;

    -- The next slice of attempts and decisions, read once.
    seen_upto := greatest(seen, least(bound, seen + make_interval(hours => max_hours)));
    IF seen_upto > seen THEN
        PERFORM @schema@.report_rollup_slice(seen, seen_upto, done);
        UPDATE @schema@.report_rollups SET complete_until = seen_upto WHERE name = 'attempts';
        UPDATE @schema@.report_rollups SET complete_until = greatest(complete_until, date_trunc('hour', seen_upto, 'UTC'))
        WHERE name = 'start_hours';
    END IF;
    IF seen_upto < bound THEN
        RETURN 0;
    END IF;

    upto := greatest(done, least(seen_upto, done + make_interval(hours => max_hours)));
    -- One snapshot decides which are final and which stay pending.
    SELECT coalesce(array_agg(c.order_id) FILTER (WHERE c.final), '{}'),
           coalesce(array_agg(c.activity_key) FILTER (WHERE c.final), '{}'),
           coalesce(array_agg(c.order_id) FILTER (WHERE NOT c.final), '{}'),
           coalesce(array_agg(c.activity_key) FILTER (WHERE NOT c.final), '{}'),
           coalesce(array_agg(c.created_at) FILTER (WHERE NOT c.final), '{}')
    INTO final_orders, final_keys, live_orders, live_keys, live_created
    FROM (
        SELECT a.order_id, a.activity_key, a.created_at, a.state IN ('ended', 'expired', 'failed') AS final
        FROM @schema@.report_activities_pending AS p
        JOIN @schema@.activities AS a ON a.order_id = p.order_id AND a.activity_key = p.activity_key
        UNION ALL
        SELECT a.order_id, a.activity_key, a.created_at, a.state IN ('ended', 'expired', 'failed')
        FROM @schema@.activities AS a WHERE a.created_at >= done AND a.created_at < upto
    ) AS c;

    -- The final activities' rows: their partials, and what was written since the slices' bound.
    PERFORM @schema@.report_rollup_final(final_orders, final_keys, seen_upto, 'infinity');
    DELETE FROM @schema@.report_activity_partials AS w
    USING unnest(final_orders, final_keys) AS k(order_id, activity_key)
    WHERE w.order_id = k.order_id AND w.activity_key = k.activity_key;
    DELETE FROM @schema@.report_failed_pushes_staged AS s
    USING unnest(final_orders, final_keys) AS k(order_id, activity_key)
    WHERE s.order_id = k.order_id AND s.activity_key = k.activity_key;

    DELETE FROM @schema@.report_activities_pending AS p
    WHERE NOT EXISTS (SELECT 1 FROM unnest(live_orders, live_keys) AS l(order_id, activity_key)
                      WHERE l.order_id = p.order_id AND l.activity_key = p.activity_key);
    INSERT INTO @schema@.report_activities_pending
    SELECT * FROM unnest(live_orders, live_keys, live_created) ON CONFLICT DO NOTHING;
    UPDATE @schema@.report_rollups SET complete_until = upto WHERE name = 'activities';
    -- An hour that holds no pending activity gets nothing more: its rows become one per app.
    whole_until := date_trunc('hour', least(upto, (SELECT min(created_at) FROM @schema@.report_activities_pending)),
                              'UTC');
    WITH parts AS (
        DELETE FROM @schema@.report_activity_timings_by_app_rollup AS r
        WHERE r.hour < whole_until
          AND (r.hour, r.app) IN (SELECT hour, app FROM @schema@.report_activity_timings_by_app_rollup
                                  WHERE hour < whole_until GROUP BY 1, 2 HAVING count(*) > 1)
        RETURNING *
    )
    INSERT INTO @schema@.report_activity_timings_by_app_rollup
    SELECT * FROM @schema@.report_timings_merge(ARRAY(SELECT ROW(p.*)::@schema@.report_activity_timings_by_app_rollup FROM parts AS p));
    RETURN cardinality(final_orders);
END
$$
$definition$);

-- Retention: as in sql/123, and the partials and staged pushes of activities no longer there.
SELECT migration_124_define($definition$
CREATE OR REPLACE FUNCTION @schema@.report_rollups_drop_expired(at timestamptz, keep_days integer) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, @schema@, pg_temp AS $$
DECLARE
    cutoff timestamptz;
    deleted bigint;
    total bigint := 0;
BEGIN
    PERFORM @schema@.upkeep_check_at(at, 'report_rollups_drop_expired');
    PERFORM @schema@.upkeep_check_range('report_rollups_drop_expired', 'keep_days', keep_days, 7, 36500);
    cutoff := date_trunc('hour', at - make_interval(days => keep_days));
    DELETE FROM @schema@.report_push_outcomes_rollup WHERE hour < cutoff;
    GET DIAGNOSTICS deleted = ROW_COUNT;
    total := total + deleted;
    DELETE FROM @schema@.report_activity_timings_rollup WHERE created_at < cutoff;
    GET DIAGNOSTICS deleted = ROW_COUNT;
    total := total + deleted;
    DELETE FROM @schema@.report_alerts_per_activity_rollup WHERE created_at < cutoff;
    GET DIAGNOSTICS deleted = ROW_COUNT;
    total := total + deleted;
    DELETE FROM @schema@.report_failed_pushes_rollup WHERE attempted_at < cutoff;
    GET DIAGNOSTICS deleted = ROW_COUNT;
    total := total + deleted;
    DELETE FROM @schema@.report_activity_timings_by_app_rollup WHERE hour < cutoff;
    GET DIAGNOSTICS deleted = ROW_COUNT;
    total := total + deleted;
    DELETE FROM @schema@.report_duplicate_starts_rollup WHERE hour < cutoff;
    GET DIAGNOSTICS deleted = ROW_COUNT;
    total := total + deleted;
    DELETE FROM @schema@.report_repeat_starts_rollup WHERE attempted_at < cutoff;
    GET DIAGNOSTICS deleted = ROW_COUNT;
    total := total + deleted;
    DELETE FROM @schema@.report_activity_partials AS w
    WHERE NOT EXISTS (SELECT 1 FROM @schema@.activities AS a
                      WHERE a.order_id = w.order_id AND a.activity_key = w.activity_key);
    GET DIAGNOSTICS deleted = ROW_COUNT;
    total := total + deleted;
    DELETE FROM @schema@.report_failed_pushes_staged AS s
    WHERE NOT EXISTS (SELECT 1 FROM @schema@.activities AS a
                      WHERE a.order_id = s.order_id AND a.activity_key = s.activity_key);
    GET DIAGNOSTICS deleted = ROW_COUNT;
    total := total + deleted;
    UPDATE @schema@.report_rollups SET complete_from = least(greatest(complete_from, cutoff), complete_until);
    RETURN total;
END
$$
$definition$);

-- Upgrading a database whose rollups already ran: the slices start at the activities' bound; the activities
-- pending get their partials and given-up pushes from their history before it; the accepted starts from the
-- hour of the bound (or from where their rollup stopped, if earlier) are counted again from history.
DO $$
DECLARE
    done timestamptz;
    done_from timestamptz;
    hours timestamptz;
    low timestamptz;
    pending_orders text[];
    pending_keys text[];
BEGIN
    SELECT complete_from, complete_until INTO done_from, done FROM report_rollups WHERE name = 'activities';
    IF done IS NULL THEN
        RETURN;
    END IF;
    INSERT INTO report_rollups VALUES ('attempts', done_from, done);
    SELECT coalesce(array_agg(order_id), '{}'), coalesce(array_agg(activity_key), '{}')
    INTO pending_orders, pending_keys FROM report_activities_pending;
    INSERT INTO report_activity_partials
    SELECT a.order_id, a.activity_key, p.first_delivered_at, p.first_update_at, p.delivered, p.high_priority_delivered,
           p.last_start_at, t.alerts_planned, t.eta_slip_alerts, t.alerts_held_back, t.budget_downgrades,
           t.first_alert_at, t.last_alert_at
    FROM unnest(pending_orders, pending_keys) AS k(order_id, activity_key)
    JOIN activities AS a ON a.order_id = k.order_id AND a.activity_key = k.activity_key
    CROSS JOIN LATERAL (
        SELECT min(q.attempted_at) FILTER (WHERE q.outcome = 'delivered')                       AS first_delivered_at,
               min(q.attempted_at) FILTER (WHERE q.outcome = 'delivered' AND q.kind = 'update') AS first_update_at,
               count(*) FILTER (WHERE q.outcome = 'delivered')                                  AS delivered,
               count(*) FILTER (WHERE q.outcome = 'delivered' AND q.priority = 10)              AS high_priority_delivered,
               max(q.attempted_at) FILTER (WHERE q.kind = 'start' AND q.outcome = 'delivered')  AS last_start_at
        FROM push_attempts AS q
        WHERE q.order_id = a.order_id AND q.activity_key = a.activity_key AND q.attempted_at >= a.created_at
          AND q.attempted_at < done
    ) AS p
    CROSS JOIN LATERAL (
        SELECT count(*) FILTER (WHERE d.code IN ('alert', 'alert_eta_slip'))                          AS alerts_planned,
               count(*) FILTER (WHERE d.code = 'alert_eta_slip')                                      AS eta_slip_alerts,
               count(*) FILTER (WHERE d.code IN ('alert_cap_reached', 'alert_already_sent_for_step')) AS alerts_held_back,
               count(*) FILTER (WHERE d.code = 'budget_downgrade')                                    AS budget_downgrades,
               min(tl.at) FILTER (WHERE d.code IN ('alert', 'alert_eta_slip'))                        AS first_alert_at,
               max(tl.at) FILTER (WHERE d.code IN ('alert', 'alert_eta_slip'))                        AS last_alert_at
        FROM timeline AS tl
        CROSS JOIN LATERAL unnest(tl.activity_keys, tl.codes) AS d(activity_key, code)
        WHERE tl.order_id = a.order_id AND tl.at >= a.created_at AND tl.at < done AND d.activity_key = a.activity_key
    ) AS t;
    -- Their recoveries are read from all of history: a later slice only fills those still missing.
    INSERT INTO report_failed_pushes_staged
    SELECT * FROM report_live_failed_pushes('keys', '-infinity', done, pending_orders, pending_keys, NULL);

    hours := date_trunc('hour', done, 'UTC');
    low := least(hours, coalesce((SELECT complete_until FROM report_rollups WHERE name = 'start_hours'), hours));
    DELETE FROM report_duplicate_starts_rollup WHERE hour >= low;
    DELETE FROM report_repeat_starts_rollup WHERE attempted_at >= low;
    INSERT INTO report_duplicate_starts_rollup
    SELECT date_trunc('hour', p.attempted_at, 'UTC'), p.bundle_id, count(*)
    FROM push_attempts AS p
    WHERE p.kind = 'start' AND p.outcome = 'delivered' AND p.attempted_at >= low AND p.attempted_at < done
    GROUP BY 1, 2;
    INSERT INTO report_repeat_starts_rollup
    SELECT s.attempted_at, s.bundle_id, e.previous_at
    FROM push_attempts AS s
    LEFT JOIN activities AS a USING (order_id, activity_key)
    CROSS JOIN LATERAL (
        SELECT max(q.attempted_at) AS previous_at FROM push_attempts AS q
        WHERE q.kind = 'start' AND q.outcome = 'delivered' AND q.activity_key = s.activity_key
          AND q.order_id = s.order_id AND q.attempted_at >= coalesce(a.created_at, '-infinity')
          AND q.attempted_at <= s.attempted_at AND (q.attempted_at, q.id) < (s.attempted_at, s.id)
    ) AS e
    WHERE s.kind = 'start' AND s.outcome = 'delivered' AND s.attempted_at >= low AND s.attempted_at < done
      AND e.previous_at IS NOT NULL;
    INSERT INTO report_rollups VALUES ('start_hours', low, hours)
    ON CONFLICT (name) DO UPDATE SET complete_until = hours,
                                     complete_from = least(report_rollups.complete_from, hours);
END
$$;

REVOKE EXECUTE ON FUNCTION report_rollup_slice(timestamptz, timestamptz, timestamptz),
    report_rollup_final(text[], text[], timestamptz, timestamptz),
    report_previous_start(text, text, timestamptz, bigint), report_recovered_at(text, text, bigint, timestamptz)
    FROM PUBLIC;

DROP FUNCTION migration_124_define(text);
