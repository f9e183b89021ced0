DROP INDEX webhook_messages_purgeable;
ALTER TABLE webhook_messages DROP COLUMN purged_at;
UPDATE webhook_messages SET payload = '' WHERE payload IS NULL;
ALTER TABLE webhook_messages ALTER COLUMN payload SET NOT NULL;
