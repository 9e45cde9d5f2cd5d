-- Identifiers compare as bytes (COLLATE "C").
--
-- Every event finds or inserts rows by text keys: the inbox's event id, the order's row, its
-- activities, the outbox, four timeline rows and a push attempt, a dozen B-tree descents of about
-- twenty comparisons each. Under the database's default collation each comparison goes through the
-- locale: both strings copied to terminated buffers, then strcoll or ICU. PostgreSQL 15 compares as
-- plain bytes only for a "C" or "POSIX" collation; "C.UTF-8", "en_US.UTF-8" and every ICU locale go
-- the slow way. An order id, a device id or a bundle id has no linguistic order, and equality was
-- already byte equality (the collations in use are deterministic), so nothing a query returns
-- changes except the order of rows sorted by these columns.
--
-- Measured on the services' server (C.UTF-8), 300,000 primary-key lookups in 1M keys like the
-- worker's: 2.9 µs each at the default collation, 2.4 µs at "C", 4.2 µs at "en-US-x-icu".
--
-- The tables are not rewritten; the indexes on these columns are rebuilt, under an ACCESS EXCLUSIVE
-- lock on each table while its indexes build (about 0.35 s per million rows of a one-column key on
-- this machine). A view that reads these tables blocks the change, so every view that reads them
-- (the report views, and an admin's own in any schema), and every view that reads one of those, is
-- dropped and created again from its own definition, with its options, owner, comment and grants. A
-- materialized view on them stops the migration with a message naming it, and nothing is changed.

CREATE TEMPORARY TABLE identifier_columns (table_name regclass, column_name name) ON COMMIT DROP;
INSERT INTO identifier_columns VALUES
    ('orders', 'order_id'), ('orders', 'user_id'),
    ('activities', 'order_id'), ('activities', 'activity_key'), ('activities', 'activity_id'),
    ('activities', 'device_id'), ('activities', 'bundle_id'), ('activities', 'state'),
    ('inbox', 'event_id'), ('inbox', 'order_id'), ('inbox', 'user_id'),
    ('outbox', 'order_id'), ('outbox', 'activity_key'), ('outbox', 'bundle_id'),
    ('push_attempts', 'order_id'), ('push_attempts', 'activity_key'), ('push_attempts', 'bundle_id'),
    ('timeline', 'order_id'), ('timeline', 'activity_key'),
    ('push_to_start_tokens', 'user_id'), ('push_to_start_tokens', 'device_id'),
    ('push_to_start_tokens', 'bundle_id'),
    ('app_pauses', 'bundle_id');

-- The views that read these tables, and the views that read those, in any schema. A view's depth is
-- its longest path from the tables: it is greater than that of every view it reads.
CREATE TEMPORARY TABLE readers ON COMMIT DROP AS
WITH RECURSIVE readers(oid, depth) AS (
    SELECT r.ev_class, 1
    FROM pg_depend AS d JOIN pg_rewrite AS r ON r.oid = d.objid
    WHERE d.classid = 'pg_rewrite'::regclass AND d.refclassid = 'pg_class'::regclass
      AND d.refobjid IN (SELECT table_name FROM identifier_columns) AND r.ev_class <> d.refobjid
    UNION
    SELECT r.ev_class, v.depth + 1
    FROM readers AS v
    JOIN pg_depend AS d ON d.refclassid = 'pg_class'::regclass AND d.refobjid = v.oid
    JOIN pg_rewrite AS r ON d.classid = 'pg_rewrite'::regclass AND r.oid = d.objid
    WHERE r.ev_class <> v.oid
)
SELECT oid, max(depth) AS depth FROM readers GROUP BY oid;

-- A materialized view holds data this migration cannot rebuild on its own: the operator does it.
DO $$
DECLARE
    blocking text;
BEGIN
    SELECT string_agg(format('%I.%I', n.nspname, c.relname), ', ') INTO blocking
    FROM pg_class AS c JOIN pg_namespace AS n ON n.oid = c.relnamespace
    WHERE c.relkind = 'm' AND c.oid IN (SELECT oid FROM readers);
    IF blocking IS NOT NULL THEN
        RAISE EXCEPTION 'materialized views read the identifier columns this migration changes: %; drop them, migrate, then create them again', blocking;
    END IF;
END
$$;

CREATE TEMPORARY TABLE saved_views ON COMMIT DROP AS
SELECT c.oid, v.depth, format('%I.%I', n.nspname, c.relname) AS name, pg_get_viewdef(c.oid) AS definition,
       c.reloptions, quote_ident(pg_get_userbyid(c.relowner)) AS owner,
       obj_description(c.oid, 'pg_class') AS comment,
       (SELECT coalesce(array_agg(format('GRANT %s ON %I.%I TO %s', a.privilege_type, n.nspname, c.relname,
                                         CASE WHEN a.grantee = 0 THEN 'PUBLIC'
                                              ELSE quote_ident(pg_get_userbyid(a.grantee)) END)), '{}')
        FROM aclexplode(c.relacl) AS a
        WHERE a.grantee <> c.relowner) AS grants
FROM readers AS v JOIN pg_class AS c ON c.oid = v.oid JOIN pg_namespace AS n ON n.oid = c.relnamespace
WHERE c.relkind = 'v';

-- All in one statement, so that their order does not matter and none needs CASCADE.
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM saved_views) THEN
        EXECUTE 'DROP VIEW ' || (SELECT string_agg(name, ', ') FROM saved_views);
    END IF;
EXCEPTION WHEN dependent_objects_still_exist THEN
    RAISE EXCEPTION 'cannot drop the views % (something other than a view reads them)',
        (SELECT string_agg(name, ', ') FROM saved_views);
END
$$;

-- One ALTER TABLE per table, so that an index on two of its columns is built once.
DO $$
DECLARE
    t record;
BEGIN
    FOR t IN
        SELECT table_name, string_agg(format('ALTER COLUMN %I TYPE text COLLATE "C"', column_name), ', ') AS changes
        FROM identifier_columns GROUP BY table_name
    LOOP
        EXECUTE format('ALTER TABLE %s %s', t.table_name, t.changes);
    END LOOP;
END
$$;

-- Each view after the views it reads.
DO $$
DECLARE
    v record;
    grant_statement text;
BEGIN
    FOR v IN SELECT * FROM saved_views ORDER BY depth, oid LOOP
        EXECUTE format('CREATE VIEW %s %s AS %s', v.name,
                       CASE WHEN v.reloptions IS NULL THEN ''
                            ELSE format('WITH (%s)', array_to_string(v.reloptions, ', ')) END,
                       v.definition);
        EXECUTE format('ALTER VIEW %s OWNER TO %s', v.name, v.owner);
        FOREACH grant_statement IN ARRAY v.grants LOOP
            EXECUTE grant_statement;
        END LOOP;
        IF v.comment IS NOT NULL THEN
            EXECUTE format('COMMENT ON VIEW %s IS %L', v.name, v.comment);
        END IF;
    END LOOP;
END
$$;
