DROP INDEX jobs_shop;
ALTER TABLE jobs DROP COLUMN shop_id;
DROP INDEX webhook_messages_shop_status_created;
DROP INDEX webhook_messages_shop_status;
DROP INDEX webhook_messages_shop_topic;
DROP INDEX webhook_messages_shop;
DROP TABLE audit_log;
DROP TABLE staff_sessions;
