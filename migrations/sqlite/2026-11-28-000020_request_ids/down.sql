ALTER TABLE webhook_messages DROP COLUMN request_id;
ALTER TABLE jobs DROP COLUMN request_id;
