-- A refused body is kept up to its first 8 KiB, with its whole length and its SHA-256 (computed by the
-- worker, which sends only the prefix): a publisher can no longer fill dead_letters with bodies as
-- large as the broker takes. NULL: the row was written before this migration, and its body is whole.
ALTER TABLE dead_letters ADD COLUMN body_length integer;

COMMENT ON COLUMN dead_letters.body_length IS
    'The whole body''s size, bytes; body holds its first 8 KiB at most. NULL: a row from before sql/119, whose body is whole.';

CREATE OR REPLACE VIEW report_dead_letters AS
SELECT d.id,
       d.received_at,
       d.reason,
       d.routing_key,
       d.event_id,
       d.field,
       d.message,
       coalesce(d.body_length, octet_length(d.body)) AS body_bytes,
       d.replayed_at
FROM dead_letters AS d;
