-- Rollups for every report over history: activity-timings, activity-timings-by-app, alerts-per-activity,
-- failed-pushes and duplicate-starts read what can no longer change from tables written once, and only the
-- rest from the history tables.
--
-- Why: those reports read every row of their window (at 10M attempts in 30 days: 1–2.6 s for a day, 1.2–8.6 s
-- for a week), growing with the history. Push outcomes already read closed hours from a rollup (sql/114).
--
-- When a row is final: an activity's rows (its timings, its alerts, the pushes given up to it) once the
-- activity is final (ended, expired or failed): nothing is pushed to it again. The upkeep the workers' rounds
-- already run (report_rollup_push_outcomes, sql/114 and 122, every five minutes) calls
-- report_rollup_activities, which takes the activities created since its last bound up to five minutes ago
-- (by the database's clock, so that no transaction still writing one is missed), and those pending: the
-- final ones are rolled up, the live ones become (or stay) pending in report_activities_pending. So at any
-- time every activity created before report_rollups 'activities'.complete_until is rolled up or pending, and
-- a window's live part is its pending activities and those created since the bound: the activities still
-- live and the last minutes. Duplicate starts read attempts alone, which never change: their hours are
-- final five minutes after they close (report_rollups 'start_hours').
--
-- What is rolled up:
--   report_activity_timings_rollup       the rows of report_activity_timings, per activity
--   report_alerts_per_activity_rollup    the rows of report_alerts_per_activity, with the activity's created_at
--   report_failed_pushes_rollup          the rows of report_failed_pushes of the activities rolled up (a push to
--                                        no activity row is final at once)
--   report_activity_timings_by_app_rollup  per hour of creation and app: counts, the longest end, and histograms
--                                        of first_update_s and end_s (report_timing_bucket); rows of one hour add
--                                        up, and become one once the hour holds no pending activity
--   report_duplicate_starts_rollup       per hour and app: start pushes accepted
--   report_repeat_starts_rollup          each accepted start that had an earlier accepted start for the same
--                                        activity, with that earlier start's time (rare)
-- The window functions read the window's rolled-up rows from these tables and the rest live, in one snapshot,
-- and return what the view would say.
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
ALTER TABLE report_activity_timings_rollup ADD PRIMARY KEY (order_id, activity_key);
CREATE INDEX report_activity_timings_rollup_created ON report_activity_timings_rollup (created_at);
COMMENT ON TABLE report_activity_timings_rollup IS
    'report_activity_timings of each activity rolled up: final (ended, expired or failed) when a round saw it.';

CREATE TABLE report_alerts_per_activity_rollup (
    created_at timestamptz NOT NULL,
    LIKE report_alerts_per_activity,
    PRIMARY KEY (order_id, activity_key)
);
CREATE INDEX report_alerts_per_activity_rollup_created ON report_alerts_per_activity_rollup (created_at);
COMMENT ON TABLE report_alerts_per_activity_rollup IS
    'report_alerts_per_activity of each activity rolled up, with its creation time.';

CREATE TABLE report_failed_pushes_rollup AS SELECT * FROM report_failed_pushes WITH NO DATA;
ALTER TABLE report_failed_pushes_rollup ALTER COLUMN attempted_at SET NOT NULL;
CREATE INDEX report_failed_pushes_rollup_attempted ON report_failed_pushes_rollup (attempted_at);
COMMENT ON TABLE report_failed_pushes_rollup IS
    'report_failed_pushes of the pushes given up to the activities rolled up (and of pushes to no activity row, by time).';

-- Several rows per hour and app while activities created in the hour end in different rounds; one once the
-- hour holds no activity left to roll up.
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
    end_counts           bigint[] NOT NULL
);
CREATE INDEX report_activity_timings_by_app_rollup_hour ON report_activity_timings_by_app_rollup (hour);
COMMENT ON TABLE report_activity_timings_by_app_rollup IS
    'Per hour of creation and app, of the activities rolled up: the counts of report_activity_timings_by_app, the longest end_s, and histograms (report_timing_bucket, ascending) of first_update_s and end_s. Rows of one hour and app add up.';

-- The activities not rolled up although created before report_rollups 'activities'.complete_until: those
-- still live when the last round saw them.
CREATE TABLE report_activities_pending (
    order_id     text COLLATE "C" NOT NULL,
    activity_key text COLLATE "C" NOT NULL,
    created_at   timestamptz NOT NULL,
    PRIMARY KEY (order_id, activity_key)
);
CREATE INDEX report_activities_pending_created ON report_activities_pending (created_at);
COMMENT ON TABLE report_activities_pending IS
    'Activities created before report_rollups ''activities''.complete_until and not rolled up: live at the last round.';

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

-- The live readers, the owner's alone, for a set of activities given by key: each activity's row from all
-- of its attempts and decisions (none is older than the activity), found through the activity's indexes.
SELECT migration_123_define($definition$
CREATE FUNCTION @schema@.report_live_activity_timings(order_ids text[], activity_keys text[])
RETURNS SETOF @schema@.report_activity_timings
LANGUAGE sql STABLE SET search_path = pg_catalog, @schema@, pg_temp SET work_mem = '64MB' SET jit = off AS $$
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
    ) AS f
$$
$definition$);

SELECT migration_123_define($definition$
CREATE FUNCTION @schema@.report_live_alerts_per_activity(order_ids text[], activity_keys text[])
RETURNS SETOF @schema@.report_alerts_per_activity_rollup
LANGUAGE sql STABLE SET search_path = pg_catalog, @schema@, pg_temp SET work_mem = '64MB' SET jit = off AS $$
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
        WHERE tl.order_id = a.order_id AND tl.at >= a.created_at AND d.activity_key = a.activity_key
    ) AS t
    CROSS JOIN LATERAL (
        SELECT count(*) FILTER (WHERE q.outcome = 'delivered')                     AS delivered,
               count(*) FILTER (WHERE q.outcome = 'delivered' AND q.priority = 10) AS high_priority_delivered
        FROM @schema@.push_attempts AS q
        WHERE q.order_id = a.order_id AND q.activity_key = a.activity_key AND q.attempted_at >= a.created_at
    ) AS p
$$
$definition$);

-- The pushes given up in [since, until): `scope` 'keys' those to the activities given; 'new' those to no
-- activity created before `rolled_until` (the activities created since, and pushes to no activity row).
SELECT migration_123_define($definition$
CREATE FUNCTION @schema@.report_live_failed_pushes(scope text, since timestamptz, until timestamptz,
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
            WHERE tl.order_id = p.order_id AND tl.at = p.attempted_at
              AND tl.kind = 'outcome' AND tl.codes && ARRAY['push_dropped', 'token_gone']
              AND d.activity_key = p.activity_key AND d.code IN ('push_dropped', 'token_gone')
            ORDER BY tl.id + 0, d.position
            LIMIT 1
        ) AS t ON true
        LEFT JOIN @schema@.activities AS a ON a.order_id = p.order_id AND a.activity_key = p.activity_key
        LEFT JOIN LATERAL (
            SELECT min(q.attempted_at) AS recovered_at FROM @schema@.push_attempts AS q
            WHERE q.order_id = p.order_id AND q.activity_key = p.activity_key AND q.id > p.id
              AND q.attempted_at >= p.attempted_at AND q.outcome = 'delivered'
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

-- Per hour of creation and app, the counts and histograms of the given rows of report_activity_timings.
SELECT migration_123_define($definition$
CREATE FUNCTION @schema@.report_timings_by_hour(timings @schema@.report_activity_timings_rollup[])
RETURNS SETOF @schema@.report_activity_timings_by_app_rollup
LANGUAGE sql STABLE SET search_path = pg_catalog, @schema@, pg_temp SET work_mem = '64MB' SET jit = off AS $$
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
$$
$definition$);

-- Rows of the timings rollup added up, per `hour` (an hour or a day) and app.
SELECT migration_123_define($definition$
CREATE FUNCTION @schema@.report_timings_merge(parts @schema@.report_activity_timings_by_app_rollup[])
RETURNS SETOF @schema@.report_activity_timings_by_app_rollup
LANGUAGE sql STABLE SET search_path = pg_catalog, @schema@, pg_temp SET work_mem = '64MB' SET jit = off AS $$
    WITH h AS MATERIALIZED (SELECT * FROM unnest(parts)),
    d AS (
        SELECT hour, app, sum(activities)::bigint AS activities, sum(with_update)::bigint AS with_update,
               sum(ended)::bigint AS ended, max(max_end_s) AS max_end_s
        FROM h GROUP BY 1, 2
    ),
    f AS (
        SELECT x.hour, x.app, array_agg(x.bucket ORDER BY x.bucket) AS buckets, array_agg(x.n ORDER BY x.bucket) AS counts
        FROM (SELECT h.hour, h.app, u.bucket, sum(u.n)::bigint AS n
              FROM h CROSS JOIN LATERAL unnest(h.first_update_buckets, h.first_update_counts) AS u(bucket, n)
              GROUP BY 1, 2, 3) AS x
        GROUP BY 1, 2
    ),
    e AS (
        SELECT x.hour, x.app, array_agg(x.bucket ORDER BY x.bucket) AS buckets, array_agg(x.n ORDER BY x.bucket) AS counts
        FROM (SELECT h.hour, h.app, u.bucket, sum(u.n)::bigint AS n
              FROM h CROSS JOIN LATERAL unnest(h.end_buckets, h.end_counts) AS u(bucket, n)
              GROUP BY 1, 2, 3) AS x
        GROUP BY 1, 2
    )
    SELECT d.hour, d.app, d.activities, d.with_update, d.ended, d.max_end_s,
           coalesce(f.buckets, '{}'), coalesce(f.counts, '{}'), coalesce(e.buckets, '{}'), coalesce(e.counts, '{}')
    FROM d
    LEFT JOIN f ON f.hour = d.hour AND f.app = d.app
    LEFT JOIN e ON e.hour = d.hour AND e.app = d.app
$$
$definition$);

-- The activities created in [since, until) that are not rolled up: those pending, and those created since
-- the rollup's bound. Read in the caller's snapshot, with the rollup tables.
SELECT migration_123_define($definition$
CREATE FUNCTION @schema@.report_unrolled_activities(since timestamptz, until timestamptz, rolled_until timestamptz,
                                                    OUT order_ids text[], OUT activity_keys text[])
LANGUAGE sql STABLE SET search_path = pg_catalog, @schema@, pg_temp AS $$
    SELECT coalesce(array_agg(u.order_id), '{}'), coalesce(array_agg(u.activity_key), '{}')
    FROM (
        SELECT p.order_id, p.activity_key FROM @schema@.report_activities_pending AS p
        WHERE p.created_at >= since AND p.created_at < until
        UNION ALL
        SELECT a.order_id, a.activity_key FROM @schema@.activities AS a
        WHERE a.created_at >= greatest(since, rolled_until) AND a.created_at < until
    ) AS u
$$
$definition$);

-- One round: rolls up every activity final (ended, expired, failed) among those pending and those created in
-- the next at most max_hours up to five minutes before `at` (by the database's clock, never ahead of it),
-- with the pushes given up to them; the others become pending. Then the hours of duplicate starts closed five
-- minutes ago. Returns the activities rolled up.
SELECT migration_123_define($definition$
CREATE FUNCTION @schema@.report_rollup_activities(at timestamptz, max_hours integer) RETURNS integer
LANGUAGE plpgsql SET search_path = pg_catalog, @schema@, pg_temp SET work_mem = '64MB' SET jit = off AS $$
DECLARE
    bound timestamptz := least(at, now()) - interval '5 minutes';
    done timestamptz;
    upto timestamptz;
    final_orders text[];
    final_keys text[];
    live_orders text[];
    live_keys text[];
    live_created timestamptz[];
    whole_until timestamptz;
    hours_done timestamptz;
    hours_upto timestamptz;
BEGIN
    SELECT complete_until INTO done FROM @schema@.report_rollups WHERE name = 'activities' FOR UPDATE;
    IF done IS NULL THEN
        done := least((SELECT min(created_at) FROM @schema@.activities),
                      (SELECT min(attempted_at) FROM @schema@.push_attempts), bound);
        INSERT INTO @schema@.report_rollups VALUES ('activities', done, done);
    END IF;
    upto := greatest(done, least(bound, done + make_interval(hours => max_hours)));
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
    WITH rolled AS (
        INSERT INTO @schema@.report_activity_timings_rollup
        SELECT * FROM @schema@.report_live_activity_timings(final_orders, final_keys)
        RETURNING *
    )
    INSERT INTO @schema@.report_activity_timings_by_app_rollup
    SELECT * FROM @schema@.report_timings_by_hour(ARRAY(SELECT ROW(r.*)::@schema@.report_activity_timings_rollup FROM rolled AS r));
    INSERT INTO @schema@.report_alerts_per_activity_rollup
    SELECT * FROM @schema@.report_live_alerts_per_activity(final_orders, final_keys);
    INSERT INTO @schema@.report_failed_pushes_rollup
    SELECT * FROM @schema@.report_live_failed_pushes('keys', '-infinity', 'infinity', final_orders, final_keys, NULL);
    -- Pushes given up to no activity row are final at once.
    INSERT INTO @schema@.report_failed_pushes_rollup
    SELECT * FROM @schema@.report_live_failed_pushes('new', done, upto, NULL, NULL, 'infinity');
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

    -- Duplicate starts read attempts alone, which never change: an hour is final once closed five minutes.
    SELECT complete_until INTO hours_done FROM @schema@.report_rollups WHERE name = 'start_hours' FOR UPDATE;
    IF hours_done IS NULL THEN
        hours_done := date_trunc('hour', least((SELECT min(attempted_at) FROM @schema@.push_attempts), bound), 'UTC');
        INSERT INTO @schema@.report_rollups VALUES ('start_hours', hours_done, hours_done);
    END IF;
    hours_upto := least(date_trunc('hour', bound, 'UTC'), hours_done + make_interval(hours => max_hours));
    IF hours_upto > hours_done THEN
        INSERT INTO @schema@.report_duplicate_starts_rollup
        SELECT date_trunc('hour', p.attempted_at, 'UTC'), p.bundle_id, count(*)
        FROM @schema@.push_attempts AS p
        WHERE p.kind = 'start' AND p.outcome = 'delivered' AND p.attempted_at >= hours_done AND p.attempted_at < hours_upto
        GROUP BY 1, 2;
        -- An activity's attempts are never older than the activity: the earlier start is looked for from its
        -- creation.
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
        WHERE s.kind = 'start' AND s.outcome = 'delivered' AND s.attempted_at >= hours_done
          AND s.attempted_at < hours_upto AND e.previous_at IS NOT NULL;
        UPDATE @schema@.report_rollups SET complete_until = hours_upto WHERE name = 'start_hours';
    END IF;
    RETURN cardinality(final_orders);
END
$$
$definition$);

-- The outcomes rollup (sql/122), which the workers' rounds call, keeps the activity rollups too. It still
-- returns the hours of push outcomes rolled up.
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
    PERFORM @schema@.report_rollup_activities(at, max_hours);
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

-- The window functions: the rolled-up rows of the window from the rollups, the rest live (the activities
-- pending and those created since the rollup's bound), in one snapshot.
SELECT migration_123_define($definition$
CREATE OR REPLACE FUNCTION @schema@.report_activity_timings(since timestamptz, until timestamptz)
RETURNS SETOF @schema@.report_activity_timings
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, @schema@, pg_temp
SET work_mem = '64MB' SET jit = off AS $$
DECLARE
    rolled_until timestamptz;
    live record;
BEGIN
    SELECT complete_until INTO rolled_until FROM @schema@.report_rollups WHERE name = 'activities';
    live := @schema@.report_unrolled_activities(since, until, coalesce(rolled_until, '-infinity'));
    RETURN QUERY SELECT r.* FROM @schema@.report_activity_timings_rollup AS r
                 WHERE r.created_at >= since AND r.created_at < until;
    RETURN QUERY SELECT * FROM @schema@.report_live_activity_timings(live.order_ids, live.activity_keys);
END
$$
$definition$);

SELECT migration_123_define($definition$
CREATE OR REPLACE FUNCTION @schema@.report_alerts_per_activity(since timestamptz, until timestamptz)
RETURNS SETOF @schema@.report_alerts_per_activity
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, @schema@, pg_temp
SET work_mem = '64MB' SET jit = off AS $$
DECLARE
    rolled_until timestamptz;
    live record;
BEGIN
    SELECT complete_until INTO rolled_until FROM @schema@.report_rollups WHERE name = 'activities';
    live := @schema@.report_unrolled_activities(since, until, coalesce(rolled_until, '-infinity'));
    RETURN QUERY
        SELECT r.order_id, r.activity_key, r.app, r.state, r.alert_count, r.alerts_planned, r.eta_slip_alerts,
               r.alerts_held_back, r.budget_downgrades, r.pushes_delivered, r.high_priority_delivered, r.first_alert_at,
               r.last_alert_at, r.updated_at
        FROM @schema@.report_alerts_per_activity_rollup AS r
        WHERE r.created_at >= since AND r.created_at < until
        UNION ALL
        SELECT r.order_id, r.activity_key, r.app, r.state, r.alert_count, r.alerts_planned, r.eta_slip_alerts,
               r.alerts_held_back, r.budget_downgrades, r.pushes_delivered, r.high_priority_delivered, r.first_alert_at,
               r.last_alert_at, r.updated_at
        FROM @schema@.report_live_alerts_per_activity(live.order_ids, live.activity_keys) AS r;
END
$$
$definition$);

-- A push given up is rolled up with its activity: read live are those to the activities pending, and those
-- to no activity created before the rollup's bound.
SELECT migration_123_define($definition$
CREATE OR REPLACE FUNCTION @schema@.report_failed_pushes(since timestamptz, until timestamptz)
RETURNS SETOF @schema@.report_failed_pushes
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, @schema@, pg_temp
SET work_mem = '64MB' SET jit = off AS $$
DECLARE
    rolled_until timestamptz;
    pending_orders text[];
    pending_keys text[];
BEGIN
    SELECT complete_until INTO rolled_until FROM @schema@.report_rollups WHERE name = 'activities';
    rolled_until := coalesce(rolled_until, '-infinity');
    SELECT coalesce(array_agg(p.order_id), '{}'), coalesce(array_agg(p.activity_key), '{}')
    INTO pending_orders, pending_keys
    FROM @schema@.report_activities_pending AS p WHERE p.created_at < until;
    RETURN QUERY SELECT r.* FROM @schema@.report_failed_pushes_rollup AS r
                 WHERE r.attempted_at >= since AND r.attempted_at < until;
    RETURN QUERY SELECT * FROM @schema@.report_live_failed_pushes('keys', since, until, pending_orders, pending_keys,
                                                                 rolled_until);
    RETURN QUERY SELECT * FROM @schema@.report_live_failed_pushes('new', greatest(since, rolled_until), until, NULL,
                                                                 NULL, rolled_until);
END
$$
$definition$);

-- Whole hours of the window from the hourly rows of the activities rolled up; the window's cut hours from
-- their rows; the activities not rolled up live.
SELECT migration_123_define($definition$
CREATE OR REPLACE FUNCTION @schema@.report_activity_timings_by_app(since timestamptz, until timestamptz)
RETURNS SETOF @schema@.report_activity_timings_by_app
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, @schema@, pg_temp
SET work_mem = '64MB' SET jit = off AS $$
DECLARE
    rolled_until timestamptz;
    live record;
    low timestamptz;
    high timestamptz;
BEGIN
    IF since >= until THEN
        RETURN;
    END IF;
    SELECT complete_until INTO rolled_until FROM @schema@.report_rollups WHERE name = 'activities';
    live := @schema@.report_unrolled_activities(since, until, coalesce(rolled_until, '-infinity'));
    low := date_trunc('hour', since, 'UTC')
           + CASE WHEN since > date_trunc('hour', since, 'UTC') THEN interval '1 hour' ELSE interval '0' END;
    high := date_trunc('hour', until, 'UTC');
    IF low >= high OR NOT isfinite(low) OR NOT isfinite(high) THEN
        low := until;
        high := until;
    END IF;
    RETURN QUERY
        SELECT m.hour, m.app, m.activities, m.with_update, m.ended,
               @schema@.report_timing_quantile(m.first_update_buckets, m.first_update_counts, 0.5),
               @schema@.report_timing_quantile(m.first_update_buckets, m.first_update_counts, 0.95),
               @schema@.report_timing_quantile(m.end_buckets, m.end_counts, 0.5),
               @schema@.report_timing_quantile(m.end_buckets, m.end_counts, 0.95),
               m.max_end_s
        FROM @schema@.report_timings_merge(ARRAY(
            SELECT ROW(date_trunc('day', h.hour, 'UTC'), h.app, h.activities, h.with_update, h.ended, h.max_end_s,
                       h.first_update_buckets, h.first_update_counts, h.end_buckets,
                       h.end_counts)::@schema@.report_activity_timings_by_app_rollup
            FROM (
                SELECT * FROM @schema@.report_activity_timings_by_app_rollup AS r
                WHERE r.hour >= low AND r.hour < high
                UNION ALL
                SELECT * FROM @schema@.report_timings_by_hour(ARRAY(
                    SELECT r FROM @schema@.report_activity_timings_rollup AS r
                    WHERE (r.created_at >= since AND r.created_at < low) OR (r.created_at >= high AND r.created_at < until)
                    UNION ALL
                    SELECT ROW(l.*)::@schema@.report_activity_timings_rollup
                    FROM @schema@.report_live_activity_timings(live.order_ids, live.activity_keys) AS l))
            ) AS h)) AS m;
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
    FROM @schema@.report_rollups WHERE name = 'start_hours';
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

REVOKE EXECUTE ON FUNCTION report_live_activity_timings(text[], text[]), report_live_alerts_per_activity(text[], text[]),
    report_live_failed_pushes(text, timestamptz, timestamptz, text[], text[], timestamptz),
    report_timings_by_hour(report_activity_timings_rollup[]), report_timings_merge(report_activity_timings_by_app_rollup[]),
    report_unrolled_activities(timestamptz, timestamptz, timestamptz), report_rollup_activities(timestamptz, integer)
    FROM PUBLIC;

DROP FUNCTION migration_123_define(text);
