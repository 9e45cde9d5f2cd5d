\set n random(1, 20000)
BEGIN;
UPDATE act_b SET last_sent_step = 'preparing', pending_kind = 'update', relevance_score = :n, updated_at = now(), push = (SELECT push FROM push_doc), push_priority = 5, push_apns_id = gen_random_uuid(), push_reason = 'status changed', generation = generation + 1, attempts = 1, not_before = now(), lease_owner = 'w', lease_until = now() + interval '60 s' WHERE order_id = 'o-' || :n AND activity_key = 'activity:' || :n;
COMMIT;
BEGIN;
UPDATE act_b SET last_sent_content = '{"currentStep":"preparing"}', last_sent_step = 'preparing', pending_kind = NULL, delivered_apns_id = gen_random_uuid(), updated_at = now(), push = NULL, push_priority = NULL, push_apns_id = NULL, push_reason = NULL, attempts = 0, not_before = NULL, lease_owner = NULL, lease_until = NULL WHERE order_id = 'o-' || :n AND activity_key = 'activity:' || :n;
COMMIT;
