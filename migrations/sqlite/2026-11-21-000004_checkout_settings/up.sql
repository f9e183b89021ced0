-- API overrides: the secret signs Mercer's requests to the override, so it is
-- kept as written (like shared_secrets); it is never returned.
CREATE TABLE api_overrides (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    public_id TEXT NOT NULL UNIQUE,
    shop_id BIGINT NOT NULL REFERENCES shops (id),
    override_type TEXT NOT NULL,
    url TEXT NOT NULL,
    shared_secret TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);
CREATE INDEX api_overrides_type ON api_overrides (shop_id, override_type, id);

-- OAuth authorization codes: stored as SHA-256 hashes, single use, short-lived.
-- token_id is the token the code was exchanged for, revoked if the code is presented again.
CREATE TABLE oauth_codes (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    code_hash TEXT NOT NULL UNIQUE,
    app_id BIGINT NOT NULL REFERENCES oauth_apps (id),
    shop_id BIGINT NOT NULL REFERENCES shops (id),
    staff_id BIGINT NOT NULL REFERENCES staff_accounts (id),
    redirect_uri TEXT NOT NULL,
    scopes TEXT NOT NULL,
    code_challenge TEXT,
    expires_at BIGINT NOT NULL,
    used_at BIGINT,
    token_id BIGINT REFERENCES api_tokens (id),
    created_at BIGINT NOT NULL
);
