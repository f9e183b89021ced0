DROP INDEX webhook_messages_purgeable;
ALTER TABLE webhook_messages DROP COLUMN purged_at;
ALTER TABLE webhook_messages ADD COLUMN payload_required TEXT NOT NULL DEFAULT '';
UPDATE webhook_messages SET payload_required = COALESCE(payload, '');
ALTER TABLE webhook_messages DROP COLUMN payload;
ALTER TABLE webhook_messages RENAME COLUMN payload_required TO payload;
