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
-- The console's Connector page lists a shop's latest syncs and outbox calls.
CREATE INDEX sync_runs_shop ON sync_runs (shop_id, id);
CREATE INDEX connector_outbox_shop_id ON connector_outbox (shop_id, id);
DROP INDEX connector_outbox_shop;
-- What a message is about (a checkout's `checkout:{public_order_id}`), so the console's
-- Checkouts page lists the webhooks each checkout fired.
ALTER TABLE webhook_messages ADD COLUMN subject TEXT;
CREATE INDEX webhook_messages_subject ON webhook_messages (shop_id, subject, id) WHERE subject IS NOT NULL;
-- The console's Checkouts page lists a shop's checkouts newest first.
CREATE INDEX checkout_orders_shop ON checkout_orders (shop_id, id);
