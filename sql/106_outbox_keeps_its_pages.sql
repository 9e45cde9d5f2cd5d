-- The outbox is a queue: it fills with a backlog and empties again, over and over. When a vacuum finds
-- its tail empty it tries to give the pages back, which needs an ACCESS EXCLUSIVE lock on the busiest
-- table of the worker: autovacuum was seen retrying for that lock for seconds during a backlog, and
-- while it holds it, every claim, push record and new push waits. The pages would be needed again at
-- the next backlog anyway, and a table that keeps its size also keeps the planner's view of it steady.
ALTER TABLE outbox SET (vacuum_truncate = false);
