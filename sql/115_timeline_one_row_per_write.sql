-- The timeline holds one row per write of an order (an event or the events of one order consumed
-- together, a push outcome, a sweep), with that write's decisions in order, instead of one row per
-- decision.
--
-- Why: an update event made four decisions (status_changed, update_planned, no_alert, priority), so
-- four timeline rows, four index entries in each of the table's indexes and four row headers of WAL,
-- a third of the rows the event wrote. The decisions of one write share their order, time and kind;
-- only the activity, code and message differ, and those become three arrays of the same length.
--
-- `timeline_decisions` is the view of one row per decision, with the old table's columns (id,
-- order_id, activity_key, at, kind, code, message) and the decision's `position` (1-based) within its
-- row: the reports read it, and so can an admin's own queries. Every view that read the old table (the
-- report views, and an admin's own in any schema) reads `timeline_decisions` instead, with the same
-- definition, replaced in place, so its comments, owner and grants stay. A materialized view on the
-- timeline stops the migration with a message naming it, and nothing is changed.
--
-- Locks and time (docs/operations.md, Upgrading): the old rows are grouped into the new table in this
-- one transaction under ACCESS EXCLUSIVE on the timeline; stop the workers first (the schema check
-- refuses older workers anyway). The rows of one write are those of one order with the same time and
-- kind (a write stamps them all with its transaction's time); the new row keeps the smallest id, so
-- the order of rows by id stays.

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
      AND d.refobjid = 'timeline'::regclass AND c.relkind = 'm';
    IF blocking IS NOT NULL THEN
        RAISE EXCEPTION 'materialized views read timeline, which this migration replaces: %; drop them, migrate, then create them again over timeline_decisions', blocking;
    END IF;
END
$$;

-- The old table and its day partitions step aside (a new partition takes the old one's name); the
-- views follow the old table until they are re-pointed below.
DO $$
DECLARE
    part text;
BEGIN
    FOR part IN
        SELECT c.relname FROM pg_inherits AS i JOIN pg_class AS c ON c.oid = i.inhrelid
        WHERE i.inhparent = 'timeline'::regclass
    LOOP
        EXECUTE format('ALTER TABLE %I RENAME TO %I', part, 'timeline_by_decision' || substr(part, length('timeline') + 1));
    END LOOP;
END
$$;
ALTER TABLE timeline RENAME TO timeline_by_decision;

CREATE TABLE timeline (
    id             bigint NOT NULL DEFAULT nextval('timeline_id_seq'),
    order_id       text COLLATE "C" NOT NULL,
    at             timestamptz NOT NULL DEFAULT now(),
    kind           text NOT NULL CONSTRAINT timeline_kind_known CHECK (kind IN ('event', 'outcome', 'sweep')),
    -- The decisions, in order: activity_keys[i] (NULL for the order itself), codes[i], messages[i].
    activity_keys  text[] COLLATE "C" NOT NULL,
    codes          text[] NOT NULL,
    messages       text[] NOT NULL,
    CONSTRAINT timeline_decisions_aligned CHECK (cardinality(codes) > 0 AND cardinality(activity_keys) = cardinality(codes)
           AND cardinality(messages) = cardinality(codes))
) PARTITION BY RANGE (at);
CREATE TABLE timeline_default PARTITION OF timeline DEFAULT;
ALTER SEQUENCE timeline_id_seq OWNED BY timeline.id;

SELECT count(*)
FROM generate_series(greatest(least((SELECT min(at) FROM timeline_by_decision), now()), now() - interval '366 days')::date,
                     (now() + interval '2 days')::date, interval '1 day') AS d,
     history_partition_create('timeline', d::date);

INSERT INTO timeline (id, order_id, at, kind, activity_keys, codes, messages)
SELECT min(id), order_id, at, kind,
       array_agg(activity_key ORDER BY id), array_agg(code ORDER BY id), array_agg(message ORDER BY id)
FROM timeline_by_decision
GROUP BY order_id, at, kind;

CREATE VIEW timeline_decisions AS
SELECT t.id, t.order_id, d.activity_key, t.at, t.kind, d.code, d.message, d.position::integer AS position
FROM timeline AS t
CROSS JOIN LATERAL unnest(t.activity_keys, t.codes, t.messages) WITH ORDINALITY AS d(activity_key, code, message, position);
COMMENT ON VIEW timeline_decisions IS 'The core''s decisions, one row each: the timeline''s rows unnested. A write''s decisions share its id, order, time and kind; position orders them.';
COMMENT ON COLUMN timeline_decisions.position IS 'The decision''s place among its write''s decisions, from 1.';

-- Every view that read the old table reads the decisions instead: the same columns by the same names.
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
          AND d.refobjid = 'timeline_by_decision'::regclass AND c.relkind = 'v'
    LOOP
        EXECUTE format('CREATE OR REPLACE VIEW %s AS %s', v.name,
                       replace(v.definition, 'timeline_by_decision', 'timeline_decisions'));
    END LOOP;
END
$$;

-- The reports whose rows a write's decisions used to order by id alone.
CREATE OR REPLACE VIEW report_order_timeline AS
SELECT i.order_id,
       i.processed_at                          AS at,
       'event'::text                           AS source,
       NULL::text                              AS activity_key,
       i.event_type                            AS subject,
       'received'::text                        AS code,
       'occurred at ' || to_char(i.occurred_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') AS detail,
       i.event_id                              AS ref,
       0                                       AS rank,
       0::bigint                               AS sort_id
FROM inbox AS i
WHERE i.order_id IS NOT NULL
UNION ALL
SELECT report_body_json(d.body) ->> 'order_id',
       d.received_at,
       'dead_letter',
       NULL,
       d.routing_key,
       d.reason,
       d.message || coalesce(' (field ' || d.field || ')', ''),
       'dead_letter ' || d.id,
       0,
       d.id
FROM dead_letters AS d
UNION ALL
SELECT p.order_id,
       p.attempted_at,
       'push',
       p.activity_key,
       p.kind || ' p' || p.priority,
       p.outcome,
       concat_ws(' ', p.status::text, p.reason, round(p.latency_ms::numeric, 1) || ' ms', 'attempt by ' || p.worker_id),
       p.apns_id::text,
       1,
       p.id
FROM push_attempts AS p
UNION ALL
-- A write's decisions in their order: sort_id is the row's id, then the position (a write never holds
-- 65,536 decisions: a batch is at most a few hundred events).
SELECT t.order_id,
       t.at,
       CASE t.kind WHEN 'event' THEN 'decision' ELSE t.kind END,
       t.activity_key,
       NULL,
       t.code,
       t.message,
       NULL,
       2,
       t.id * 65536 + t.position
FROM timeline_decisions AS t;
COMMENT ON COLUMN report_order_timeline.sort_id IS 'Orders rows of the same rank (sort key, no unit).';

CREATE OR REPLACE VIEW report_failed_pushes AS
SELECT p.id,
       p.attempted_at,
       p.order_id,
       p.activity_key,
       p.bundle_id                        AS app,
       p.kind,
       p.priority,
       p.status,
       p.outcome,
       coalesce(p.reason, '')             AS reason,
       t.code                             AS decision,
       a.state                            AS activity_state,
       r.recovered_at,
       t.message
FROM push_attempts AS p
JOIN LATERAL (
    SELECT tl.code, tl.message FROM timeline_decisions AS tl
    WHERE tl.order_id = p.order_id AND tl.activity_key = p.activity_key AND tl.at = p.attempted_at
      AND tl.kind = 'outcome' AND tl.code IN ('push_dropped', 'token_gone')
    ORDER BY tl.id, tl.position
    LIMIT 1
) AS t ON true
LEFT JOIN activities AS a USING (order_id, activity_key)
LEFT JOIN LATERAL (
    SELECT min(q.attempted_at) AS recovered_at FROM push_attempts AS q
    WHERE q.order_id = p.order_id AND q.activity_key = p.activity_key AND q.id > p.id AND q.outcome = 'delivered'
) AS r ON true;

DROP TABLE timeline_by_decision;

-- Keys include the partition column. The give-ups' index now finds the rows of an order that hold a
-- give-up decision; the report picks the activity's decision inside the row.
ALTER TABLE timeline ADD PRIMARY KEY (id, at);
CREATE INDEX timeline_order ON timeline (order_id, id);
CREATE INDEX timeline_sweeps ON timeline (at) WHERE kind = 'sweep';
CREATE INDEX timeline_give_ups ON timeline (order_id, at)
    WHERE kind = 'outcome' AND codes && ARRAY['push_dropped', 'token_gone'];
ANALYZE timeline;

-- The functions over a time window (sql/113) that read the timeline: the same rows as their views.
CREATE OR REPLACE FUNCTION report_failed_pushes(since timestamptz, until timestamptz)
RETURNS SETOF report_failed_pushes
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path FROM CURRENT SET work_mem = '64MB' SET jit = off AS $$
BEGIN
    RETURN QUERY EXECUTE $query$
        SELECT p.id, p.attempted_at, p.order_id, p.activity_key, p.bundle_id, p.kind, p.priority, p.status, p.outcome,
               coalesce(p.reason, ''), t.code, a.state, r.recovered_at, t.message
        FROM push_attempts AS p
        JOIN LATERAL (
            -- The write's row, found through timeline_give_ups (`+ 0`: ordering by the bare id made the
            -- planner walk each partition's (order_id, id) index instead), then the activity's decision.
            SELECT d.code, d.message
            FROM timeline AS tl
            CROSS JOIN LATERAL unnest(tl.activity_keys, tl.codes, tl.messages) WITH ORDINALITY
                AS d(activity_key, code, message, position)
            WHERE tl.order_id = p.order_id AND tl.at = p.attempted_at
              AND tl.kind = 'outcome' AND tl.codes && ARRAY['push_dropped', 'token_gone']
              AND d.activity_key = p.activity_key AND d.code IN ('push_dropped', 'token_gone')
            ORDER BY tl.id + 0, d.position
            LIMIT 1
        ) AS t ON true
        LEFT JOIN activities AS a USING (order_id, activity_key)
        LEFT JOIN LATERAL (
            SELECT min(q.attempted_at) AS recovered_at FROM push_attempts AS q
            WHERE q.order_id = p.order_id AND q.activity_key = p.activity_key AND q.id > p.id
              AND q.attempted_at >= p.attempted_at AND q.outcome = 'delivered'
        ) AS r ON true
        WHERE p.attempted_at >= $1 AND p.attempted_at < $2 AND p.outcome <> 'delivered'
    $query$ USING since, until;
END
$$;

-- The sweeper's rows in the window (timeline_sweeps); an action's companion decisions share its row.
CREATE OR REPLACE FUNCTION report_sweeper_actions(since timestamptz, until timestamptz)
RETURNS SETOF report_sweeper_actions
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path FROM CURRENT SET work_mem = '64MB' SET jit = off AS $$
BEGIN
    RETURN QUERY EXECUTE $query$
        WITH sweeps AS (
            SELECT t.order_id, t.activity_key, t.at, t.code
            FROM timeline_decisions AS t
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
        LEFT JOIN activities AS a USING (order_id, activity_key)
        GROUP BY 1, 2, 3
    $query$ USING since, until;
END
$$;

-- The decisions of the activities created in the window: their orders' rows from the window's start on.
CREATE OR REPLACE FUNCTION report_alerts_per_activity(since timestamptz, until timestamptz)
RETURNS SETOF report_alerts_per_activity
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path FROM CURRENT SET work_mem = '64MB' SET jit = off AS $$
BEGIN
    RETURN QUERY EXECUTE $query$
        WITH created AS (
            SELECT * FROM activities AS a WHERE a.created_at >= $1 AND a.created_at < $2
        ),
        decisions AS (
            SELECT tl.order_id, tl.activity_key,
                   count(*) FILTER (WHERE code IN ('alert', 'alert_eta_slip'))                          AS alerts_planned,
                   count(*) FILTER (WHERE code = 'alert_eta_slip')                                      AS eta_slip_alerts,
                   count(*) FILTER (WHERE code IN ('alert_cap_reached', 'alert_already_sent_for_step')) AS alerts_held_back,
                   count(*) FILTER (WHERE code = 'budget_downgrade')                                    AS budget_downgrades,
                   min(at) FILTER (WHERE code IN ('alert', 'alert_eta_slip'))                           AS first_alert_at,
                   max(at) FILTER (WHERE code IN ('alert', 'alert_eta_slip'))                           AS last_alert_at
            FROM timeline_decisions AS tl
            WHERE tl.at >= $1 AND tl.order_id IN (SELECT order_id FROM created)
              AND (tl.order_id, tl.activity_key) IN (SELECT order_id, activity_key FROM created)
            GROUP BY tl.order_id, tl.activity_key
        ),
        pushes AS (
            SELECT q.order_id, q.activity_key,
                   count(*) FILTER (WHERE outcome = 'delivered')                   AS delivered,
                   count(*) FILTER (WHERE outcome = 'delivered' AND priority = 10) AS high_priority_delivered
            FROM push_attempts AS q
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
$$;
