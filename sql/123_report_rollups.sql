-- Rollups for every report over history: activity-timings, activity-timings-by-app, alerts-per-activity,
-- failed-pushes and duplicate-starts read the hours that can no longer change from tables written once,
-- and only the rest from the history tables.
--
-- Why: those reports read every row of their window (at 10M attempts in 30 days: 1–2.6 s for a day, 1.2–8.6 s
-- for a week), growing with the history. Push outcomes already read closed hours from a rollup (sql/114).
--
-- When an hour is final: an activity lives at most 12 hours, so the activities created in an hour, and the
-- attempts made in it, can no longer change once the hour ended 12 hours 5 minutes ago (by the database's
-- clock) and no activity created before the hour's end is still live (pending_start, starting, active,
-- ending). An activity still live holds the rollup back at its hour, however old: the reports stay exact and
-- read more live. The rollup is kept by report_rollup_push_outcomes, the function the workers' retention round
-- already calls (sql/114, 122), in the same steps (max_hours per call); `report_rollups` row 'activity_hours'
-- says which hours it holds: every whole hour in [complete_from, complete_until).
--
-- What is rolled up, per final hour:
--   report_activity_timings_rollup       the rows of report_activity_timings (activities created in the hour)
--   report_alerts_per_activity_rollup    the rows of report_alerts_per_activity, with the activity's created_at
--   report_failed_pushes_rollup          the rows of report_failed_pushes (pushes given up in the hour)
--   report_activity_timings_by_app_rollup  per hour and app: counts, the longest end, and histograms of
--                                        first_update_s and end_s (report_timing_bucket)
--   report_duplicate_starts_rollup       per hour and app: start pushes accepted
--   report_repeat_starts_rollup          each accepted start that had an earlier accepted start for the same
--                                        activity, with that earlier start's time (rare)
-- The window functions read the rows of the window that lie in rolled-up hours from these tables (whole hours
-- for the two reports that group), and the rest from the history, and return what the view would say.
--
-- Percentiles roll up: report_activity_timings_by_app's p50/p95 are computed from a histogram of fixed buckets
-- (report_timing_bucket: zero, then buckets whose bounds grow by 1.01/0.99, either sign), in the view as in
-- the function, so hours and days combine exactly. The figure is the value of rank ceil(q * n) among the n
-- values (nearest rank, not interpolated), given as its bucket's representative, within 1 % of it, rounded to
-- the millisecond; its day is the UTC day (docs/reports.md).
--
-- Privileges: as for the outcomes rollup, nobody but the owner may read or write the rollup tables; the report
-- functions (SECURITY DEFINER) read them. The helpers that read history are the owner's alone.

DO $$
BEGIN
    IF current_schema() ~ '[''$]' THEN
        RAISE EXCEPTION 'the schema % has a quote or a dollar sign in its name; migrate into a schema without them', current_schema();
    END IF;
END
$$;

CREATE FUNCTION migration_123_define(definition text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE replace(definition, '@schema@', quote_ident(current_schema()));
END
$$;

-- The histogram's buckets. A value in seconds (to the millisecond) goes to bucket 0 when it is 0, else to
-- ±(1 + floor(ln(|v| * 1000) / ln(g))), g = 1.01 / 0.99: bucket k > 0 holds [0.001 g^(k-1), 0.001 g^k).
SELECT migration_123_define($definition$
CREATE FUNCTION @schema@.report_timing_bucket(seconds numeric) RETURNS integer
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE SET search_path = pg_catalog, @schema@, pg_temp AS $$
    SELECT CASE WHEN seconds = 0 THEN 0
                ELSE sign(seconds)::integer
                     * (1 + greatest(floor(ln(abs(seconds)::float8 * 1000) / ln(1.01::float8 / 0.99::float8)), 0)::integer)
           END
$$
$definition$);

-- A bucket's representative: 2 g / (1 + g) times its lower bound, within 1 % of every value in it, to the ms.
SELECT migration_123_define($definition$
CREATE FUNCTION @schema@.report_timing_bucket_value(bucket integer) RETURNS numeric
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE SET search_path = pg_catalog, @schema@, pg_temp AS $$
    SELECT CASE WHEN bucket = 0 THEN 0::numeric
                ELSE sign(bucket)::numeric
                     * round((0.001 * power(1.01::float8 / 0.99::float8, abs(bucket) - 1)
                              * 2 * (1.01::float8 / 0.99::float8) / (1 + 1.01::float8 / 0.99::float8))::numeric, 3)
           END
$$
$definition$);

-- The q-quantile of a histogram (buckets ascending, one count each): the bucket of rank ceil(q * n).
SELECT migration_123_define($definition$
CREATE FUNCTION @schema@.report_timing_quantile(buckets integer[], counts bigint[], q numeric) RETURNS numeric
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE SET search_path = pg_catalog, @schema@, pg_temp AS $$
    SELECT @schema@.report_timing_bucket_value(c.bucket)
    FROM (SELECT u.bucket, sum(u.n) OVER (ORDER BY u.bucket) AS running, sum(u.n) OVER () AS total
          FROM unnest(buckets, counts) AS u(bucket, n)) AS c
    WHERE c.running >= ceil(q * c.total)
    ORDER BY c.bucket
    LIMIT 1
$$
$definition$);

-- The view's percentiles from the same histogram, per UTC day, so that the window function's rollup and the
-- view agree (same columns, same types).
CREATE OR REPLACE VIEW report_activity_timings_by_app AS
WITH t AS (
    SELECT date_trunc('day', r.created_at, 'UTC') AS day, r.app, r.first_update_at, r.ended_at, r.first_update_s,
           r.end_s
    FROM report_activity_timings AS r
)
SELECT d.day,
       d.app,
       d.activities,
       d.with_update,
       d.ended,
       report_timing_quantile(f.buckets, f.counts, 0.5)  AS p50_first_update_s,
       report_timing_quantile(f.buckets, f.counts, 0.95) AS p95_first_update_s,
       report_timing_quantile(e.buckets, e.counts, 0.5)  AS p50_end_s,
       report_timing_quantile(e.buckets, e.counts, 0.95) AS p95_end_s,
       d.max_end_s
FROM (
    SELECT day, app, count(*) AS activities, count(first_update_at) AS with_update, count(ended_at) AS ended,
           max(end_s) AS max_end_s
    FROM t GROUP BY 1, 2
) AS d
LEFT JOIN (
    SELECT x.day, x.app, array_agg(x.bucket ORDER BY x.bucket) AS buckets, array_agg(x.n ORDER BY x.bucket) AS counts
    FROM (SELECT day, app, report_timing_bucket(first_update_s) AS bucket, count(*) AS n
          FROM t WHERE first_update_s IS NOT NULL GROUP BY 1, 2, 3) AS x
    GROUP BY 1, 2
) AS f ON f.day = d.day AND f.app = d.app
LEFT JOIN (
    SELECT x.day, x.app, array_agg(x.bucket ORDER BY x.bucket) AS buckets, array_agg(x.n ORDER BY x.bucket) AS counts
    FROM (SELECT day, app, report_timing_bucket(end_s) AS bucket, count(*) AS n
          FROM t WHERE end_s IS NOT NULL GROUP BY 1, 2, 3) AS x
    GROUP BY 1, 2
) AS e ON e.day = d.day AND e.app = d.app;
COMMENT ON COLUMN report_activity_timings_by_app.day IS 'The UTC day (start of the day) the activities were created.';
COMMENT ON COLUMN report_activity_timings_by_app.p50_first_update_s IS 'Median first_update_s (nearest rank, within 1 %), seconds.';
COMMENT ON COLUMN report_activity_timings_by_app.p95_first_update_s IS '95th percentile first_update_s (nearest rank, within 1 %), seconds.';
COMMENT ON COLUMN report_activity_timings_by_app.p50_end_s IS 'Median end_s (nearest rank, within 1 %), seconds.';
COMMENT ON COLUMN report_activity_timings_by_app.p95_end_s IS '95th percentile end_s (nearest rank, within 1 %), seconds.';

-- The tables. Their keys' text compares as bytes where it is an identifier (sql/110).
CREATE TABLE report_activity_timings_rollup AS SELECT * FROM report_activity_timings WITH NO DATA;
ALTER TABLE report_activity_timings_rollup ALTER COLUMN created_at SET NOT NULL;
CREATE INDEX report_activity_timings_rollup_created ON report_activity_timings_rollup (created_at);
COMMENT ON TABLE report_activity_timings_rollup IS
    'report_activity_timings of the activities created in the final hours of report_rollups ''activity_hours''.';

CREATE TABLE report_alerts_per_activity_rollup (
    created_at timestamptz NOT NULL,
    LIKE report_alerts_per_activity
);
CREATE INDEX report_alerts_per_activity_rollup_created ON report_alerts_per_activity_rollup (created_at);
COMMENT ON TABLE report_alerts_per_activity_rollup IS
    'report_alerts_per_activity of the activities created in the final hours of report_rollups ''activity_hours'', with their creation time.';

CREATE TABLE report_failed_pushes_rollup AS SELECT * FROM report_failed_pushes WITH NO DATA;
ALTER TABLE report_failed_pushes_rollup ALTER COLUMN attempted_at SET NOT NULL;
CREATE INDEX report_failed_pushes_rollup_attempted ON report_failed_pushes_rollup (attempted_at);
COMMENT ON TABLE report_failed_pushes_rollup IS
    'report_failed_pushes of the pushes given up in the final hours of report_rollups ''activity_hours''.';

CREATE TABLE report_activity_timings_by_app_rollup (
    hour                 timestamptz NOT NULL,
    app                  text NOT NULL,
    activities           bigint NOT NULL,
    with_update          bigint NOT NULL,
    ended                bigint NOT NULL,
    max_end_s            numeric,
    first_update_buckets integer[] NOT NULL,
    first_update_counts  bigint[] NOT NULL,
    end_buckets          integer[] NOT NULL,
    end_counts           bigint[] NOT NULL,
    PRIMARY KEY (hour, app)
);
COMMENT ON TABLE report_activity_timings_by_app_rollup IS
    'Per hour of creation and app: the counts of report_activity_timings_by_app, the longest end_s, and histograms (report_timing_bucket, ascending) of first_update_s and end_s.';

CREATE TABLE report_duplicate_starts_rollup (
    hour   timestamptz NOT NULL,
    app    text COLLATE "C" NOT NULL,
    starts bigint NOT NULL,
    PRIMARY KEY (hour, app)
);
COMMENT ON TABLE report_duplicate_starts_rollup IS 'Start pushes APNs accepted, per hour and app.';

CREATE TABLE report_repeat_starts_rollup (
    attempted_at timestamptz NOT NULL,
    app          text COLLATE "C" NOT NULL,
    previous_at  timestamptz NOT NULL
);
CREATE INDEX report_repeat_starts_rollup_attempted ON report_repeat_starts_rollup (attempted_at);
COMMENT ON TABLE report_repeat_starts_rollup IS
    'Each accepted start that followed an accepted start of the same activity (by time, then id), with that start''s time: a duplicate in every window that holds both.';

-- The live readers: the window functions' queries before this migration (sql/117), now the owner's alone. The
-- rollup reads an hour's activities' attempts and decisions up to `horizon`, the end of their 12 hours (what
-- makes the hour final), instead of to the end of the history.
SELECT migration_123_define($definition$
CREATE FUNCTION @schema@.report_live_activity_timings(since timestamptz, until timestamptz,
                                                      horizon timestamptz DEFAULT 'infinity')
RETURNS SETOF @schema@.report_activity_timings
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, @schema@, pg_temp SET work_mem = '64MB' SET jit = off AS $$
BEGIN
    IF since >= until THEN
        RETURN;
    END IF;
    RETURN QUERY EXECUTE $query$
        WITH created AS (
            SELECT * FROM @schema@.activities AS a WHERE a.created_at >= $1 AND a.created_at < $2
        ),
        firsts AS (
            SELECT p.order_id, p.activity_key,
                   min(p.attempted_at) FILTER (WHERE p.outcome = 'delivered')                       AS first_delivered_at,
                   min(p.attempted_at) FILTER (WHERE p.outcome = 'delivered' AND p.kind = 'update') AS first_update_at
            FROM @schema@.push_attempts AS p
            WHERE p.attempted_at >= $1 AND p.attempted_at < $3 AND (p.order_id, p.activity_key) IN (SELECT order_id, activity_key FROM created)
            GROUP BY p.order_id, p.activity_key
        )
        SELECT a.order_id, a.activity_key, coalesce(a.bundle_id, '(none)'), a.state, a.end_reason, a.created_at,
               a.started_at, f.first_delivered_at, f.first_update_at, a.ended_at,
               greatest(round(extract(epoch FROM a.started_at - a.created_at)::numeric, 3), 0),
               round(extract(epoch FROM f.first_update_at - coalesce(a.started_at, a.created_at))::numeric, 3),
               round(extract(epoch FROM f.first_update_at
                                        - (SELECT o.created_at FROM @schema@.orders AS o WHERE o.order_id = a.order_id))::numeric, 3),
               round(extract(epoch FROM a.ended_at - coalesce(a.started_at, a.created_at))::numeric, 3)
        FROM created AS a
        LEFT JOIN firsts AS f USING (order_id, activity_key)
    $query$ USING since, until, horizon;
END
$$
$definition$);

SELECT migration_123_define($definition$
CREATE FUNCTION @schema@.report_live_alerts_per_activity(since timestamptz, until timestamptz,
                                                         horizon timestamptz DEFAULT 'infinity')
RETURNS SETOF @schema@.report_alerts_per_activity_rollup
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, @schema@, pg_temp SET work_mem = '64MB' SET jit = off AS $$
BEGIN
    IF since >= until THEN
        RETURN;
    END IF;
    RETURN QUERY EXECUTE $query$
        WITH created AS (
            SELECT * FROM @schema@.activities AS a WHERE a.created_at >= $1 AND a.created_at < $2
        ),
        decisions AS (
            SELECT tl.order_id, tl.activity_key,
                   count(*) FILTER (WHERE code IN ('alert', 'alert_eta_slip'))                          AS alerts_planned,
                   count(*) FILTER (WHERE code = 'alert_eta_slip')                                      AS eta_slip_alerts,
                   count(*) FILTER (WHERE code IN ('alert_cap_reached', 'alert_already_sent_for_step')) AS alerts_held_back,
                   count(*) FILTER (WHERE code = 'budget_downgrade')                                    AS budget_downgrades,
                   min(at) FILTER (WHERE code IN ('alert', 'alert_eta_slip'))                           AS first_alert_at,
                   max(at) FILTER (WHERE code IN ('alert', 'alert_eta_slip'))                           AS last_alert_at
            FROM @schema@.timeline_decisions AS tl
            WHERE tl.at >= $1 AND tl.at < $3 AND tl.order_id IN (SELECT order_id FROM created)
              AND (tl.order_id, tl.activity_key) IN (SELECT order_id, activity_key FROM created)
            GROUP BY tl.order_id, tl.activity_key
        ),
        pushes AS (
            SELECT q.order_id, q.activity_key,
                   count(*) FILTER (WHERE outcome = 'delivered')                   AS delivered,
                   count(*) FILTER (WHERE outcome = 'delivered' AND priority = 10) AS high_priority_delivered
            FROM @schema@.push_attempts AS q
            WHERE q.attempted_at >= $1 AND q.attempted_at < $3 AND (q.order_id, q.activity_key) IN (SELECT order_id, activity_key FROM created)
            GROUP BY q.order_id, q.activity_key
        )
        SELECT a.created_at, a.order_id, a.activity_key, coalesce(a.bundle_id, '(none)'), a.state, a.alert_count,
               coalesce(t.alerts_planned, 0), coalesce(t.eta_slip_alerts, 0), coalesce(t.alerts_held_back, 0),
               coalesce(t.budget_downgrades, 0), coalesce(p.delivered, 0), coalesce(p.high_priority_delivered, 0),
               t.first_alert_at, t.last_alert_at, a.updated_at
        FROM created AS a
        LEFT JOIN decisions AS t USING (order_id, activity_key)
        LEFT JOIN pushes AS p USING (order_id, activity_key)
    $query$ USING since, until, horizon;
END
$$
$definition$);

SELECT migration_123_define($definition$
CREATE FUNCTION @schema@.report_live_failed_pushes(since timestamptz, until timestamptz)
RETURNS SETOF @schema@.report_failed_pushes
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, @schema@, pg_temp SET work_mem = '64MB' SET jit = off AS $$
BEGIN
    IF since >= until THEN
        RETURN;
    END IF;
    RETURN QUERY EXECUTE $query$
        SELECT p.id, p.attempted_at, p.order_id, p.activity_key, p.bundle_id, p.kind, p.priority, p.status, p.outcome,
               coalesce(p.reason, ''), t.code, a.state, r.recovered_at, t.message
        FROM @schema@.push_attempts AS p
        JOIN LATERAL (
            SELECT d.code, d.message
            FROM @schema@.timeline AS tl
            CROSS JOIN LATERAL unnest(tl.activity_keys, tl.codes, tl.messages) WITH ORDINALITY
                AS d(activity_key, code, message, position)
            WHERE tl.order_id = p.order_id AND tl.at = p.attempted_at
              AND tl.kind = 'outcome' AND tl.codes && ARRAY['push_dropped', 'token_gone']
              AND d.activity_key = p.activity_key AND d.code IN ('push_dropped', 'token_gone')
            ORDER BY tl.id + 0, d.position
            LIMIT 1
        ) AS t ON true
        LEFT JOIN @schema@.activities AS a USING (order_id, activity_key)
        LEFT JOIN LATERAL (
            SELECT min(q.attempted_at) AS recovered_at FROM @schema@.push_attempts AS q
            WHERE q.order_id = p.order_id AND q.activity_key = p.activity_key AND q.id > p.id
              AND q.attempted_at >= p.attempted_at AND q.outcome = 'delivered'
        ) AS r ON true
        WHERE p.attempted_at >= $1 AND p.attempted_at < $2 AND p.outcome <> 'delivered'
    $query$ USING since, until;
END
$$
$definition$);

-- Per hour of creation and app, the counts and histograms of the activities created in [since, until):
-- from the history ('live') or from report_activity_timings_rollup ('rollup').
SELECT migration_123_define($definition$
CREATE FUNCTION @schema@.report_timings_by_hour(source text, since timestamptz, until timestamptz)
RETURNS SETOF @schema@.report_activity_timings_by_app_rollup
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, @schema@, pg_temp SET work_mem = '64MB' SET jit = off AS $$
BEGIN
    IF since >= until THEN
        RETURN;
    END IF;
    RETURN QUERY EXECUTE format($query$
        WITH t AS MATERIALIZED (
            SELECT date_trunc('hour', r.created_at, 'UTC') AS hour, r.app, r.first_update_at, r.ended_at,
                   r.first_update_s, r.end_s
            FROM %s AS r
            WHERE r.created_at >= $1 AND r.created_at < $2
        ),
        d AS (
            SELECT hour, app, count(*) AS activities, count(first_update_at) AS with_update, count(ended_at) AS ended,
                   max(end_s) AS max_end_s
            FROM t GROUP BY 1, 2
        ),
        f AS (
            SELECT x.hour, x.app, array_agg(x.bucket ORDER BY x.bucket) AS buckets, array_agg(x.n ORDER BY x.bucket) AS counts
            FROM (SELECT hour, app, @schema@.report_timing_bucket(first_update_s) AS bucket, count(*) AS n
                  FROM t WHERE first_update_s IS NOT NULL GROUP BY 1, 2, 3) AS x
            GROUP BY 1, 2
        ),
        e AS (
            SELECT x.hour, x.app, array_agg(x.bucket ORDER BY x.bucket) AS buckets, array_agg(x.n ORDER BY x.bucket) AS counts
            FROM (SELECT hour, app, @schema@.report_timing_bucket(end_s) AS bucket, count(*) AS n
                  FROM t WHERE end_s IS NOT NULL GROUP BY 1, 2, 3) AS x
            GROUP BY 1, 2
        )
        SELECT d.hour, d.app, d.activities, d.with_update, d.ended, d.max_end_s,
               coalesce(f.buckets, '{}'), coalesce(f.counts, '{}'), coalesce(e.buckets, '{}'), coalesce(e.counts, '{}')
        FROM d
        LEFT JOIN f ON f.hour = d.hour AND f.app = d.app
        LEFT JOIN e ON e.hour = d.hour AND e.app = d.app
    $query$, CASE source
                 WHEN 'live' THEN '@schema@.report_live_activity_timings($1, $2)'
                 WHEN 'rollup' THEN '@schema@.report_activity_timings_rollup'
             END) USING since, until;
END
$$
$definition$);

-- Rolls up the final hours (see the top), from where it stopped, at most max_hours of them. Returns how many.
SELECT migration_123_define($definition$
CREATE FUNCTION @schema@.report_rollup_activity_hours(at timestamptz, max_hours integer) RETURNS integer
LANGUAGE plpgsql SET search_path = pg_catalog, @schema@, pg_temp SET work_mem = '64MB' SET jit = off AS $$
DECLARE
    done timestamptz;
    first_hour timestamptz;
    oldest_live timestamptz;
    last_end timestamptz;
    upto timestamptz;
BEGIN
    -- Never ahead of the database's own clock.
    last_end := date_trunc('hour', least(at, now()) - interval '12 hours 5 minutes', 'UTC');
    SELECT min(a.created_at) INTO oldest_live FROM @schema@.activities AS a
    WHERE a.state IN ('pending_start', 'starting', 'active', 'ending');
    IF oldest_live IS NOT NULL THEN
        last_end := least(last_end, date_trunc('hour', oldest_live, 'UTC'));
    END IF;
    SELECT complete_until INTO done FROM @schema@.report_rollups WHERE name = 'activity_hours' FOR UPDATE;
    IF done IS NULL THEN
        first_hour := date_trunc('hour', least((SELECT min(created_at) FROM @schema@.activities),
                                               (SELECT min(attempted_at) FROM @schema@.push_attempts)), 'UTC');
        done := least(coalesce(first_hour, last_end), last_end);
        INSERT INTO @schema@.report_rollups VALUES ('activity_hours', done, done);
    END IF;
    upto := least(last_end, done + make_interval(hours => max_hours));
    IF upto <= done THEN
        RETURN 0;
    END IF;
    INSERT INTO @schema@.report_activity_timings_rollup SELECT * FROM @schema@.report_live_activity_timings(done, upto, upto + interval '12 hours 5 minutes');
    INSERT INTO @schema@.report_activity_timings_by_app_rollup
    SELECT * FROM @schema@.report_timings_by_hour('rollup', done, upto);
    INSERT INTO @schema@.report_alerts_per_activity_rollup
    SELECT * FROM @schema@.report_live_alerts_per_activity(done, upto, upto + interval '12 hours 5 minutes');
    INSERT INTO @schema@.report_failed_pushes_rollup SELECT * FROM @schema@.report_live_failed_pushes(done, upto);
    INSERT INTO @schema@.report_duplicate_starts_rollup
    SELECT date_trunc('hour', p.attempted_at, 'UTC'), p.bundle_id, count(*)
    FROM @schema@.push_attempts AS p
    WHERE p.kind = 'start' AND p.outcome = 'delivered' AND p.attempted_at >= done AND p.attempted_at < upto
    GROUP BY 1, 2;
    -- An activity's attempts are never older than the activity: the earlier start is looked for from its creation.
    INSERT INTO @schema@.report_repeat_starts_rollup
    SELECT s.attempted_at, s.bundle_id, e.previous_at
    FROM @schema@.push_attempts AS s
    LEFT JOIN @schema@.activities AS a USING (order_id, activity_key)
    CROSS JOIN LATERAL (
        SELECT max(q.attempted_at) AS previous_at FROM @schema@.push_attempts AS q
        WHERE q.kind = 'start' AND q.outcome = 'delivered' AND q.activity_key = s.activity_key
          AND q.order_id = s.order_id AND q.attempted_at >= coalesce(a.created_at, '-infinity')
          AND q.attempted_at <= s.attempted_at AND (q.attempted_at, q.id) < (s.attempted_at, s.id)
    ) AS e
    WHERE s.kind = 'start' AND s.outcome = 'delivered' AND s.attempted_at >= done AND s.attempted_at < upto
      AND e.previous_at IS NOT NULL;
    UPDATE @schema@.report_rollups SET complete_until = upto WHERE name = 'activity_hours';
    RETURN extract(epoch FROM upto - done)::integer / 3600;
END
$$
$definition$);

-- The outcomes rollup (sql/122), which the workers' rounds call, keeps the activity hours too, in the same
-- steps. It still returns the hours of push outcomes rolled up.
SELECT migration_123_define($definition$
CREATE OR REPLACE FUNCTION @schema@.report_rollup_push_outcomes(at timestamptz, max_hours integer) RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, @schema@, pg_temp AS $$
DECLARE
    done timestamptz;
    first_hour timestamptz;
    last_end timestamptz;
    upto timestamptz;
BEGIN
    PERFORM @schema@.upkeep_check_at(at, 'report_rollup_push_outcomes');
    PERFORM @schema@.upkeep_check_range('report_rollup_push_outcomes', 'max_hours', max_hours, 1, 168);
    PERFORM @schema@.report_rollup_activity_hours(at, max_hours);
    -- Never ahead of the database's own clock: an hour is closed when the database says so.
    last_end := date_trunc('hour', least(at, now()) - interval '5 minutes');
    SELECT complete_until INTO done FROM @schema@.report_rollups WHERE name = 'push_outcomes_hourly' FOR UPDATE;
    IF done IS NULL THEN
        SELECT date_trunc('hour', min(attempted_at)) INTO first_hour FROM @schema@.push_attempts;
        first_hour := coalesce(first_hour, last_end);
        INSERT INTO @schema@.report_rollups
        VALUES ('push_outcomes_hourly', least(first_hour, last_end), least(first_hour, last_end));
        done := least(first_hour, last_end);
    END IF;
    upto := least(last_end, done + make_interval(hours => max_hours));
    IF upto <= done THEN
        RETURN 0;
    END IF;
    INSERT INTO @schema@.report_push_outcomes_rollup
    SELECT date_trunc('hour', p.attempted_at), p.bundle_id, p.outcome, coalesce(p.reason, ''), p.status, count(*),
           count(DISTINCT (p.order_id, p.activity_key)), round(avg(p.latency_ms)::numeric, 1),
           round((percentile_cont(0.95) WITHIN GROUP (ORDER BY p.latency_ms))::numeric, 1)
    FROM @schema@.push_attempts AS p
    WHERE p.attempted_at >= done AND p.attempted_at < upto
    GROUP BY 1, 2, 3, 4, 5;
    UPDATE @schema@.report_rollups SET complete_until = upto WHERE name = 'push_outcomes_hourly';
    RETURN extract(epoch FROM upto - done)::integer / 3600;
END
$$
$definition$);

-- Retention of the rollups follows the history's.
SELECT migration_123_define($definition$
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
    UPDATE @schema@.report_rollups SET complete_from = least(greatest(complete_from, cutoff), complete_until);
    RETURN total;
END
$$
$definition$);

-- The window functions: the window's rows in rolled-up hours from the rollups, the rest live. For the reports
-- of one row per activity or push, [since, until) splits at the rolled-up range [rolled_from, rolled_until);
-- for those that group, at the rolled-up whole hours inside the window, [low, high).
SELECT migration_123_define($definition$
CREATE OR REPLACE FUNCTION @schema@.report_activity_timings(since timestamptz, until timestamptz)
RETURNS SETOF @schema@.report_activity_timings
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, @schema@, pg_temp
SET work_mem = '64MB' SET jit = off AS $$
DECLARE
    rolled_from timestamptz;
    rolled_until timestamptz;
BEGIN
    SELECT complete_from, complete_until INTO rolled_from, rolled_until
    FROM @schema@.report_rollups WHERE name = 'activity_hours';
    rolled_from := coalesce(rolled_from, until);
    rolled_until := coalesce(rolled_until, until);
    RETURN QUERY SELECT * FROM @schema@.report_live_activity_timings(since, least(until, rolled_from));
    RETURN QUERY SELECT r.* FROM @schema@.report_activity_timings_rollup AS r
                 WHERE r.created_at >= greatest(since, rolled_from) AND r.created_at < least(until, rolled_until);
    RETURN QUERY SELECT * FROM @schema@.report_live_activity_timings(greatest(since, rolled_until), until);
END
$$
$definition$);

SELECT migration_123_define($definition$
CREATE OR REPLACE FUNCTION @schema@.report_alerts_per_activity(since timestamptz, until timestamptz)
RETURNS SETOF @schema@.report_alerts_per_activity
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, @schema@, pg_temp
SET work_mem = '64MB' SET jit = off AS $$
DECLARE
    rolled_from timestamptz;
    rolled_until timestamptz;
BEGIN
    SELECT complete_from, complete_until INTO rolled_from, rolled_until
    FROM @schema@.report_rollups WHERE name = 'activity_hours';
    rolled_from := coalesce(rolled_from, until);
    rolled_until := coalesce(rolled_until, until);
    RETURN QUERY
        SELECT r.order_id, r.activity_key, r.app, r.state, r.alert_count, r.alerts_planned, r.eta_slip_alerts,
               r.alerts_held_back, r.budget_downgrades, r.pushes_delivered, r.high_priority_delivered, r.first_alert_at,
               r.last_alert_at, r.updated_at
        FROM @schema@.report_live_alerts_per_activity(since, least(until, rolled_from)) AS r
        UNION ALL
        SELECT r.order_id, r.activity_key, r.app, r.state, r.alert_count, r.alerts_planned, r.eta_slip_alerts,
               r.alerts_held_back, r.budget_downgrades, r.pushes_delivered, r.high_priority_delivered, r.first_alert_at,
               r.last_alert_at, r.updated_at
        FROM @schema@.report_alerts_per_activity_rollup AS r
        WHERE r.created_at >= greatest(since, rolled_from) AND r.created_at < least(until, rolled_until)
        UNION ALL
        SELECT r.order_id, r.activity_key, r.app, r.state, r.alert_count, r.alerts_planned, r.eta_slip_alerts,
               r.alerts_held_back, r.budget_downgrades, r.pushes_delivered, r.high_priority_delivered, r.first_alert_at,
               r.last_alert_at, r.updated_at
        FROM @schema@.report_live_alerts_per_activity(greatest(since, rolled_until), until) AS r;
END
$$
$definition$);

SELECT migration_123_define($definition$
CREATE OR REPLACE FUNCTION @schema@.report_failed_pushes(since timestamptz, until timestamptz)
RETURNS SETOF @schema@.report_failed_pushes
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, @schema@, pg_temp
SET work_mem = '64MB' SET jit = off AS $$
DECLARE
    rolled_from timestamptz;
    rolled_until timestamptz;
BEGIN
    SELECT complete_from, complete_until INTO rolled_from, rolled_until
    FROM @schema@.report_rollups WHERE name = 'activity_hours';
    rolled_from := coalesce(rolled_from, until);
    rolled_until := coalesce(rolled_until, until);
    RETURN QUERY SELECT * FROM @schema@.report_live_failed_pushes(since, least(until, rolled_from));
    RETURN QUERY SELECT r.* FROM @schema@.report_failed_pushes_rollup AS r
                 WHERE r.attempted_at >= greatest(since, rolled_from) AND r.attempted_at < least(until, rolled_until);
    RETURN QUERY SELECT * FROM @schema@.report_live_failed_pushes(greatest(since, rolled_until), until);
END
$$
$definition$);

SELECT migration_123_define($definition$
CREATE OR REPLACE FUNCTION @schema@.report_activity_timings_by_app(since timestamptz, until timestamptz)
RETURNS SETOF @schema@.report_activity_timings_by_app
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, @schema@, pg_temp
SET work_mem = '64MB' SET jit = off AS $$
DECLARE
    rolled_from timestamptz;
    rolled_until timestamptz;
    low timestamptz;
    high timestamptz;
BEGIN
    SELECT complete_from, complete_until INTO rolled_from, rolled_until
    FROM @schema@.report_rollups WHERE name = 'activity_hours';
    low := greatest(date_trunc('hour', since, 'UTC')
                    + CASE WHEN since > date_trunc('hour', since, 'UTC') THEN interval '1 hour' ELSE interval '0' END,
                    coalesce(rolled_from, 'infinity'));
    high := least(date_trunc('hour', until, 'UTC'), coalesce(rolled_until, '-infinity'));
    IF low >= high THEN
        low := until;
        high := until;
    END IF;
    RETURN QUERY EXECUTE $query$
        WITH h AS MATERIALIZED (
            SELECT * FROM @schema@.report_activity_timings_by_app_rollup AS r WHERE r.hour >= $3 AND r.hour < $4
            UNION ALL
            SELECT * FROM @schema@.report_timings_by_hour('live', $1, $3)
            UNION ALL
            SELECT * FROM @schema@.report_timings_by_hour('live', $4, $2)
        )
        SELECT d.day, d.app, d.activities, d.with_update, d.ended,
               @schema@.report_timing_quantile(f.buckets, f.counts, 0.5),
               @schema@.report_timing_quantile(f.buckets, f.counts, 0.95),
               @schema@.report_timing_quantile(e.buckets, e.counts, 0.5),
               @schema@.report_timing_quantile(e.buckets, e.counts, 0.95),
               d.max_end_s
        FROM (
            SELECT date_trunc('day', h.hour, 'UTC') AS day, h.app, sum(h.activities)::bigint AS activities,
                   sum(h.with_update)::bigint AS with_update, sum(h.ended)::bigint AS ended, max(h.max_end_s) AS max_end_s
            FROM h GROUP BY 1, 2
        ) AS d
        LEFT JOIN (
            SELECT x.day, x.app, array_agg(x.bucket ORDER BY x.bucket) AS buckets, array_agg(x.n ORDER BY x.bucket) AS counts
            FROM (SELECT date_trunc('day', h.hour, 'UTC') AS day, h.app, u.bucket, sum(u.n)::bigint AS n
                  FROM h CROSS JOIN LATERAL unnest(h.first_update_buckets, h.first_update_counts) AS u(bucket, n)
                  GROUP BY 1, 2, 3) AS x
            GROUP BY 1, 2
        ) AS f ON f.day = d.day AND f.app = d.app
        LEFT JOIN (
            SELECT x.day, x.app, array_agg(x.bucket ORDER BY x.bucket) AS buckets, array_agg(x.n ORDER BY x.bucket) AS counts
            FROM (SELECT date_trunc('day', h.hour, 'UTC') AS day, h.app, u.bucket, sum(u.n)::bigint AS n
                  FROM h CROSS JOIN LATERAL unnest(h.end_buckets, h.end_counts) AS u(bucket, n)
                  GROUP BY 1, 2, 3) AS x
            GROUP BY 1, 2
        ) AS e ON e.day = d.day AND e.app = d.app
    $query$ USING since, until, low, high;
END
$$
$definition$);

-- A start in the window is a duplicate when the activity's previous accepted start (by time, then id) is in the
-- window too: count(*) - count(DISTINCT activity) of the view, start by start.
SELECT migration_123_define($definition$
CREATE OR REPLACE FUNCTION @schema@.report_duplicate_starts(since timestamptz, until timestamptz)
RETURNS SETOF @schema@.report_duplicate_starts
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, @schema@, pg_temp
SET work_mem = '64MB' SET jit = off AS $$
DECLARE
    rolled_from timestamptz;
    rolled_until timestamptz;
    low timestamptz;
    high timestamptz;
BEGIN
    SELECT complete_from, complete_until INTO rolled_from, rolled_until
    FROM @schema@.report_rollups WHERE name = 'activity_hours';
    low := greatest(date_trunc('hour', since, 'UTC')
                    + CASE WHEN since > date_trunc('hour', since, 'UTC') THEN interval '1 hour' ELSE interval '0' END,
                    coalesce(rolled_from, 'infinity'));
    high := least(date_trunc('hour', until, 'UTC'), coalesce(rolled_until, '-infinity'));
    IF low >= high THEN
        low := until;
        high := until;
    END IF;
    RETURN QUERY EXECUTE $query$
        WITH live AS (
            SELECT p.bundle_id AS app,
                   EXISTS (
                       SELECT 1 FROM @schema@.push_attempts AS q
                       WHERE q.kind = 'start' AND q.outcome = 'delivered' AND q.activity_key = p.activity_key
                         AND q.order_id = p.order_id AND q.attempted_at >= $1 AND q.attempted_at <= p.attempted_at
                         AND (q.attempted_at, q.id) < (p.attempted_at, p.id)
                   ) AS duplicate
            FROM @schema@.push_attempts AS p
            WHERE p.kind = 'start' AND p.outcome = 'delivered'
              AND ((p.attempted_at >= $1 AND p.attempted_at < $3) OR (p.attempted_at >= $4 AND p.attempted_at < $2))
        ),
        counts AS (
            SELECT app, count(*) AS starts, count(*) FILTER (WHERE duplicate) AS duplicates FROM live GROUP BY 1
            UNION ALL
            SELECT r.app, sum(r.starts), 0 FROM @schema@.report_duplicate_starts_rollup AS r
            WHERE r.hour >= $3 AND r.hour < $4 GROUP BY 1
            UNION ALL
            SELECT r.app, 0, count(*) FROM @schema@.report_repeat_starts_rollup AS r
            WHERE r.attempted_at >= $3 AND r.attempted_at < $4 AND r.previous_at >= $1 GROUP BY 1
        )
        SELECT app, sum(starts)::bigint, (sum(starts) - sum(duplicates))::bigint, sum(duplicates)::bigint
        FROM counts GROUP BY 1
    $query$ USING since, until, low, high;
END
$$
$definition$);

REVOKE EXECUTE ON FUNCTION report_live_activity_timings(timestamptz, timestamptz, timestamptz),
    report_live_alerts_per_activity(timestamptz, timestamptz, timestamptz), report_live_failed_pushes(timestamptz, timestamptz),
    report_timings_by_hour(text, timestamptz, timestamptz), report_rollup_activity_hours(timestamptz, integer)
    FROM PUBLIC;

DROP FUNCTION migration_123_define(text);
