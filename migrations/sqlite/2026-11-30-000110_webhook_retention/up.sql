-- Retention of webhook payloads and attempts: once a message is finished (delivered, failed or
-- cancelled) for longer than the retention period, its attempts are deleted and its payload
-- emptied (NULL), `purged_at` saying when. The message row itself stays, so the delivery log
-- still lists it. Times are microseconds since the Unix epoch.
--
-- SQLite cannot drop NOT NULL in place: the payload moves to a new nullable column of the same
-- name (the table's other columns, indexes and references stay as they are).
ALTER TABLE webhook_messages ADD COLUMN payload_nullable TEXT;
UPDATE webhook_messages SET payload_nullable = payload;
ALTER TABLE webhook_messages DROP COLUMN payload;
ALTER TABLE webhook_messages RENAME COLUMN payload_nullable TO payload;
ALTER TABLE webhook_messages ADD COLUMN purged_at BIGINT;
-- The purge's way to the messages it has left to do, oldest finished first: only finished,
-- unpurged messages are in it, so it stays as small as what the period keeps, and a purge
-- reads the expired ones and nothing else. `updated_at` is a finished message's final time.
CREATE INDEX webhook_messages_purgeable ON webhook_messages (updated_at, id)
    WHERE purged_at IS NULL AND status <> 'pending';
