-- The report rollups catch up in rounds bounded by rows, whatever the history: a round of the workers' upkeep
-- reads at most a bounded number of attempts, decision rows and activities, however far behind the rollups are.
--
-- Why: a round read up to max_hours of history (the workers ask for 48, the bench for 24): its cost grew with the
-- history's rate. At 30M attempts in 30 days (31.9 GB, more than the machine's memory) the first catch-up round,
-- a day of slices, had not returned after 37 minutes; the workers' upkeep runs that round inside its retention
-- transaction.
--
-- How: report_rollup_activities (sql/124) still reads at most max_hours a round, and now also ends
--   * its slice of attempts and decisions before the (N + 1)th attempt and before the (N + 1)th decision row
--     (timeline rows the reports count) after the slices' bound;
--   * its range of activities before the (N / 5 + 1)th activity created after the activities' bound (an
--     activity has about five attempts);
-- and report_rollup_push_outcomes (sql/123) rolls up whole hours up to the hour of the (N + 1)th attempt after
-- its bound (at least one hour). N is the setting livedelivery.report_rollup_round_rows of the caller's session
-- (ALTER ROLE … SET, or SET), 100,000 when unset: a round then reads about 100,000 attempts, 200,000 decision
-- rows and 20,000 activities at most (about a second each on a 2-core machine, docs/benchmarks.md). Callers
-- held to the upkeep's bounds (sql/122: not the owner) may ask for 1 to 1,000,000. Where each bound falls is
-- found by an index range scan of N rows (push_attempts_time, timeline_report_decisions, activities_created_at).
-- The merge of the hourly timing rows reads only the hours since the previous round's merge, not every hour
-- rolled up.
--
-- Nothing else changes: the same rows are rolled up, a bound only splits a round in more rounds, and the
-- reports read what is not rolled up yet from history meanwhile.
--
-- Privileges: the new helper is the owner's alone, as the other rollup helpers; the functions replaced keep
-- their owner and grants.

DO $$
BEGIN
    IF current_schema() ~ '[''$]' THEN
        RAISE EXCEPTION 'the schema % has a quote or a dollar sign in its name; migrate into a schema without them', current_schema();
    END IF;
END
$$;

CREATE FUNCTION migration_125_define(definition text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE replace(definition, '@schema@', quote_ident(current_schema()));
END
$$;

-- Rows a rollup round reads at most: livedelivery.report_rollup_round_rows, 100,000 when unset; 1 to 1,000,000
-- for a caller held to the upkeep's bounds.
SELECT migration_125_define($definition$
CREATE FUNCTION @schema@.report_rollup_round_rows() RETURNS integer
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, @schema@, pg_temp AS $$
DECLARE
    setting text := nullif(current_setting('livedelivery.report_rollup_round_rows', true), '');
    wanted integer;
BEGIN
    IF setting IS NULL THEN
        RETURN 100000;
    END IF;
    IF setting !~ '^[0-9]{1,9}$' THEN
        RAISE EXCEPTION 'livedelivery.report_rollup_round_rows must be a whole number, not %', setting
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    wanted := setting::integer;
    PERFORM @schema@.upkeep_check_range('report_rollup_activities', 'livedelivery.report_rollup_round_rows', wanted,
                                        1, 1000000);
    RETURN greatest(wanted, 1);
END
$$
$definition$);

-- One round of the activity rollups (sql/124), bounded by rows as well as by max_hours.
SELECT migration_125_define($definition$
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
    merged_until timestamptz;
    row_end timestamptz;
    round_rows integer := @schema@.report_rollup_round_rows();
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

    -- The next slice of attempts and decisions, read once: at most max_hours, and it ends before the
    -- (round_rows + 1)th attempt and before the (round_rows + 1)th decision row (at least a microsecond).
    seen_upto := greatest(seen, least(bound, seen + make_interval(hours => max_hours)));
    IF seen_upto > seen THEN
        SELECT p.attempted_at INTO row_end FROM @schema@.push_attempts AS p
        WHERE p.attempted_at >= seen AND p.attempted_at < seen_upto
        ORDER BY p.attempted_at OFFSET round_rows LIMIT 1;
        IF row_end IS NOT NULL THEN
            seen_upto := greatest(row_end, seen + interval '1 microsecond');
        END IF;
        SELECT tl.at INTO row_end FROM @schema@.timeline AS tl
        WHERE tl.at >= seen AND tl.at < seen_upto
          AND tl.codes && ARRAY['alert', 'alert_eta_slip', 'alert_cap_reached', 'alert_already_sent_for_step',
                                'budget_downgrade', 'push_dropped', 'token_gone']
        ORDER BY tl.at OFFSET round_rows LIMIT 1;
        IF row_end IS NOT NULL THEN
            seen_upto := greatest(row_end, seen + interval '1 microsecond');
        END IF;
        PERFORM @schema@.report_rollup_slice(seen, seen_upto, done);
        UPDATE @schema@.report_rollups SET complete_until = seen_upto WHERE name = 'attempts';
        UPDATE @schema@.report_rollups SET complete_until = greatest(complete_until, date_trunc('hour', seen_upto, 'UTC'))
        WHERE name = 'start_hours';
    END IF;
    IF seen_upto < bound THEN
        RETURN 0;
    END IF;

    -- At most max_hours of activities, ending before the (round_rows / 5 + 1)th activity created (an activity
    -- has about five attempts): a round rolls up a bounded number of them, plus those pending.
    upto := greatest(done, least(seen_upto, done + make_interval(hours => max_hours)));
    SELECT a.created_at INTO row_end FROM @schema@.activities AS a
    WHERE a.created_at >= done AND a.created_at < upto
    ORDER BY a.created_at OFFSET greatest(round_rows / 5, 1) LIMIT 1;
    IF row_end IS NOT NULL THEN
        upto := greatest(row_end, done + interval '1 microsecond');
    END IF;
    -- The hours before this one hold no parts any more (the round before merged them).
    merged_until := date_trunc('hour', least(done, (SELECT min(created_at) FROM @schema@.report_activities_pending)),
                              'UTC');
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
        WHERE r.hour < whole_until AND r.hour >= merged_until
          AND (r.hour, r.app) IN (SELECT hour, app FROM @schema@.report_activity_timings_by_app_rollup
                                  WHERE hour < whole_until AND hour >= merged_until GROUP BY 1, 2 HAVING count(*) > 1)
        RETURNING *
    )
    INSERT INTO @schema@.report_activity_timings_by_app_rollup
    SELECT * FROM @schema@.report_timings_merge(ARRAY(SELECT ROW(p.*)::@schema@.report_activity_timings_by_app_rollup FROM parts AS p));
    RETURN cardinality(final_orders);
END
$$
$definition$);

-- The outcomes rollup (sql/123), which the workers' rounds call: whole hours up to the hour of the (N + 1)th
-- attempt after its bound, at least one. It still returns the hours of push outcomes rolled up.
SELECT migration_125_define($definition$
CREATE OR REPLACE FUNCTION @schema@.report_rollup_push_outcomes(at timestamptz, max_hours integer) RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, @schema@, pg_temp AS $$
DECLARE
    done timestamptz;
    first_hour timestamptz;
    last_end timestamptz;
    upto timestamptz;
    row_hour timestamptz;
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
    SELECT date_trunc('hour', p.attempted_at) INTO row_hour FROM @schema@.push_attempts AS p
    WHERE p.attempted_at >= done AND p.attempted_at < upto
    ORDER BY p.attempted_at OFFSET @schema@.report_rollup_round_rows() LIMIT 1;
    IF row_hour IS NOT NULL THEN
        upto := greatest(row_hour, done + interval '1 hour');
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

REVOKE EXECUTE ON FUNCTION report_rollup_round_rows() FROM PUBLIC;

DROP FUNCTION migration_125_define(text);
