-- Bounds on the upkeep the workers' logins may run (docs/operations.md, Retention).
--
-- Why: the upkeep functions are SECURITY DEFINER (sql/117) so that the worker role needs no DDL. They took
-- their arguments unbounded, so the worker's login could use them as the owner: `at` = 'infinity' with
-- keep_days 0 dropped every day partition of push_attempts, timeline and inbox (the inbox is what
-- de-duplicates events), and ahead_days 20000 created 60,000 tables. A caller that is not the schema's
-- owner (nor a member of the owner's role, nor a superuser) is now held to what a worker ever asks:
--   * `at` within a day before and an hour after the database's clock (a worker's clock is close to it);
--   * ahead_days 0…7 (the workers ask for 2);
--   * keep_days at least 7 (`retention.days` is 0, keeping everything, or at least 7);
--   * max_hours of the outcomes rollup 1…168.
-- Anything else is refused with SQLSTATE 22023 and a message that names the bound. The owner, who may drop the
-- tables anyway, is not bound: tests and benchmarks move the clock through the owner's login.

DO $$
BEGIN
    IF current_schema() ~ '[''$]' THEN
        RAISE EXCEPTION 'the schema % has a quote or a dollar sign in its name; migrate into a schema without them', current_schema();
    END IF;
END
$$;

CREATE FUNCTION migration_122_define(definition text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE replace(definition, '@schema@', quote_ident(current_schema()));
END
$$;

-- Whether the session's login is held to the bounds: it is not the schema's owner, a member of its role, or a
-- superuser (pg_has_role is true for a superuser).
SELECT migration_122_define($definition$
CREATE FUNCTION @schema@.upkeep_caller_bounded() RETURNS boolean
LANGUAGE sql STABLE SET search_path = pg_catalog, @schema@, pg_temp AS $$
    SELECT NOT pg_catalog.pg_has_role(session_user,
        (SELECT n.nspowner FROM pg_catalog.pg_namespace AS n WHERE n.nspname = '@schema@'), 'MEMBER')
$$
$definition$);

SELECT migration_122_define($definition$
CREATE FUNCTION @schema@.upkeep_check_at(at timestamptz, what text) RETURNS void
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, @schema@, pg_temp AS $$
BEGIN
    IF at IS NULL OR NOT isfinite(at) THEN
        RAISE EXCEPTION '%: at must be a finite time, not %', what, coalesce(at::text, 'null')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF @schema@.upkeep_caller_bounded() AND (at > now() + interval '1 hour' OR at < now() - interval '1 day') THEN
        RAISE EXCEPTION '%: at (%) must lie within a day before and an hour after the database''s clock (%) for %',
            what, at, now(), session_user USING ERRCODE = 'invalid_parameter_value';
    END IF;
END
$$
$definition$);

SELECT migration_122_define($definition$
CREATE FUNCTION @schema@.upkeep_check_range(what text, name text, value integer, low integer, high integer)
RETURNS void
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, @schema@, pg_temp AS $$
BEGIN
    IF value IS NULL OR (@schema@.upkeep_caller_bounded() AND (value < low OR value > high)) THEN
        RAISE EXCEPTION '%: % must be % to % for %, not %', what, name, low, high, session_user,
            coalesce(value::text, 'null') USING ERRCODE = 'invalid_parameter_value';
    END IF;
END
$$
$definition$);

SELECT migration_122_define($definition$
CREATE OR REPLACE FUNCTION @schema@.history_partitions_upkeep(at timestamptz, ahead_days integer) RETURNS SETOF text
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, @schema@, pg_temp AS $$
BEGIN
    PERFORM @schema@.upkeep_check_at(at, 'history_partitions_upkeep');
    PERFORM @schema@.upkeep_check_range('history_partitions_upkeep', 'ahead_days', ahead_days, 0, 7);
    RETURN QUERY SELECT @schema@.history_partitions_create(
        (at AT TIME ZONE 'UTC')::date, (at AT TIME ZONE 'UTC')::date + ahead_days);
END
$$
$definition$);

SELECT migration_122_define($definition$
CREATE OR REPLACE FUNCTION @schema@.history_partitions_drop_expired(at timestamptz, keep_days integer)
RETURNS TABLE (table_name text, partitions_dropped text[], default_rows_deleted bigint)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, @schema@, pg_temp AS $$
DECLARE
    cutoff timestamptz;
    t record;
    part text;
    deleted bigint;
BEGIN
    PERFORM @schema@.upkeep_check_at(at, 'history_partitions_drop_expired');
    PERFORM @schema@.upkeep_check_range('history_partitions_drop_expired', 'keep_days', keep_days, 7, 36500);
    cutoff := at - make_interval(days => keep_days);
    FOR t IN SELECT * FROM (VALUES ('push_attempts', 'attempted_at'), ('timeline', 'at'), ('inbox', 'processed_at'))
             AS v(base, column_name)
    LOOP
        table_name := t.base;
        partitions_dropped := '{}';
        FOR part IN
            SELECT c.relname FROM pg_catalog.pg_inherits AS i JOIN pg_catalog.pg_class AS c ON c.oid = i.inhrelid
            WHERE i.inhparent = ('@schema@.' || t.base)::regclass AND c.relname ~ ('^' || t.base || '_p[0-9]{8}$')
              AND ((to_date(right(c.relname, 8), 'YYYYMMDD') + 1)::timestamp AT TIME ZONE 'UTC') <= cutoff
            ORDER BY c.relname
        LOOP
            EXECUTE format('DROP TABLE @schema@.%I', part);
            partitions_dropped := partitions_dropped || part;
        END LOOP;
        EXECUTE format('DELETE FROM @schema@.%I WHERE %I < $1', t.base || '_default', t.column_name) USING cutoff;
        GET DIAGNOSTICS deleted = ROW_COUNT;
        default_rows_deleted := deleted;
        RETURN NEXT;
    END LOOP;
END
$$
$definition$);

SELECT migration_122_define($definition$
CREATE OR REPLACE FUNCTION @schema@.report_rollups_drop_expired(at timestamptz, keep_days integer) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, @schema@, pg_temp AS $$
DECLARE
    cutoff timestamptz;
    deleted bigint;
BEGIN
    PERFORM @schema@.upkeep_check_at(at, 'report_rollups_drop_expired');
    PERFORM @schema@.upkeep_check_range('report_rollups_drop_expired', 'keep_days', keep_days, 7, 36500);
    cutoff := date_trunc('hour', at - make_interval(days => keep_days));
    DELETE FROM @schema@.report_push_outcomes_rollup WHERE hour < cutoff;
    GET DIAGNOSTICS deleted = ROW_COUNT;
    UPDATE @schema@.report_rollups SET complete_from = least(greatest(complete_from, cutoff), complete_until);
    RETURN deleted;
END
$$
$definition$);

-- The rollup already never passes the database's clock; its step per call is bounded too.
SELECT migration_122_define($definition$
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

REVOKE ALL ON FUNCTION upkeep_caller_bounded(), upkeep_check_at(timestamptz, text),
    upkeep_check_range(text, text, integer, integer, integer) FROM PUBLIC;

DROP FUNCTION migration_122_define(text);
