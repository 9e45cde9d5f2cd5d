-- APNs' acceptance of an activity's current update is kept in the activity's row, not in the order's.
--
-- Since sql/108 the acceptance of an update does not rewrite the order's state: its apns-id joined the
-- order row's `delivered` list, and every read of the order settles it. But that list was one more
-- version of the order row per update (the order row is written twice per update event), while the
-- activity's row is written at that moment anyway (its last sent content and step). The id now goes
-- there: `activities.delivered_apns_id` is the newest update of the activity APNs accepted, and every
-- read of the order settles the updates its activities' rows name, exactly as before. An id the state
-- has settled already settles nothing (settling matches the pending update's own id), so the column
-- is never cleared.
--
-- The lists of a live deployment move over: each id goes to the activity whose pending update it is
-- in the order's state. Stop the workers of the previous release first (they write the old column;
-- the schema check refuses them anyway). Takes a moment: only orders with a list are read.
ALTER TABLE activities ADD COLUMN delivered_apns_id uuid;
COMMENT ON COLUMN activities.delivered_apns_id IS
    'The newest update of this activity APNs accepted; every read of the order settles it if its state still has it pending.';

UPDATE activities AS a SET delivered_apns_id = d.apns_id
FROM (
    SELECT o.order_id, x ->> 'key' AS activity_key, (x -> 'pending' ->> 'apnsID')::uuid AS apns_id
    FROM orders AS o
    CROSS JOIN LATERAL json_array_elements(o.state -> 'activities') AS x
    WHERE o.delivered IS NOT NULL AND x -> 'pending' ->> 'apnsID' IS NOT NULL
      AND (x -> 'pending' ->> 'apnsID')::uuid = ANY (o.delivered)
) AS d
WHERE a.order_id = d.order_id AND a.activity_key = d.activity_key;

ALTER TABLE orders DROP COLUMN delivered;
