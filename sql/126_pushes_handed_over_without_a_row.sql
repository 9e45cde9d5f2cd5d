-- A push the consumer hands to its own dispatcher in memory no longer has an outbox row.
--
-- Why: that row was inserted already leased and deleted once APNs' answer was recorded: two of an update's
-- eight row versions, two index entries each time, and its push encoded into it only to be thrown away. Its one
-- use was to let another worker find the push if the worker holding it died before recording the answer.
--
-- How a lost push is found instead, with nothing written to find it:
--   * the timeline row that the consumer's write already inserts for each order lists the `apns-id`s it handed
--     over in memory (`timeline.handed`; NULL when it handed none), under a partial index by time;
--   * every answer writes a `push_attempts` row with the push's `apns-id`;
--   * the workers' sweepers take turns (the one row of `handed_push_checks`, locked with SKIP LOCKED) reading the
--     timeline rows written since `checked_until` and older than the dispatcher's lease, and look each id up in
--     `push_attempts`. An id with no answer is a push whose worker stopped: its order is locked and, if that push
--     is still its activity's pending one, the push is built again and put in the outbox for any worker to send.
--     `checked_until` never passes the start of a transaction of the same database still writing (its timeline
--     rows are not visible yet), so a late commit is not skipped.
-- Only updates without an alert are handed over so, since a lost one is built again with a fresh timestamp, which
-- shows the same state twice, silently, at worst. The others keep their rows, so that a lost one is sent again
-- identical, which the phone ignores if the first arrived: an alert must not sound twice, nor an end reach an
-- activity already ended; a start's row is also what the per-device start limit counts. A push planned while its activity's previous one is in flight without a row is
-- inserted held (`lease_until` a lease ahead, no owner) until that push's answer releases it.
--
-- The index is built on every partition of the timeline, whose rows are all NULL here: a read of each.

ALTER TABLE timeline ADD COLUMN handed uuid[];
COMMENT ON COLUMN timeline.handed IS
    'The apns-ids this write handed to its worker''s dispatcher in memory, without an outbox row; NULL when none.';
CREATE INDEX timeline_handed ON timeline (at) WHERE handed IS NOT NULL;

CREATE TABLE handed_push_checks (
    only_row       boolean PRIMARY KEY DEFAULT true CHECK (only_row),
    checked_until  timestamptz NOT NULL
);
COMMENT ON TABLE handed_push_checks IS
    'How far the sweepers have looked for pushes handed over in memory whose answer was never recorded.';
INSERT INTO handed_push_checks (checked_until) VALUES (now());

GRANT SELECT, UPDATE ON handed_push_checks TO livedelivery_worker;

-- The pushes not answered yet: the outbox's rows, and the pushes handed over in memory since the sweepers last
-- looked (before that, a push with no answer was sent again through the outbox, or a newer one replaced it)
-- that have no answer yet. An operator's view, and what the tests wait on.
CREATE VIEW pushes_waiting AS
SELECT o.order_id, o.activity_key, o.apns_id, o.kind, 'outbox' AS waits_in
FROM outbox AS o
UNION ALL
SELECT t.order_id, NULL, h.id, NULL, 'memory'
FROM timeline AS t CROSS JOIN LATERAL unnest(t.handed) AS h(id)
WHERE t.handed IS NOT NULL AND t.at >= (SELECT checked_until FROM handed_push_checks)
  AND NOT EXISTS (SELECT 1 FROM push_attempts AS a
                  WHERE a.order_id = t.order_id AND a.apns_id = h.id AND a.attempted_at >= t.at)
  AND NOT EXISTS (SELECT 1 FROM outbox AS x WHERE x.order_id = t.order_id AND x.apns_id = h.id);
COMMENT ON VIEW pushes_waiting IS
    'Pushes not answered yet: outbox rows (waits_in = outbox), and pushes a dispatcher holds in memory (waits_in = memory).';
GRANT SELECT ON pushes_waiting TO livedelivery_worker;
