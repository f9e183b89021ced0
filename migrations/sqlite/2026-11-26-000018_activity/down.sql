DROP INDEX checkout_orders_shop;
DROP INDEX webhook_messages_subject;
ALTER TABLE webhook_messages DROP COLUMN subject;
CREATE INDEX connector_outbox_shop ON connector_outbox (shop_id);
DROP INDEX connector_outbox_shop_id;
DROP INDEX sync_runs_shop;
DROP INDEX webhook_messages_shop_created;
CREATE INDEX webhook_messages_shop_status_created ON webhook_messages (shop_id, status, created_at);
DROP TABLE shop_activity;
