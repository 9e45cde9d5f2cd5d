-- Indexes for the per-device push-to-start limit (StartLimit.load), which counts, per device, the
-- starts APNs accepted in the window and the starts still pending.
--
-- Neither count had an index that starts with activity_key: the pending one read the whole outbox
-- once per device, and the accepted one read every push attempt of the window (ten minutes of all
-- pushes, over a million rows at 2,000 pushes/s) once per device. Both indexes are partial, so only
-- start pushes pay for them.
CREATE INDEX outbox_pending_starts ON outbox (activity_key) WHERE kind = 'start';
CREATE INDEX push_attempts_accepted_starts ON push_attempts (activity_key, attempted_at)
    WHERE kind = 'start' AND outcome = 'delivered';
