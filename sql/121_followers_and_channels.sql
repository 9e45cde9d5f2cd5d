-- Orders that several people follow (`order.followers`), and their broadcast channels (iOS 18).
--
-- order_followers: who follows which order besides its own user, as the newest report says. A follower's
-- push-to-start token or settings report reaches the open orders they follow through it.
CREATE TABLE order_followers (
    order_id  text COLLATE "C" NOT NULL,
    user_id   text COLLATE "C" NOT NULL,
    PRIMARY KEY (order_id, user_id)
);
CREATE INDEX order_followers_by_user ON order_followers (user_id);

-- broadcast_channels: one row per order the worker decided on a channel for, kept beside the order's state
-- (which holds the same facts). A channel counts against Apple's limit of channels per app and environment
-- until it is closed: from the moment its creation is planned until APNs deleted it, refused it or lost it.
CREATE TABLE broadcast_channels (
    order_id            text COLLATE "C" PRIMARY KEY,
    bundle_id           text COLLATE "C" NOT NULL,
    environment         text COLLATE "C" NOT NULL,
    channel_id          text COLLATE "C",
    stores_most_recent  boolean NOT NULL,
    phase               text COLLATE "C" NOT NULL,
    close_reason        text,
    planned_at          timestamptz NOT NULL DEFAULT now(),
    updated_at          timestamptz NOT NULL DEFAULT now(),
    closed_at           timestamptz
);
CREATE INDEX broadcast_channels_open ON broadcast_channels (bundle_id, environment) WHERE closed_at IS NULL;

GRANT SELECT, INSERT, UPDATE, DELETE ON order_followers TO livedelivery_worker;
GRANT SELECT, INSERT, UPDATE ON broadcast_channels TO livedelivery_worker;

-- Channels by app, environment and phase.
CREATE OR REPLACE VIEW report_broadcast_channels AS
SELECT c.bundle_id,
       c.environment,
       c.phase,
       count(*)                                   AS channels,
       count(*) FILTER (WHERE c.closed_at IS NULL) AS open,
       max(c.updated_at)                          AS last_changed_at
FROM broadcast_channels AS c
GROUP BY 1, 2, 3;

COMMENT ON VIEW report_broadcast_channels IS 'Broadcast channels of orders that several people follow, by app, environment and phase (pending_start, active, ending, ended, failed).';
COMMENT ON COLUMN report_broadcast_channels.bundle_id IS 'The app''s bundle id.';
COMMENT ON COLUMN report_broadcast_channels.environment IS 'production or sandbox: channels are counted per app and environment.';
COMMENT ON COLUMN report_broadcast_channels.phase IS 'Where the channel is: pending_start (creation planned), active, ending (end broadcast or deletion planned), ended (deleted), failed (refused, near the limit, or lost).';
COMMENT ON COLUMN report_broadcast_channels.channels IS 'Channels (count).';
COMMENT ON COLUMN report_broadcast_channels.open IS 'Of them, those that count against Apple''s limit (not yet deleted, refused or lost).';
COMMENT ON COLUMN report_broadcast_channels.last_changed_at IS 'When the newest of them last changed.';

GRANT SELECT ON report_broadcast_channels TO livedelivery_reporting, livedelivery_worker;

-- The outbox carries a channel's creation and deletion as the order's `channel` row.
ALTER TABLE outbox DROP CONSTRAINT outbox_kind_check;
ALTER TABLE outbox ADD CONSTRAINT outbox_kind_check
    CHECK (kind IN ('start', 'update', 'end', 'open_channel', 'close_channel'));
