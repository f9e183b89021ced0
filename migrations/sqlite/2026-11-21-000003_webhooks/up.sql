-- Webhooks Mercer sends: endpoints, the messages queued for them (one per endpoint, with a
-- webhook-id that stays the same on every attempt), and every attempt.

CREATE TABLE webhook_endpoints (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    public_id TEXT NOT NULL UNIQUE,
    shop_id BIGINT NOT NULL REFERENCES shops (id),
    kind TEXT NOT NULL,
    topic TEXT NOT NULL,
    callback_url TEXT NOT NULL,
    -- The endpoint's own secret (subscription webhooks); checkout webhooks sign with the
    -- shop's integration secret.
    secret TEXT,
    disabled_at BIGINT,
    disabled_reason TEXT,
    failing_since BIGINT,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    deleted_at BIGINT
);
CREATE INDEX webhook_endpoints_topic ON webhook_endpoints (shop_id, kind, topic);

CREATE TABLE webhook_messages (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    message_id TEXT NOT NULL UNIQUE,
    shop_id BIGINT NOT NULL REFERENCES shops (id),
    endpoint_id BIGINT NOT NULL REFERENCES webhook_endpoints (id),
    topic TEXT NOT NULL,
    payload TEXT NOT NULL,
    status TEXT NOT NULL,
    attempts BIGINT NOT NULL,
    next_attempt_at BIGINT NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    delivered_at BIGINT
);
CREATE INDEX webhook_messages_due ON webhook_messages (next_attempt_at) WHERE status = 'pending';
CREATE INDEX webhook_messages_endpoint ON webhook_messages (endpoint_id, id);

CREATE TABLE webhook_attempts (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    message_id BIGINT NOT NULL REFERENCES webhook_messages (id),
    attempted_at BIGINT NOT NULL,
    status INTEGER,
    latency_us BIGINT NOT NULL,
    response TEXT,
    error TEXT,
    retry_after_ms BIGINT
);
CREATE INDEX webhook_attempts_message ON webhook_attempts (message_id);
