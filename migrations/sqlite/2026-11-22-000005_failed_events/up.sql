-- An event that fails to apply is tried again later (attempts, retry_at), and after the last
-- attempt set aside in failed_inbound_events, so the events behind it go on.
ALTER TABLE inbound_events ADD COLUMN attempts BIGINT NOT NULL DEFAULT 0;
ALTER TABLE inbound_events ADD COLUMN retry_at BIGINT NOT NULL DEFAULT 0;
ALTER TABLE inbound_events ADD COLUMN last_error TEXT;

-- id is the id the event had in the queue; `mercer events retry` puts it back under it.
CREATE TABLE failed_inbound_events (
    id BIGINT PRIMARY KEY,
    shop_id BIGINT NOT NULL REFERENCES shops (id),
    entity TEXT NOT NULL,
    action TEXT NOT NULL,
    platform_id TEXT NOT NULL,
    occurred_at BIGINT NOT NULL,
    document TEXT,
    source TEXT NOT NULL,
    received_at BIGINT NOT NULL,
    attempts BIGINT NOT NULL,
    error TEXT NOT NULL,
    failed_at BIGINT NOT NULL
);
