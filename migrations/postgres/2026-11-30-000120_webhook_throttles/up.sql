-- Per-endpoint throttling: an endpoint with `rate_limit_per_s` gets deliveries that start at
-- least 1/rate_limit_per_s seconds apart, however many processes deliver.
--
-- `throttled` marks the messages of throttled endpoints (set when they are enqueued, and on
-- the pending ones when the endpoint's limit is set or cleared): the claim of everything else
-- reads `webhook_messages_due`, which leaves them out, so its cost does not change with any
-- throttled backlog; throttled messages are found per endpoint by
-- `webhook_messages_throttled_due`. Every pending message is in exactly one of the two.
ALTER TABLE webhook_endpoints ADD COLUMN rate_limit_per_s INTEGER;
ALTER TABLE webhook_messages ADD COLUMN throttled BOOLEAN NOT NULL DEFAULT false;
DROP INDEX webhook_messages_due;
CREATE INDEX webhook_messages_due ON webhook_messages (next_attempt_at)
    WHERE status = 'pending' AND NOT throttled;
CREATE INDEX webhook_messages_throttled_due ON webhook_messages (endpoint_id, next_attempt_at)
    WHERE status = 'pending' AND throttled;
-- One row per throttled endpoint: the spacing of its deliveries' starts (microseconds) and the
-- earliest time the next one may start (microseconds since the Unix epoch). A claim locks the
-- row, hands out the send times from `next_slot_at` on and moves it past them.
CREATE TABLE webhook_throttles (
    endpoint_id BIGINT PRIMARY KEY NOT NULL REFERENCES webhook_endpoints (id),
    interval_us BIGINT NOT NULL,
    next_slot_at BIGINT NOT NULL
);
