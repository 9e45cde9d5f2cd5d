-- The person's Live Activity settings per user and device, as the app reports them (`activity.settings`,
-- newest report wins): whether Live Activities are on for the app, and whether frequent updates are. The
-- worker reads a batch's users' rows beside their push-to-start tokens; they choose each activity's
-- priority-10 budget, and a device with Live Activities off is not started and has its activities ended.
CREATE TABLE device_settings (
    user_id                  text COLLATE "C" NOT NULL,
    device_id                text COLLATE "C" NOT NULL,
    activities_enabled       boolean NOT NULL,
    frequent_pushes_enabled  boolean NOT NULL,
    occurred_at              timestamptz NOT NULL,
    event_id                 text COLLATE "C" NOT NULL,
    first_seen_at            timestamptz NOT NULL DEFAULT now(),
    updated_at               timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (user_id, device_id)
);

GRANT SELECT, INSERT, UPDATE ON device_settings TO livedelivery_worker;

-- People by setting: a person counts under each combination one of their devices has.
CREATE OR REPLACE VIEW report_people_by_setting AS
SELECT s.activities_enabled,
       s.frequent_pushes_enabled,
       count(DISTINCT s.user_id) AS people,
       count(*)                  AS devices,
       max(s.occurred_at)        AS last_reported_at
FROM device_settings AS s
GROUP BY 1, 2;

COMMENT ON VIEW report_people_by_setting IS 'People and devices by the Live Activity settings the app last reported for each device (activity.settings).';
COMMENT ON COLUMN report_people_by_setting.activities_enabled IS 'Live Activities on for the app on the device (ActivityAuthorizationInfo.areActivitiesEnabled).';
COMMENT ON COLUMN report_people_by_setting.frequent_pushes_enabled IS 'Frequent updates on (ActivityAuthorizationInfo.frequentPushesEnabled).';
COMMENT ON COLUMN report_people_by_setting.people IS 'Distinct users with a device of these settings (count); a person with devices of different settings counts under each.';
COMMENT ON COLUMN report_people_by_setting.devices IS 'Devices with these settings (count).';
COMMENT ON COLUMN report_people_by_setting.last_reported_at IS 'When the newest of these reports occurred, on the device.';

GRANT SELECT ON report_people_by_setting TO livedelivery_reporting, livedelivery_worker;
