DROP TABLE webhook_throttles;
DROP INDEX webhook_messages_throttled_due;
DROP INDEX webhook_messages_due;
CREATE INDEX webhook_messages_due ON webhook_messages (next_attempt_at) WHERE status = 'pending';
ALTER TABLE webhook_messages DROP COLUMN throttled;
ALTER TABLE webhook_endpoints DROP COLUMN rate_limit_per_s;
