-- The outbox is a queue: every push inserts a row and deletes it once APNs has answered, so its live
-- rows stay few while its dead ones pile up at the rate of the pushes, and a new row finds no free
-- space until a vacuum has run. With the default threshold (a fifth of the live rows, so nearly always
-- due) but the default throttling, a backlog of 2M events left the outbox at 649 and 666 MB of pages
-- for a few thousand live rows. Vacuumed unthrottled once 5,000 rows are dead, it ended at 471 and
-- 474 MB: what is left is autovacuum's own pace, one look at a database a minute (autovacuum_naptime).
ALTER TABLE outbox SET (
    autovacuum_vacuum_scale_factor = 0,
    autovacuum_vacuum_threshold = 5000,
    autovacuum_vacuum_cost_delay = 0
);
