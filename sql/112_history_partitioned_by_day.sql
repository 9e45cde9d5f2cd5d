-- History partitioned by day: push_attempts (by attempted_at), timeline (by at) and inbox (by
-- occurred_at) become range-partitioned tables with one partition per UTC day and a default partition.
--
-- Why: these three tables grow with every event and push. Retention used to delete their old rows in
-- batches (WAL, dead tuples and vacuum on the busiest tables); it now drops a whole day's partition
-- (docs/operations.md, Retention). A report over a time window reads only that window's partitions.
--
-- Partitions: history_partitions_create(first_day, last_day) creates the day partitions of all three
-- tables; `migrate` and every worker's retention round keep them two days ahead
-- (history_partitions_upkeep). A row whose day has no partition lands in the table's default
-- partition: an event that occurred long ago, a clock far ahead, or upkeep that did not run. Creating
-- a day's partition later moves that day's rows out of the default partition first, so nothing is
-- ever refused. history_partitions_drop_expired(now, keep_days) drops the day partitions wholly older
-- than keep_days and deletes the default partitions' rows that are.
--
-- The inbox is partitioned by the event's own time, so its key becomes (event_id, occurred_at): a
-- redelivered or duplicated message carries the same occurred_at and lands on the same row. A second
-- message that reuses an event id with another occurred_at is no longer a duplicate for the inbox; the
-- order's state still ignores it unless it is newer (events.md), as for any event past retention.
--
-- Locks and time (docs/operations.md, Upgrading): the three tables are renamed and their rows copied
-- into the new ones in this one transaction, holding ACCESS EXCLUSIVE on them throughout; stop the
-- workers first (the schema check refuses older workers anyway). The copy rebuilds the indexes: count
-- on about 1 s per million rows on a small machine (`livedelivery-bench reports` prints the figure).
-- The report views that read them are re-pointed in place (same definition, comments and grants).

-- The partitions of one table for one day, as a function so that migrate, the workers and an operator
-- do the same. `parent` is one of the three tables; the day is a UTC day. Returns the partition's name
-- when it created it, NULL when it existed. Takes SHARE UPDATE EXCLUSIVE on the parent (ATTACH, which
-- inserts and reads do not wait for) and briefly locks the default partition while it moves rows out.
CREATE FUNCTION history_partition_create(parent regclass, day date) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    base text := (SELECT relname FROM pg_class WHERE oid = parent);
    part text := base || '_p' || to_char(day, 'YYYYMMDD');
    column_name text := CASE base WHEN 'push_attempts' THEN 'attempted_at' WHEN 'timeline' THEN 'at'
                                  WHEN 'inbox' THEN 'occurred_at' END;
    low timestamptz := (day::timestamp AT TIME ZONE 'UTC');
    high timestamptz := ((day + 1)::timestamp AT TIME ZONE 'UTC');
BEGIN
    IF column_name IS NULL THEN
        RAISE EXCEPTION 'history_partition_create: % is not a history table', parent;
    END IF;
    IF to_regclass(quote_ident(part)) IS NOT NULL THEN
        RETURN NULL;
    END IF;
    EXECUTE format('CREATE TABLE %I (LIKE %s INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING STORAGE)',
                   part, parent);
    IF to_regclass(quote_ident(base || '_default')) IS NOT NULL THEN
        EXECUTE format('WITH moved AS (DELETE FROM %I WHERE %I >= $1 AND %I < $2 RETURNING *) '
                       'INSERT INTO %I SELECT * FROM moved', base || '_default', column_name, column_name, part)
            USING low, high;
    END IF;
    EXECUTE format('ALTER TABLE %s ATTACH PARTITION %I FOR VALUES FROM (%L) TO (%L)', parent, part, low, high);
    RETURN part;
END
$$;
COMMENT ON FUNCTION history_partition_create(regclass, date) IS
    'Creates the partition of a history table (push_attempts, timeline, inbox) for one UTC day, moving that day''s rows out of the default partition; returns its name, or NULL when it existed.';

-- The day partitions of all three tables for every day from first_day to last_day; the names created.
CREATE FUNCTION history_partitions_create(first_day date, last_day date) RETURNS SETOF text
LANGUAGE sql AS $$
    SELECT p
    FROM generate_series(first_day, last_day, interval '1 day') AS d,
         unnest(ARRAY['push_attempts', 'timeline', 'inbox']::regclass[]) AS t,
         history_partition_create(t, d::date) AS p
    WHERE p IS NOT NULL
$$;
COMMENT ON FUNCTION history_partitions_create(date, date) IS
    'Creates the missing day partitions of push_attempts, timeline and inbox from first_day to last_day (UTC days); returns the names created.';

-- What migrate and the workers run: today's partitions and ahead_days more.
CREATE FUNCTION history_partitions_upkeep(at timestamptz, ahead_days integer) RETURNS SETOF text
LANGUAGE sql AS $$
    SELECT history_partitions_create((at AT TIME ZONE 'UTC')::date, (at AT TIME ZONE 'UTC')::date + ahead_days)
$$;
COMMENT ON FUNCTION history_partitions_upkeep(timestamptz, integer) IS
    'Creates the day partitions of the history tables for the UTC day of `at` and ahead_days more; returns the names created.';

-- Retention: drops every day partition that ends at or before at - keep_days, and deletes the rows of
-- the default partitions older than that (the inbox's by processed_at: an old event processed today is
-- remembered for keep_days). One row per table: the partitions dropped and the default rows deleted.
-- DROP takes ACCESS EXCLUSIVE on the parent for a moment: callers set a lock_timeout, so that a long
-- report holding the table never queues the workers' inserts behind the drop.
CREATE FUNCTION history_partitions_drop_expired(at timestamptz, keep_days integer)
RETURNS TABLE (table_name text, partitions_dropped text[], default_rows_deleted bigint)
LANGUAGE plpgsql AS $$
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
            SELECT c.relname FROM pg_inherits AS i JOIN pg_class AS c ON c.oid = i.inhrelid
            WHERE i.inhparent = t.base::regclass AND c.relname ~ ('^' || t.base || '_p[0-9]{8}$')
              AND ((to_date(right(c.relname, 8), 'YYYYMMDD') + 1)::timestamp AT TIME ZONE 'UTC') <= cutoff
            ORDER BY c.relname
        LOOP
            EXECUTE format('DROP TABLE %I', part);
            partitions_dropped := partitions_dropped || part;
        END LOOP;
        EXECUTE format('DELETE FROM %I WHERE %I < $1', t.base || '_default', t.column_name) USING cutoff;
        GET DIAGNOSTICS deleted = ROW_COUNT;
        default_rows_deleted := deleted;
        RETURN NEXT;
    END LOOP;
END
$$;
COMMENT ON FUNCTION history_partitions_drop_expired(timestamptz, integer) IS
    'Retention: drops the day partitions of push_attempts, timeline and inbox that end at or before at - keep_days, and deletes older rows of their default partitions.';

-- A materialized view holds data this migration cannot rebuild on its own: the operator does it.
DO $$
DECLARE
    blocking text;
BEGIN
    SELECT string_agg(DISTINCT format('%I.%I', n.nspname, c.relname), ', ') INTO blocking
    FROM pg_depend AS d
    JOIN pg_rewrite AS r ON r.oid = d.objid
    JOIN pg_class AS c ON c.oid = r.ev_class
    JOIN pg_namespace AS n ON n.oid = c.relnamespace
    WHERE d.classid = 'pg_rewrite'::regclass AND d.refclassid = 'pg_class'::regclass
      AND d.refobjid IN ('push_attempts'::regclass, 'timeline'::regclass, 'inbox'::regclass)
      AND c.relkind = 'm';
    IF blocking IS NOT NULL THEN
        RAISE EXCEPTION 'materialized views read push_attempts, timeline or inbox, which this migration replaces: %; drop them, migrate, then create them again', blocking;
    END IF;
END
$$;

-- The old tables step aside; the report views follow them until they are re-pointed below.
ALTER TABLE push_attempts RENAME TO push_attempts_unpartitioned;
ALTER TABLE timeline RENAME TO timeline_unpartitioned;
ALTER TABLE inbox RENAME TO inbox_unpartitioned;

CREATE TABLE push_attempts (LIKE push_attempts_unpartitioned INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING STORAGE)
    PARTITION BY RANGE (attempted_at);
CREATE TABLE timeline (LIKE timeline_unpartitioned INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING STORAGE)
    PARTITION BY RANGE (at);
CREATE TABLE inbox (LIKE inbox_unpartitioned INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING STORAGE)
    PARTITION BY RANGE (occurred_at);
CREATE TABLE push_attempts_default PARTITION OF push_attempts DEFAULT;
CREATE TABLE timeline_default PARTITION OF timeline DEFAULT;
CREATE TABLE inbox_default PARTITION OF inbox DEFAULT;

-- A partition for every day the old rows cover (up to a year back) and two days ahead, then the rows.
SELECT count(*) FROM history_partitions_create(
    greatest(least((SELECT min(attempted_at) FROM push_attempts_unpartitioned),
                   (SELECT min(at) FROM timeline_unpartitioned),
                   (SELECT min(occurred_at) FROM inbox_unpartitioned),
                   now()),
             now() - interval '366 days')::date,
    (now() + interval '2 days')::date);
INSERT INTO push_attempts SELECT * FROM push_attempts_unpartitioned;
INSERT INTO timeline SELECT * FROM timeline_unpartitioned;
INSERT INTO inbox SELECT * FROM inbox_unpartitioned;

-- Every view that reads an old table (the report views, and an admin's own in any schema) reads the
-- new one: the same definition, replaced in place, so its comments, owner and grants stay.
DO $$
DECLARE
    v record;
BEGIN
    FOR v IN
        SELECT DISTINCT c.oid, format('%I.%I', n.nspname, c.relname) AS name, pg_get_viewdef(c.oid) AS definition
        FROM pg_depend AS d
        JOIN pg_rewrite AS r ON r.oid = d.objid
        JOIN pg_class AS c ON c.oid = r.ev_class
        JOIN pg_namespace AS n ON n.oid = c.relnamespace
        WHERE d.classid = 'pg_rewrite'::regclass AND d.refclassid = 'pg_class'::regclass
          AND d.refobjid IN ('push_attempts_unpartitioned'::regclass, 'timeline_unpartitioned'::regclass,
                             'inbox_unpartitioned'::regclass)
          AND c.relkind = 'v'
    LOOP
        EXECUTE format('CREATE OR REPLACE VIEW %s AS %s', v.name,
                       replace(replace(replace(v.definition, 'push_attempts_unpartitioned', 'push_attempts'),
                                       'timeline_unpartitioned', 'timeline'), 'inbox_unpartitioned', 'inbox'));
    END LOOP;
END
$$;

ALTER SEQUENCE push_attempts_id_seq OWNED BY push_attempts.id;
ALTER SEQUENCE timeline_id_seq OWNED BY timeline.id;
DROP TABLE push_attempts_unpartitioned, timeline_unpartitioned, inbox_unpartitioned;

-- Keys include the partition column (PostgreSQL requires it). The indexes of the old tables, and three
-- partial ones for the reports over a time window: failed attempts, the sweeper's rows and the core's
-- give-up decisions are a small share of each day.
ALTER TABLE push_attempts ADD PRIMARY KEY (id, attempted_at);
CREATE INDEX push_attempts_activity ON push_attempts (order_id, activity_key, id);
CREATE INDEX push_attempts_time ON push_attempts (attempted_at);
CREATE INDEX push_attempts_accepted_starts ON push_attempts (activity_key, attempted_at)
    WHERE kind = 'start' AND outcome = 'delivered';
CREATE INDEX push_attempts_not_delivered ON push_attempts (attempted_at) WHERE outcome <> 'delivered';

ALTER TABLE timeline ADD PRIMARY KEY (id, at);
CREATE INDEX timeline_order ON timeline (order_id, id);
CREATE INDEX timeline_sweeps ON timeline (at) WHERE kind = 'sweep';
CREATE INDEX timeline_give_ups ON timeline (order_id, activity_key, at)
    WHERE kind = 'outcome' AND code IN ('push_dropped', 'token_gone');

ALTER TABLE inbox ADD PRIMARY KEY (event_id, occurred_at);
CREATE INDEX inbox_processed_at ON inbox (processed_at);

ANALYZE push_attempts, timeline, inbox;

-- Maintenance is for the owner (migrate, the workers); the reporting role reads and calls reports only.
REVOKE EXECUTE ON FUNCTION history_partition_create(regclass, date), history_partitions_create(date, date),
    history_partitions_upkeep(timestamptz, integer), history_partitions_drop_expired(timestamptz, integer)
    FROM PUBLIC;
