-- A shop's activity counted in five-minute buckets (kernel::activity): the console's overview
-- sums a day of them instead of counting the day's messages and events.
CREATE TABLE shop_activity (
    shop_id BIGINT NOT NULL,
    bucket BIGINT NOT NULL,
    activity TEXT NOT NULL,
    count BIGINT NOT NULL,
    PRIMARY KEY (shop_id, bucket, activity)
);
-- The hourly prune deletes by age.
CREATE INDEX shop_activity_bucket ON shop_activity (bucket);
-- The overview no longer counts messages; the Webhooks page jumps to a time instead.
DROP INDEX webhook_messages_shop_status_created;
CREATE INDEX webhook_messages_shop_created ON webhook_messages (shop_id, created_at);
