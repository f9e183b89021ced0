-- The operator console (/console): staff sessions, the audit log of what staff did there, and
-- the indexes its shop-wide lists page by (newest first, by id).

-- A signed-in staff member's session. The token is only in the browser's cookie; a session is
-- found by its SHA-256. It ends at expires_at, or after an hour unseen (last_seen_at).
CREATE TABLE staff_sessions (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    token_hash TEXT NOT NULL UNIQUE,
    shop_id BIGINT NOT NULL REFERENCES shops (id),
    staff_id BIGINT NOT NULL REFERENCES staff_accounts (id) ON DELETE CASCADE,
    created_at BIGINT NOT NULL,
    last_seen_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL
);
CREATE INDEX staff_sessions_expires_at ON staff_sessions (expires_at);

-- Who did what, when: one row per action taken in the console, written in the action's own
-- transaction. The subject names what was acted on; never a secret.
CREATE TABLE audit_log (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    shop_id BIGINT NOT NULL REFERENCES shops (id),
    staff_id BIGINT NOT NULL,
    staff_email TEXT NOT NULL,
    action TEXT NOT NULL,
    subject TEXT NOT NULL,
    at BIGINT NOT NULL
);
CREATE INDEX audit_log_shop ON audit_log (shop_id, id);

CREATE INDEX webhook_messages_shop ON webhook_messages (shop_id, id);
CREATE INDEX webhook_messages_shop_topic ON webhook_messages (shop_id, topic, id);
CREATE INDEX webhook_messages_shop_status ON webhook_messages (shop_id, status, id);
-- The overview counts a day of messages of each status from this index alone.
CREATE INDEX webhook_messages_shop_status_created ON webhook_messages (shop_id, status, created_at);

-- The shop a job works for, when it works for one (a sync, an outbox delivery, an order to
-- push or place); process-wide jobs (the scheduler's tick, sweeps) have none. The console
-- lists a shop's jobs by it.
ALTER TABLE jobs ADD COLUMN shop_id BIGINT;
CREATE INDEX jobs_shop ON jobs (shop_id, id);
