-- report_sweeper_actions: a terminal order whose end APNs did not accept, ended again by the sweeper.
--
-- The sweeper records `sweep_terminal_not_ended` and plans the end in the same step. The view did not
-- know that code, so the re-sent end was counted as `end_finished_order`, as if the order had just
-- finished. It now counts once, under its own reason. Same columns: the reporting role's grant stays.
CREATE OR REPLACE VIEW report_sweeper_actions AS
WITH actions AS (
    SELECT t.order_id, t.activity_key, t.at,
           CASE
               WHEN t.code IN ('sweep_lifetime', 'sweep_idle', 'sweep_never_adopted', 'sweep_terminal_not_ended',
                               'operator_retry') THEN t.code
               WHEN t.code = 'end_planned' THEN 'end_finished_order'
               WHEN t.code = 'start_planned' THEN 'start_retried'
               WHEN t.code = 'update_planned' THEN 'update_replanned'
           END AS reason
    FROM timeline AS t
    WHERE t.kind = 'sweep'
      AND t.code IN ('sweep_lifetime', 'sweep_idle', 'sweep_never_adopted', 'sweep_terminal_not_ended',
                     'operator_retry', 'end_planned', 'start_planned', 'update_planned')
      -- An end planned because of sweep_lifetime/sweep_idle/sweep_terminal_not_ended is that action,
      -- not a second one.
      AND NOT (t.code = 'end_planned' AND EXISTS (
          SELECT 1 FROM timeline AS s
          WHERE s.order_id = t.order_id AND s.activity_key = t.activity_key AND s.at = t.at
            AND s.kind = 'sweep' AND s.code IN ('sweep_lifetime', 'sweep_idle', 'sweep_terminal_not_ended')))
      AND NOT (t.code LIKE '%\_planned' AND EXISTS (
          SELECT 1 FROM timeline AS r
          WHERE r.order_id = t.order_id AND r.at = t.at AND r.kind = 'sweep' AND r.code = 'operator_retry'))
)
SELECT date_trunc('day', x.at)            AS day,
       coalesce(a.bundle_id, '(none)')    AS app,
       x.reason,
       count(*)                           AS actions,
       count(DISTINCT x.order_id)         AS orders,
       min(x.at)                          AS first_at,
       max(x.at)                          AS last_at
FROM actions AS x
LEFT JOIN activities AS a USING (order_id, activity_key)
GROUP BY 1, 2, 3;
