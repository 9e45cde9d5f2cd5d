-- Hourly rollup of push outcomes: report_push_outcomes_hourly(since, until) reads whole past hours from a
-- table of a few rows per hour, and aggregates push_attempts only for the hours not rolled up yet (the
-- current one, and the window's partial first and last hours).
--
-- Why: the busiest dashboard panel aggregates a day of attempts on every refresh. At 100M attempts in
-- 30 days a day is 3.3M rows: seconds of CPU per panel. A closed hour does not change (attempts are
-- recorded as they happen and never updated), so each is aggregated once, exactly (the distinct
-- activities and the 95th percentile too), by the workers' retention round
-- (report_rollup_push_outcomes), five minutes after it closes so that a batch recorded across the hour's
-- end is in it. The rollup holds what the view would have said of that hour; rows written into a
-- rolled-up hour afterwards (by hand) are not in it.

CREATE TABLE report_push_outcomes_rollup AS
SELECT * FROM report_push_outcomes_hourly WITH NO DATA;
-- Its key's text compares as bytes, as every identifier does (sql/110).
ALTER TABLE report_push_outcomes_rollup ALTER COLUMN hour SET NOT NULL,
    ALTER COLUMN outcome TYPE text COLLATE "C", ALTER COLUMN reason TYPE text COLLATE "C";
CREATE UNIQUE INDEX report_push_outcomes_rollup_key ON report_push_outcomes_rollup (hour, app, outcome, reason, status)
    NULLS NOT DISTINCT;
COMMENT ON TABLE report_push_outcomes_rollup IS
    'report_push_outcomes_hourly of the whole hours in [complete_from, complete_until) of report_rollups: one aggregation per hour, made once the hour has closed.';

-- Which hours a rollup holds: every whole hour in [complete_from, complete_until).
CREATE TABLE report_rollups (
    name           text COLLATE "C" PRIMARY KEY,
    complete_from  timestamptz NOT NULL,
    complete_until timestamptz NOT NULL CHECK (complete_until >= complete_from)
);
COMMENT ON TABLE report_rollups IS 'The hours each report rollup holds: [complete_from, complete_until).';

-- Rolls up the hours that closed at least five minutes before `at`, from where it stopped, at most
-- max_hours of them (a first run after the upgrade catches up over several rounds, newest first is not
-- needed: the function reads what is not rolled up from the attempts). Returns the hours rolled up.
CREATE FUNCTION report_rollup_push_outcomes(at timestamptz, max_hours integer) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    done timestamptz;
    first_hour timestamptz;
    -- Never ahead of the database's own clock: an hour is closed when the database says so.
    last_end timestamptz := date_trunc('hour', least(at, now()) - interval '5 minutes');
    upto timestamptz;
BEGIN
    SELECT complete_until INTO done FROM report_rollups WHERE name = 'push_outcomes_hourly' FOR UPDATE;
    IF done IS NULL THEN
        SELECT date_trunc('hour', min(attempted_at)) INTO first_hour FROM push_attempts;
        first_hour := coalesce(first_hour, last_end);
        INSERT INTO report_rollups VALUES ('push_outcomes_hourly', least(first_hour, last_end), least(first_hour, last_end));
        done := least(first_hour, last_end);
    END IF;
    upto := least(last_end, done + make_interval(hours => max_hours));
    IF upto <= done THEN
        RETURN 0;
    END IF;
    INSERT INTO report_push_outcomes_rollup
    SELECT date_trunc('hour', p.attempted_at), p.bundle_id, p.outcome, coalesce(p.reason, ''), p.status, count(*),
           count(DISTINCT (p.order_id, p.activity_key)), round(avg(p.latency_ms)::numeric, 1),
           round((percentile_cont(0.95) WITHIN GROUP (ORDER BY p.latency_ms))::numeric, 1)
    FROM push_attempts AS p
    WHERE p.attempted_at >= done AND p.attempted_at < upto
    GROUP BY 1, 2, 3, 4, 5;
    UPDATE report_rollups SET complete_until = upto WHERE name = 'push_outcomes_hourly';
    RETURN extract(epoch FROM upto - done)::integer / 3600;
END
$$;
COMMENT ON FUNCTION report_rollup_push_outcomes(timestamptz, integer) IS
    'Rolls up push outcomes for the hours closed at least five minutes before `at`, at most max_hours of them; returns how many.';

-- Retention of the rollup follows the attempts' (called by history_partitions_drop_expired's caller).
CREATE FUNCTION report_rollups_drop_expired(at timestamptz, keep_days integer) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    cutoff timestamptz := date_trunc('hour', at - make_interval(days => keep_days));
    deleted bigint;
BEGIN
    DELETE FROM report_push_outcomes_rollup WHERE hour < cutoff;
    GET DIAGNOSTICS deleted = ROW_COUNT;
    UPDATE report_rollups SET complete_from = least(greatest(complete_from, cutoff), complete_until);
    RETURN deleted;
END
$$;

REVOKE EXECUTE ON FUNCTION report_rollup_push_outcomes(timestamptz, integer),
    report_rollups_drop_expired(timestamptz, integer) FROM PUBLIC;

-- The window function now reads whole rolled-up hours from the rollup and the rest from the attempts:
-- [since, until) minus the rolled-up whole hours is at most two ranges, each read through its partitions.
CREATE OR REPLACE FUNCTION report_push_outcomes_hourly(since timestamptz, until timestamptz)
RETURNS SETOF report_push_outcomes_hourly
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path FROM CURRENT SET jit = off AS $$
DECLARE
    rolled_from timestamptz;
    rolled_until timestamptz;
    first_whole timestamptz := date_trunc('hour', since)
                               + CASE WHEN since > date_trunc('hour', since) THEN interval '1 hour' ELSE interval '0' END;
    low timestamptz;
    high timestamptz;
BEGIN
    SELECT complete_from, complete_until INTO rolled_from, rolled_until
    FROM report_rollups WHERE name = 'push_outcomes_hourly';
    -- The rolled-up whole hours inside the window: [low, high).
    low := greatest(first_whole, coalesce(rolled_from, 'infinity'));
    high := least(date_trunc('hour', until), coalesce(rolled_until, '-infinity'));
    IF low >= high THEN
        low := until;
        high := until;
    END IF;
    RETURN QUERY
        SELECT r.* FROM report_push_outcomes_rollup AS r WHERE r.hour >= low AND r.hour < high
        UNION ALL
        SELECT date_trunc('hour', p.attempted_at), p.bundle_id, p.outcome, coalesce(p.reason, ''), p.status,
               count(*), count(DISTINCT (p.order_id, p.activity_key)), round(avg(p.latency_ms)::numeric, 1),
               round((percentile_cont(0.95) WITHIN GROUP (ORDER BY p.latency_ms))::numeric, 1)
        FROM push_attempts AS p
        WHERE (p.attempted_at >= since AND p.attempted_at < low) OR (p.attempted_at >= high AND p.attempted_at < until)
        GROUP BY 1, 2, 3, 4, 5;
END
$$;
