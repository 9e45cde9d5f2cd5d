-- An order's state and a planned push are compact binary documents (`bytea`), no longer JSON text.
--
-- The worker reads an order's state for nearly every event (its cache holds only what it wrote lately)
-- and writes it, and a push, for every event. As JSON, reading and writing those 2 kB documents was
-- almost half the worker's own instructions per status update, and PostgreSQL parsed every document it
-- was sent to check its syntax. The binary layout (`StoredState` and `StoredPush` in the worker) is the
-- fields in order: lengths and integers as varints, numbers and dates as their 8 bytes, no names.
-- Nothing in SQL reads inside them: reports and indexes use the columns beside them and the activities'
-- rows, and an order's history is its timeline.
--
-- The documents of a live deployment keep their JSON text, as bytes: the worker reads a document that
-- starts with `{` as JSON, and writes each in the new form the next time it changes. Stop the workers of
-- the previous release first (they send JSON parameters for json columns; the schema check refuses them
-- anyway). Rewrites the orders and outbox tables under an exclusive lock.
ALTER TABLE orders ALTER COLUMN state TYPE bytea USING convert_to(state::text, 'UTF8');
ALTER TABLE outbox ALTER COLUMN push TYPE bytea USING convert_to(push::text, 'UTF8');
-- States stay whole in the row and compressed with lz4 as before (sql/100, sql/104).
ALTER TABLE orders ALTER COLUMN state SET COMPRESSION lz4;
COMMENT ON COLUMN orders.state IS
    'The worker''s state of the order: a binary document (version byte 1), or JSON text written before sql/118.';
COMMENT ON COLUMN outbox.push IS
    'The push to send: a binary document (version byte 1), or JSON text written before sql/118.';
