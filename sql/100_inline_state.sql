-- Keep order states and outbox pushes inline and uncompressed.
--
-- An order's state (jsonb) is about 2 kB and is rewritten on every event and every push outcome;
-- an outbox push is about as large and lives for milliseconds. Above ~2 kB PostgreSQL compresses
-- such values (pglz) on every write and decompresses them on every read, which cost more CPU than
-- anything else the database did for the worker. Rows up to a page are now stored as they are.
ALTER TABLE orders SET (toast_tuple_target = 8160);
ALTER TABLE outbox SET (toast_tuple_target = 8160);
