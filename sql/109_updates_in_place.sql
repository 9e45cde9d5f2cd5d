-- Room on each page of the two tables that every event rewrites, so that a row's new version can
-- stay on its page: an update in place (HOT) adds no index entries, and the old version is pruned
-- by the next visit to the page rather than by a vacuum of every index.
--
-- An order's row is about 1.2 kB (its state compressed) and an activity's about 330 bytes. Packed
-- full, a page keeps less free space than one more version of either needs. At 85 % a page of
-- orders keeps about 2 kB free and a page of activities about 1.3 kB: room for an event's new
-- versions until the next visit prunes the old ones. This applies to pages filled from now on;
-- existing pages follow as rows move (or at once with VACUUM FULL, which locks the table).
--
-- An update that changes an indexed column is never in place, and nearly every event moves an open
-- order's idle deadline on. So the worker keeps next_sweep_at at an earlier time while that is
-- ahead, and the sweeper moves it on (`OrderStore.SweepColumn`).
--
-- Measured round of 40k updates at 40k orders (`livedelivery-bench worker --scales 40000 --updates
-- 40000`): order rows updated in place 23,361 → 73,842 of 80,000, activity rows 72,895 → 79,966 of
-- 80,000; WAL 43.6 → 38.8 records and 7.1 → 6.5 kB per event. At 1M orders before: 416 and 2,713 of
-- 20,000.
ALTER TABLE orders SET (fillfactor = 85);
ALTER TABLE activities SET (fillfactor = 85);

COMMENT ON COLUMN orders.next_sweep_at IS
    'When the sweeper next looks at the order: never later than state->nextSweepAt, possibly earlier; NULL when nothing is left to sweep.';
