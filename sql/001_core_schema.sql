-- LiveDelivery core schema: tracked orders and activities, the event inbox, the push outbox,
-- every push attempt, push-to-start tokens, dead letters, paused apps and the per-order timeline.
--
-- The domain core (LiveDeliveryCore) is the single source of truth for transitions: the worker
-- stores its OrderState as jsonb in orders.state (read and written under the order's row lock)
-- and projects each activity into `activities` so that operators and tests can query it.
-- Activity keys (`device:<id>`, `activity:<id>`) are unique within an order only, so every
-- per-activity table is keyed by (order_id, activity_key).

-- One row per order the worker has seen. A row may exist with state NULL: the consumer creates
-- it (INSERT … ON CONFLICT DO NOTHING) so that it can lock it before the first event is applied.
CREATE TABLE orders (
    order_id          text PRIMARY KEY CHECK (length(order_id) BETWEEN 1 AND 64),
    user_id           text,
    status            text,
    terminal          boolean NOT NULL DEFAULT false,
    -- Terminal and nothing left to send (OrderState.isSettled): no longer offered push-to-start tokens.
    settled           boolean NOT NULL DEFAULT false,
    last_sequence     bigint,
    last_occurred_at  timestamptz,
    last_event_id     text,
    state             jsonb,
    next_sweep_at     timestamptz,
    created_at        timestamptz NOT NULL DEFAULT now(),
    updated_at        timestamptz NOT NULL DEFAULT now()
);
-- A push-to-start token is applied to every open order of its user.
CREATE INDEX orders_user_open ON orders (user_id) WHERE NOT settled;
-- The sweeper: only orders with something time-based left to do.
CREATE INDEX orders_sweep_due ON orders (next_sweep_at) WHERE next_sweep_at IS NOT NULL;

-- The projection of each activity of an order (OrderState.activities), rewritten with the order.
CREATE TABLE activities (
    order_id             text NOT NULL REFERENCES orders (order_id) ON DELETE CASCADE,
    activity_key         text NOT NULL,
    activity_id          text,
    device_id            text,
    bundle_id            text,
    environment          text CHECK (environment IN ('production', 'sandbox')),
    state                text NOT NULL CHECK (state IN ('pending_start', 'starting', 'active', 'ending',
                                                         'ended', 'expired', 'failed')),
    end_reason           text,
    token_prefix         text,
    token_received_at    timestamptz,
    last_sent_timestamp  bigint,
    last_sent_content    jsonb,
    last_sent_step       text,
    relevance_score      double precision,
    stale_date           timestamptz,
    alert_count          integer NOT NULL DEFAULT 0,
    pending_kind         text,
    started_at           timestamptz,
    ended_at             timestamptz,
    created_at           timestamptz NOT NULL DEFAULT now(),
    updated_at           timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (order_id, activity_key)
);
CREATE INDEX activities_activity_id ON activities (activity_id) WHERE activity_id IS NOT NULL;
CREATE INDEX activities_live ON activities (state, bundle_id)
    WHERE state IN ('pending_start', 'starting', 'active', 'ending');

-- Idempotency: one row per processed event_id. A redelivered or duplicated event finds its row
-- and changes nothing.
CREATE TABLE inbox (
    event_id     text PRIMARY KEY,
    event_type   text NOT NULL,
    order_id     text,
    user_id      text,
    occurred_at  timestamptz NOT NULL,
    processed_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX inbox_processed_at ON inbox (processed_at);

-- The push outbox: at most one pending push per activity (newest state wins: a newer plan
-- replaces an older one in place and bumps generation). A claimed row is in flight until
-- lease_until; the dispatcher deletes it only if generation is unchanged, else releases the lease
-- so that the newer state goes next and is never overtaken by the older one.
-- `push` is the core's PlannedPush (headers, payload, token) as JSON.
CREATE TABLE outbox (
    order_id      text NOT NULL,
    activity_key  text NOT NULL,
    kind          text NOT NULL CHECK (kind IN ('start', 'update', 'end')),
    bundle_id     text NOT NULL,
    environment   text NOT NULL,
    priority      smallint NOT NULL CHECK (priority IN (5, 10)),
    apns_id       uuid NOT NULL,
    push          jsonb NOT NULL,
    reason        text NOT NULL,
    generation    bigint NOT NULL DEFAULT 1,
    attempts      integer NOT NULL DEFAULT 0,
    not_before    timestamptz NOT NULL DEFAULT now(),
    lease_owner   text,
    lease_until   timestamptz,
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (order_id, activity_key)
);
-- The dispatcher's claim: due rows in not_before order.
CREATE INDEX outbox_due ON outbox (not_before);

-- Apps whose APNs setup is wrong (key, team, topic, certificate): nothing is sent for them
-- until paused_until; their outbox rows wait.
CREATE TABLE app_pauses (
    bundle_id     text PRIMARY KEY,
    reason        text NOT NULL,
    status        integer,
    paused_by     text NOT NULL,
    paused_at     timestamptz NOT NULL DEFAULT now(),
    paused_until  timestamptz NOT NULL
);

-- Every attempt to send a push and what APNs said.
CREATE TABLE push_attempts (
    id            bigserial PRIMARY KEY,
    order_id      text NOT NULL,
    activity_key  text NOT NULL,
    kind          text NOT NULL,
    bundle_id     text NOT NULL,
    priority      smallint NOT NULL,
    generation    bigint NOT NULL,
    apns_id       uuid NOT NULL,
    status        integer,
    outcome       text NOT NULL,
    reason        text,
    latency_ms    double precision NOT NULL,
    worker_id     text NOT NULL,
    attempted_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX push_attempts_activity ON push_attempts (order_id, activity_key, id);
CREATE INDEX push_attempts_time ON push_attempts (attempted_at);

-- Push-to-start tokens, one per user and device (newest report wins); APNs retires them.
CREATE TABLE push_to_start_tokens (
    user_id          text NOT NULL,
    device_id        text NOT NULL,
    registration     jsonb NOT NULL,
    bundle_id        text NOT NULL,
    attributes_type  text NOT NULL,
    environment      text NOT NULL,
    token_prefix     text NOT NULL,
    occurred_at      timestamptz NOT NULL,
    event_id         text NOT NULL,
    first_seen_at    timestamptz NOT NULL DEFAULT now(),
    last_seen_at     timestamptz NOT NULL DEFAULT now(),
    invalidated_at   timestamptz,
    invalid_reason   text,
    PRIMARY KEY (user_id, device_id)
);

-- Messages the worker refused, with a machine-readable reason; operators list and replay them.
-- One row per distinct message (routing key and body), so a redelivery adds nothing.
CREATE TABLE dead_letters (
    id           bigserial PRIMARY KEY,
    event_id     text,
    routing_key  text NOT NULL DEFAULT '',
    reason       text NOT NULL,
    field        text,
    message      text NOT NULL,
    body         bytea NOT NULL,
    body_sha256  bytea NOT NULL,
    received_at  timestamptz NOT NULL DEFAULT now(),
    replayed_at  timestamptz,
    UNIQUE (routing_key, body_sha256)
);
CREATE INDEX dead_letters_reason ON dead_letters (reason, received_at);

-- The timeline of each order: decisions of the core, pushes and outcomes, in order.
CREATE TABLE timeline (
    id            bigserial PRIMARY KEY,
    order_id      text NOT NULL,
    activity_key  text,
    at            timestamptz NOT NULL DEFAULT now(),
    kind          text NOT NULL CHECK (kind IN ('event', 'outcome', 'sweep')),
    code          text NOT NULL,
    message       text NOT NULL
);
CREATE INDEX timeline_order ON timeline (order_id, id);
