-- The dispatcher's claim, in two partial indexes instead of one over every row.
--
-- outbox_due (not_before) held the rows in flight too: with hundreds of pushes leased at the front of
-- the index, every claim walked past them (and their heap tuples) to reach a free row, and claims
-- became the database's most expensive statement. Free rows and leased rows now have an index each:
-- a claim reads free due rows in not_before order, and expired leases (a worker died) in expiry
-- order, stopping at the first lease still running.
CREATE INDEX outbox_free_due ON outbox (not_before) WHERE lease_until IS NULL;
CREATE INDEX outbox_lease_expiry ON outbox (lease_until) WHERE lease_until IS NOT NULL;
DROP INDEX outbox_due;
