-- The apns-ids of updates APNs accepted that the order's state does not say yet.
--
-- APNs' answer to an activity's current update used to rewrite the order's whole state (about 2 kB
-- of JSON, encoded by the worker, checked and compressed again by PostgreSQL) only to say "sent;
-- nothing pending", and to add a timeline row beside the push_attempts row that already says
-- "delivered". The worker now appends the update's apns-id here (the state itself is copied as it
-- is) and writes the activity's row for the reports; every read of the order settles the pending
-- update whose id is listed, exactly as recording the answer would have, and the next write of the
-- state, which includes it, empties the list.
ALTER TABLE orders ADD COLUMN delivered uuid[];
