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
-- this machine). The report views read these columns, so they are dropped and created again from
-- their own definitions, with their options, comments and grants.

CREATE TEMPORARY TABLE saved_views ON COMMIT DROP AS
SELECT c.oid, c.relname::text AS name, pg_get_viewdef(c.oid) AS definition, c.reloptions,
       obj_description(c.oid, 'pg_class') AS comment,
       (SELECT coalesce(array_agg(format('GRANT %s ON %I TO %s', a.privilege_type, c.relname,
                                         CASE WHEN a.grantee = 0 THEN 'PUBLIC'
                                              ELSE quote_ident(pg_get_userbyid(a.grantee)) END)), '{}')
        FROM aclexplode(c.relacl) AS a
        WHERE a.grantee <> c.relowner) AS grants
FROM pg_class AS c
WHERE c.relkind = 'v' AND c.relnamespace = current_schema()::regnamespace;

DO $$
DECLARE
    v record;
BEGIN
    FOR v IN SELECT name FROM saved_views ORDER BY oid DESC LOOP
        EXECUTE format('DROP VIEW IF EXISTS %I CASCADE', v.name);
    END LOOP;
END
$$;

ALTER TABLE orders
    ALTER COLUMN order_id TYPE text COLLATE "C",
    ALTER COLUMN user_id TYPE text COLLATE "C";
ALTER TABLE activities
    ALTER COLUMN order_id TYPE text COLLATE "C",
    ALTER COLUMN activity_key TYPE text COLLATE "C",
    ALTER COLUMN activity_id TYPE text COLLATE "C",
    ALTER COLUMN device_id TYPE text COLLATE "C",
    ALTER COLUMN bundle_id TYPE text COLLATE "C",
    ALTER COLUMN state TYPE text COLLATE "C";
ALTER TABLE inbox
    ALTER COLUMN event_id TYPE text COLLATE "C",
    ALTER COLUMN order_id TYPE text COLLATE "C",
    ALTER COLUMN user_id TYPE text COLLATE "C";
ALTER TABLE outbox
    ALTER COLUMN order_id TYPE text COLLATE "C",
    ALTER COLUMN activity_key TYPE text COLLATE "C",
    ALTER COLUMN bundle_id TYPE text COLLATE "C";
ALTER TABLE push_attempts
    ALTER COLUMN order_id TYPE text COLLATE "C",
    ALTER COLUMN activity_key TYPE text COLLATE "C",
    ALTER COLUMN bundle_id TYPE text COLLATE "C";
ALTER TABLE timeline
    ALTER COLUMN order_id TYPE text COLLATE "C",
    ALTER COLUMN activity_key TYPE text COLLATE "C";
ALTER TABLE push_to_start_tokens
    ALTER COLUMN user_id TYPE text COLLATE "C",
    ALTER COLUMN device_id TYPE text COLLATE "C",
    ALTER COLUMN bundle_id TYPE text COLLATE "C";
ALTER TABLE app_pauses
    ALTER COLUMN bundle_id TYPE text COLLATE "C";

-- A view that reads another is created once that one exists: each pass creates what it can.
DO $$
DECLARE
    v record;
    grant_statement text;
    left_over integer;
    before integer;
BEGIN
    CREATE TEMPORARY TABLE views_to_create ON COMMIT DROP AS SELECT * FROM saved_views;
    LOOP
        SELECT count(*) INTO before FROM views_to_create;
        EXIT WHEN before = 0;
        FOR v IN SELECT * FROM views_to_create ORDER BY oid LOOP
            BEGIN
                EXECUTE format('CREATE VIEW %I %s AS %s', v.name,
                               CASE WHEN v.reloptions IS NULL THEN ''
                                    ELSE format('WITH (%s)', array_to_string(v.reloptions, ', ')) END,
                               v.definition);
                DELETE FROM views_to_create WHERE oid = v.oid;
            EXCEPTION WHEN undefined_table THEN
                NULL; -- reads a view not created yet: the next pass
            END;
        END LOOP;
        SELECT count(*) INTO left_over FROM views_to_create;
        IF left_over = before THEN
            RAISE EXCEPTION 'cannot create the views % again', (SELECT string_agg(name, ', ') FROM views_to_create);
        END IF;
    END LOOP;
    FOR v IN SELECT * FROM saved_views LOOP
        FOREACH grant_statement IN ARRAY v.grants LOOP
            EXECUTE grant_statement;
        END LOOP;
        IF v.comment IS NOT NULL THEN
            EXECUTE format('COMMENT ON VIEW %I IS %L', v.name, v.comment);
        END IF;
    END LOOP;
END
$$;
