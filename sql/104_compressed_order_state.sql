-- Compress order states with lz4 again, once they exceed the default toast_tuple_target.
--
-- sql/100 kept states inline and uncompressed because pglz cost more CPU than anything else the
-- database did for the worker. The price showed as the table grew: a 2 kB state, rewritten on every
-- event and every push outcome, made `orders` about 5.5 kB per order with its dead versions (555 MB at
-- 100k orders), far beyond shared_buffers, and the cost per event rose by 42-57 % from 10k to 100k
-- orders. lz4 costs a few microseconds per state and stores about 850 bytes of a 2 kB state: 218 MB at
-- 100k orders, and the rise fell to 4-12 %. Outbox pushes live for milliseconds and stay as they are.
ALTER TABLE orders ALTER COLUMN state SET COMPRESSION lz4;
ALTER TABLE orders RESET (toast_tuple_target);
