-- Roles by job, and functions that cannot be redirected (docs/operations.md, Roles and privileges).
--
-- Why: the report functions were SECURITY DEFINER with `SET search_path FROM CURRENT` and unqualified
-- table names. PostgreSQL searches the caller's temporary schema first for tables and views unless the
-- path names pg_temp, so a reporting login could create a temporary view named push_attempts that calls
-- its own temporary function, call report_push_outcomes_hourly, and have that function run as the schema
-- owner. Every function of the schema is defined again below:
--   * its search_path is pinned to pg_catalog, the schema, then pg_temp (last, so that a temporary object
--     never hides one of ours), and every table, view, type and function it names is schema-qualified;
--   * the report functions stay SECURITY DEFINER: the reporting role may read the report views and call
--     the report functions, never the tables behind them (which hold tokens, payloads and bodies);
--   * the upkeep the workers run (day partitions, retention, the outcomes rollup) becomes SECURITY
--     DEFINER as well, so the worker role needs no DDL: it may EXECUTE those four functions and nothing
--     else of the maintenance kind.
--
-- The roles, which an administrator creates once per server (roles are cluster-wide), before migrating:
--   the owner (whoever runs `livedelivery migrate`): owns the schema and everything in it, runs DDL;
--   livedelivery_worker (NOLOGIN): the DML the worker's statements need, granted below; the workers'
--     logins are its members;
--   livedelivery_reporting (NOLOGIN, sql/090): the report views and functions; BI logins are its members.
-- None needs to be a superuser. This migration creates livedelivery_worker only when the migrating user
-- may create roles; otherwise it must exist (the error says so).
--
-- The schema is the migration's current schema (public unless the connection's search_path says
-- otherwise): the definitions below write @schema@ where it goes, and are created through
-- migration_117_define, which puts the quoted schema name there (a helper of this migration only:
-- it is dropped before the transaction commits).

DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'livedelivery_worker') THEN
        BEGIN
            CREATE ROLE livedelivery_worker NOLOGIN;
        EXCEPTION
            WHEN duplicate_object OR unique_violation THEN
                NULL; -- another database's migration created it meanwhile
            WHEN insufficient_privilege THEN
                RAISE EXCEPTION 'the role livedelivery_worker does not exist and % may not create roles: an administrator creates it once per server (CREATE ROLE livedelivery_worker NOLOGIN), then migrate again', current_user;
        END;
    END IF;
    IF current_schema() ~ '[''$]' THEN
        RAISE EXCEPTION 'the schema % has a quote or a dollar sign in its name; migrate into a schema without them', current_schema();
    END IF;
END
$$;

CREATE FUNCTION migration_117_define(definition text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE replace(definition, '@schema@', quote_ident(current_schema()));
END
$$;

-- sql/112: a day partition of one history table. The owner's (migrate, and the upkeep below).
SELECT migration_117_define($definition$
CREATE OR REPLACE FUNCTION @schema@.history_partition_create(parent regclass, day date) RETURNS text
LANGUAGE plpgsql SET search_path = pg_catalog, @schema@, pg_temp AS $$
DECLARE
    base text := (SELECT c.relname FROM pg_catalog.pg_class AS c WHERE c.oid = parent);
    part text := base || '_p' || to_char(day, 'YYYYMMDD');
    column_name text := CASE base WHEN 'push_attempts' THEN 'attempted_at' WHEN 'timeline' THEN 'at'
                                  WHEN 'inbox' THEN 'occurred_at' END;
    low timestamptz := (day::timestamp AT TIME ZONE 'UTC');
    high timestamptz := ((day + 1)::timestamp AT TIME ZONE 'UTC');
BEGIN
    IF column_name IS NULL OR parent <> ('@schema@.' || quote_ident(base))::regclass THEN
        RAISE EXCEPTION 'history_partition_create: % is not a history table', parent;
    END IF;
    IF to_regclass('@schema@.' || quote_ident(part)) IS NOT NULL THEN
        RETURN NULL;
    END IF;
    EXECUTE format('CREATE TABLE @schema@.%I (LIKE @schema@.%I INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING STORAGE)',
                   part, base);
    IF to_regclass('@schema@.' || quote_ident(base || '_default')) IS NOT NULL THEN
        EXECUTE format('WITH moved AS (DELETE FROM @schema@.%I WHERE %I >= $1 AND %I < $2 RETURNING *) '
                       'INSERT INTO @schema@.%I SELECT * FROM moved', base || '_default', column_name, column_name, part)
            USING low, high;
    END IF;
    EXECUTE format('ALTER TABLE @schema@.%I ATTACH PARTITION @schema@.%I FOR VALUES FROM (%L) TO (%L)',
                   base, part, low, high);
    RETURN part;
END
$$
$definition$);

SELECT migration_117_define($definition$
CREATE OR REPLACE FUNCTION @schema@.history_partitions_create(first_day date, last_day date) RETURNS SETOF text
LANGUAGE sql SET search_path = pg_catalog, @schema@, pg_temp AS $$
    SELECT p
    FROM generate_series(first_day, last_day, interval '1 day') AS d,
         unnest(ARRAY['@schema@.push_attempts', '@schema@.timeline', '@schema@.inbox']::regclass[]) AS t,
         @schema@.history_partition_create(t, d::date) AS p
    WHERE p IS NOT NULL
$$
$definition$);

-- What migrate and the workers run: today's partitions and ahead_days more.
SELECT migration_117_define($definition$
CREATE OR REPLACE FUNCTION @schema@.history_partitions_upkeep(at timestamptz, ahead_days integer) RETURNS SETOF text
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, @schema@, pg_temp AS $$
    SELECT @schema@.history_partitions_create((at AT TIME ZONE 'UTC')::date, (at AT TIME ZONE 'UTC')::date + ahead_days)
$$
$definition$);

-- Retention (sql/112).
SELECT migration_117_define($definition$
CREATE OR REPLACE FUNCTION @schema@.history_partitions_drop_expired(at timestamptz, keep_days integer)
RETURNS TABLE (table_name text, partitions_dropped text[], default_rows_deleted bigint)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, @schema@, pg_temp AS $$
DECLARE
    cutoff timestamptz := at - make_interval(days => keep_days);
    t record;
    part text;
    deleted bigint;
BEGIN
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

-- The outcomes rollup and its retention (sql/114).
SELECT migration_117_define($definition$
CREATE OR REPLACE FUNCTION @schema@.report_rollup_push_outcomes(at timestamptz, max_hours integer) RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, @schema@, pg_temp AS $$
DECLARE
    done timestamptz;
    first_hour timestamptz;
    -- Never ahead of the database's own clock: an hour is closed when the database says so.
    last_end timestamptz := date_trunc('hour', least(at, now()) - interval '5 minutes');
    upto timestamptz;
BEGIN
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

SELECT migration_117_define($definition$
CREATE OR REPLACE FUNCTION @schema@.report_rollups_drop_expired(at timestamptz, keep_days integer) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, @schema@, pg_temp AS $$
DECLARE
    cutoff timestamptz := date_trunc('hour', at - make_interval(days => keep_days));
    deleted bigint;
BEGIN
    DELETE FROM @schema@.report_push_outcomes_rollup WHERE hour < cutoff;
    GET DIAGNOSTICS deleted = ROW_COUNT;
    UPDATE @schema@.report_rollups SET complete_from = least(greatest(complete_from, cutoff), complete_until);
    RETURN deleted;
END
$$
$definition$);

-- The report functions over a time window (sql/113, 114, 115): the same queries, qualified.
SELECT migration_117_define($definition$
CREATE OR REPLACE FUNCTION @schema@.report_push_outcomes_hourly(since timestamptz, until timestamptz)
RETURNS SETOF @schema@.report_push_outcomes_hourly
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, @schema@, pg_temp SET jit = off AS $$
DECLARE
    rolled_from timestamptz;
    rolled_until timestamptz;
    first_whole timestamptz := date_trunc('hour', since)
                               + CASE WHEN since > date_trunc('hour', since) THEN interval '1 hour' ELSE interval '0' END;
    low timestamptz;
    high timestamptz;
BEGIN
    SELECT complete_from, complete_until INTO rolled_from, rolled_until
    FROM @schema@.report_rollups WHERE name = 'push_outcomes_hourly';
    -- The rolled-up whole hours inside the window: [low, high).
    low := greatest(first_whole, coalesce(rolled_from, 'infinity'));
    high := least(date_trunc('hour', until), coalesce(rolled_until, '-infinity'));
    IF low >= high THEN
        low := until;
        high := until;
    END IF;
    RETURN QUERY
        SELECT r.* FROM @schema@.report_push_outcomes_rollup AS r WHERE r.hour >= low AND r.hour < high
        UNION ALL
        SELECT date_trunc('hour', p.attempted_at), p.bundle_id, p.outcome, coalesce(p.reason, ''), p.status,
               count(*), count(DISTINCT (p.order_id, p.activity_key)), round(avg(p.latency_ms)::numeric, 1),
               round((percentile_cont(0.95) WITHIN GROUP (ORDER BY p.latency_ms))::numeric, 1)
        FROM @schema@.push_attempts AS p
        WHERE (p.attempted_at >= since AND p.attempted_at < low) OR (p.attempted_at >= high AND p.attempted_at < until)
        GROUP BY 1, 2, 3, 4, 5;
END
$$
$definition$);

SELECT migration_117_define($definition$
CREATE OR REPLACE FUNCTION @schema@.report_failed_pushes(since timestamptz, until timestamptz)
RETURNS SETOF @schema@.report_failed_pushes
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, @schema@, pg_temp
SET work_mem = '64MB' SET jit = off AS $$
BEGIN
    RETURN QUERY EXECUTE $query$
        SELECT p.id, p.attempted_at, p.order_id, p.activity_key, p.bundle_id, p.kind, p.priority, p.status, p.outcome,
               coalesce(p.reason, ''), t.code, a.state, r.recovered_at, t.message
        FROM @schema@.push_attempts AS p
        JOIN LATERAL (
            -- The write's row, found through timeline_give_ups (`+ 0`: ordering by the bare id made the
            -- planner walk each partition's (order_id, id) index instead), then the activity's decision.
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

SELECT migration_117_define($definition$
CREATE OR REPLACE FUNCTION @schema@.report_sweeper_actions(since timestamptz, until timestamptz)
RETURNS SETOF @schema@.report_sweeper_actions
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, @schema@, pg_temp
SET work_mem = '64MB' SET jit = off AS $$
BEGIN
    RETURN QUERY EXECUTE $query$
        WITH sweeps AS (
            SELECT t.order_id, t.activity_key, t.at, t.code
            FROM @schema@.timeline_decisions AS t
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
        LEFT JOIN @schema@.activities AS a USING (order_id, activity_key)
        GROUP BY 1, 2, 3
    $query$ USING since, until;
END
$$
$definition$);

SELECT migration_117_define($definition$
CREATE OR REPLACE FUNCTION @schema@.report_duplicate_starts(since timestamptz, until timestamptz)
RETURNS SETOF @schema@.report_duplicate_starts
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, @schema@, pg_temp
SET work_mem = '64MB' SET jit = off AS $$
BEGIN
    RETURN QUERY EXECUTE $query$
        SELECT p.bundle_id, count(*), count(DISTINCT (p.order_id, p.activity_key)),
               count(*) - count(DISTINCT (p.order_id, p.activity_key))
        FROM @schema@.push_attempts AS p
        WHERE p.kind = 'start' AND p.outcome = 'delivered' AND p.attempted_at >= $1 AND p.attempted_at < $2
        GROUP BY 1
    $query$ USING since, until;
END
$$
$definition$);

SELECT migration_117_define($definition$
CREATE OR REPLACE FUNCTION @schema@.report_activity_timings(since timestamptz, until timestamptz)
RETURNS SETOF @schema@.report_activity_timings
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, @schema@, pg_temp
SET work_mem = '64MB' SET jit = off AS $$
BEGIN
    RETURN QUERY EXECUTE $query$
        WITH created AS (
            SELECT * FROM @schema@.activities AS a WHERE a.created_at >= $1 AND a.created_at < $2
        ),
        firsts AS (
            SELECT p.order_id, p.activity_key,
                   min(p.attempted_at) FILTER (WHERE p.outcome = 'delivered')                       AS first_delivered_at,
                   min(p.attempted_at) FILTER (WHERE p.outcome = 'delivered' AND p.kind = 'update') AS first_update_at
            FROM @schema@.push_attempts AS p
            WHERE p.attempted_at >= $1 AND (p.order_id, p.activity_key) IN (SELECT order_id, activity_key FROM created)
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
    $query$ USING since, until;
END
$$
$definition$);

SELECT migration_117_define($definition$
CREATE OR REPLACE FUNCTION @schema@.report_activity_timings_by_app(since timestamptz, until timestamptz)
RETURNS SETOF @schema@.report_activity_timings_by_app
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, @schema@, pg_temp
SET work_mem = '64MB' SET jit = off AS $$
BEGIN
    RETURN QUERY EXECUTE $query$
        SELECT date_trunc('day', t.created_at), t.app, count(*), count(t.first_update_at), count(t.ended_at),
               round((percentile_cont(0.5) WITHIN GROUP (ORDER BY t.first_update_s))::numeric, 3),
               round((percentile_cont(0.95) WITHIN GROUP (ORDER BY t.first_update_s))::numeric, 3),
               round((percentile_cont(0.5) WITHIN GROUP (ORDER BY t.end_s))::numeric, 3),
               round((percentile_cont(0.95) WITHIN GROUP (ORDER BY t.end_s))::numeric, 3),
               max(t.end_s)
        FROM @schema@.report_activity_timings($1, $2) AS t
        GROUP BY 1, 2
    $query$ USING since, until;
END
$$
$definition$);

SELECT migration_117_define($definition$
CREATE OR REPLACE FUNCTION @schema@.report_alerts_per_activity(since timestamptz, until timestamptz)
RETURNS SETOF @schema@.report_alerts_per_activity
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, @schema@, pg_temp
SET work_mem = '64MB' SET jit = off AS $$
BEGIN
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
            WHERE tl.at >= $1 AND tl.order_id IN (SELECT order_id FROM created)
              AND (tl.order_id, tl.activity_key) IN (SELECT order_id, activity_key FROM created)
            GROUP BY tl.order_id, tl.activity_key
        ),
        pushes AS (
            SELECT q.order_id, q.activity_key,
                   count(*) FILTER (WHERE outcome = 'delivered')                   AS delivered,
                   count(*) FILTER (WHERE outcome = 'delivered' AND priority = 10) AS high_priority_delivered
            FROM @schema@.push_attempts AS q
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
$$
$definition$);

-- report_body_json (sql/090) names no table, but is pinned like the rest.
SELECT migration_117_define($definition$
ALTER FUNCTION @schema@.report_body_json(bytea) SET search_path = pg_catalog, @schema@, pg_temp
$definition$);

DROP FUNCTION migration_117_define(text);

-- Nobody but the owner creates objects in the schema (PostgreSQL 15 already says so for a new database's
-- public schema; one upgraded from an older release may still let everyone), and no login of the
-- database may create temporary objects unless granted (the owner keeps TEMP through its ownership).
DO $$
BEGIN
    EXECUTE format('REVOKE CREATE ON SCHEMA %I FROM PUBLIC', current_schema());
    IF pg_has_role(current_user, (SELECT datdba FROM pg_database WHERE datname = current_database()), 'USAGE') THEN
        EXECUTE format('REVOKE TEMPORARY ON DATABASE %I FROM PUBLIC', current_database());
    ELSE
        RAISE NOTICE 'the database is not %''s, so TEMPORARY stays granted to PUBLIC: its owner may revoke it (docs/operations.md, Roles and privileges)', current_user;
    END IF;
END
$$;

-- Maintenance: the workers call the four upkeep functions above, which run as the owner.
REVOKE EXECUTE ON FUNCTION history_partition_create(regclass, date), history_partitions_create(date, date),
    history_partitions_upkeep(timestamptz, integer), history_partitions_drop_expired(timestamptz, integer),
    report_rollup_push_outcomes(timestamptz, integer), report_rollups_drop_expired(timestamptz, integer)
    FROM PUBLIC;

-- The worker role: the DML of the worker's statements and of the admin commands (status, dead-letters,
-- failed-pushes, report), table by table, and nothing else. A table added later is granted by its own
-- migration; the whole test suite runs as a member of this role, so a missing grant fails it.
DO $$
BEGIN
    EXECUTE format('GRANT USAGE ON SCHEMA %I TO livedelivery_worker', current_schema());
END
$$;
GRANT SELECT, INSERT, UPDATE ON orders, activities, push_to_start_tokens, app_pauses TO livedelivery_worker;
GRANT SELECT, INSERT, UPDATE, DELETE ON outbox, dead_letters TO livedelivery_worker;
GRANT SELECT, INSERT ON inbox, push_attempts, timeline TO livedelivery_worker;
GRANT SELECT ON schema_migrations, timeline_decisions TO livedelivery_worker;
GRANT USAGE ON SEQUENCE push_attempts_id_seq, timeline_id_seq, dead_letters_id_seq TO livedelivery_worker;
GRANT EXECUTE ON FUNCTION history_partitions_upkeep(timestamptz, integer),
    history_partitions_drop_expired(timestamptz, integer), report_rollup_push_outcomes(timestamptz, integer),
    report_rollups_drop_expired(timestamptz, integer)
    TO livedelivery_worker;
-- What the reporting role may read, for `livedelivery report` run with the worker's login.
GRANT SELECT ON
    report_activities_by_state, report_order_timeline, report_push_outcomes_hourly, report_alerts_per_activity,
    report_activity_timings, report_activity_timings_by_app, report_sweeper_actions, report_dead_letters,
    report_dead_letters_by_reason, report_failed_pushes, report_duplicate_starts
TO livedelivery_worker;
GRANT EXECUTE ON FUNCTION report_push_outcomes_hourly(timestamptz, timestamptz),
    report_failed_pushes(timestamptz, timestamptz), report_sweeper_actions(timestamptz, timestamptz),
    report_duplicate_starts(timestamptz, timestamptz), report_activity_timings(timestamptz, timestamptz),
    report_activity_timings_by_app(timestamptz, timestamptz), report_alerts_per_activity(timestamptz, timestamptz)
    TO livedelivery_worker;
