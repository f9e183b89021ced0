-- The subscriber portal (/portal/shops/{shop}): its sessions, and how a shop brands its pages.

-- A customer's session on a shop's portal, opened once the shop's connector said their
-- platform token is theirs. The token is only in the browser's cookie; a session is found by
-- its SHA-256. It reaches one shop and one customer, and ends at expires_at, which each use
-- moves to 8 hours ahead.
CREATE TABLE portal_sessions (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    token_hash TEXT NOT NULL UNIQUE,
    shop_id BIGINT NOT NULL REFERENCES shops (id),
    platform_customer_id TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    last_seen_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL
);
CREATE INDEX portal_sessions_expires_at ON portal_sessions (expires_at);

-- The portal's accent colour (#rgb or #rrggbb) and logo URL; the portal's own look when NULL.
ALTER TABLE shops ADD COLUMN portal_accent TEXT;
ALTER TABLE shops ADD COLUMN portal_logo_url TEXT;
