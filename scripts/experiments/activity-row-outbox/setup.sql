-- Tables for run: the activity projection and outbox as they are (act_a, outbox_a), and the activity
-- row holding its pending push (act_b), each with 20,000 active activities.
DROP TABLE IF EXISTS push_doc;
DROP TABLE IF EXISTS act_a, act_b, outbox_a;
-- Today's layout: the activity projection (HOT-updatable) and a separate outbox.
CREATE TABLE act_a (
  order_id text COLLATE "C" NOT NULL, activity_key text COLLATE "C" NOT NULL, activity_id text COLLATE "C",
  device_id text COLLATE "C", bundle_id text COLLATE "C", environment text, state text COLLATE "C" NOT NULL,
  end_reason text, token_prefix text, token_received_at timestamptz, last_sent_timestamp bigint,
  last_sent_content jsonb, last_sent_step text, relevance_score double precision, alert_count int NOT NULL DEFAULT 0,
  pending_kind text, started_at timestamptz, ended_at timestamptz, delivered_apns_id uuid,
  created_at timestamptz NOT NULL DEFAULT now(), updated_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (order_id, activity_key));
CREATE INDEX ON act_a (activity_id) WHERE activity_id IS NOT NULL;
CREATE INDEX ON act_a (created_at);
CREATE INDEX ON act_a (state, bundle_id) WHERE state IN ('pending_start', 'starting', 'active', 'ending');
CREATE TABLE outbox_a (
  order_id text COLLATE "C" NOT NULL, activity_key text COLLATE "C" NOT NULL, kind text NOT NULL,
  bundle_id text COLLATE "C" NOT NULL, environment text NOT NULL, priority smallint NOT NULL, apns_id uuid NOT NULL,
  push json NOT NULL, reason text NOT NULL, generation bigint NOT NULL DEFAULT 1, attempts int NOT NULL DEFAULT 0,
  not_before timestamptz NOT NULL DEFAULT now(), lease_owner text, lease_until timestamptz,
  created_at timestamptz NOT NULL DEFAULT now(), updated_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (order_id, activity_key));
CREATE INDEX ON outbox_a (not_before) WHERE lease_until IS NULL;
CREATE INDEX ON outbox_a (lease_until) WHERE lease_until IS NOT NULL;
CREATE INDEX ON outbox_a (activity_key) WHERE kind = 'start';
ALTER TABLE outbox_a SET (toast_tuple_target = 8160);
-- The activity row as the outbox: the pending push, its lease and attempts in the activity's row.
CREATE TABLE act_b (LIKE act_a INCLUDING ALL);
ALTER TABLE act_b ADD COLUMN push json, ADD COLUMN push_priority smallint, ADD COLUMN push_apns_id uuid,
  ADD COLUMN push_reason text, ADD COLUMN generation bigint NOT NULL DEFAULT 0, ADD COLUMN attempts int NOT NULL DEFAULT 0,
  ADD COLUMN not_before timestamptz, ADD COLUMN lease_owner text, ADD COLUMN lease_until timestamptz;
ALTER TABLE act_b SET (toast_tuple_target = 8160);
CREATE INDEX ON act_b (not_before) WHERE push IS NOT NULL AND lease_until IS NULL;
CREATE INDEX ON act_b (lease_until) WHERE lease_until IS NOT NULL;
INSERT INTO act_a (order_id, activity_key, activity_id, device_id, bundle_id, environment, state, created_at)
SELECT 'o-' || i, 'activity:' || i, 'A-' || i, 'd-' || i, 'com.example.pizza', 'production', 'active', now() - (i || ' s')::interval
FROM generate_series(1, 20000) AS i;
INSERT INTO act_b (order_id, activity_key, activity_id, device_id, bundle_id, environment, state, created_at)
SELECT order_id, activity_key, activity_id, device_id, bundle_id, environment, state, created_at FROM act_a;
VACUUM ANALYZE act_a, act_b, outbox_a;
CREATE TABLE IF NOT EXISTS push_doc AS SELECT ('{"aps":{"timestamp":1,"event":"update","content-state":{"x":"' || repeat('y', 900) || '"}}}')::json AS push;
