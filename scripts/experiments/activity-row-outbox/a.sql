\set n random(1, 20000)
BEGIN;
UPDATE act_a SET last_sent_step = 'preparing', pending_kind = 'update', relevance_score = :n, updated_at = now() WHERE order_id = 'o-' || :n AND activity_key = 'activity:' || :n;
INSERT INTO outbox_a (order_id, activity_key, kind, bundle_id, environment, priority, apns_id, push, reason, lease_owner, lease_until, attempts) SELECT 'o-' || :n, 'activity:' || :n, 'update', 'com.example.pizza', 'production', 5, gen_random_uuid(), push, 'status changed', 'w', now() + interval '60 s', 1 FROM push_doc ON CONFLICT (order_id, activity_key) DO UPDATE SET push = EXCLUDED.push, generation = outbox_a.generation + 1;
COMMIT;
BEGIN;
DELETE FROM outbox_a WHERE order_id = 'o-' || :n AND activity_key = 'activity:' || :n;
UPDATE act_a SET last_sent_content = '{"currentStep":"preparing"}', last_sent_step = 'preparing', pending_kind = NULL, delivered_apns_id = gen_random_uuid(), updated_at = now() WHERE order_id = 'o-' || :n AND activity_key = 'activity:' || :n;
COMMIT;
