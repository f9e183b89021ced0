DROP INDEX webhook_messages_shop_created;
CREATE INDEX webhook_messages_shop_status_created ON webhook_messages (shop_id, status, created_at);
DROP TABLE shop_activity;
