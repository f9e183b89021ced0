-- Times are integer microseconds since the Unix epoch, UTC.

CREATE TABLE shops (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    identifier TEXT NOT NULL UNIQUE,
    shop_domain TEXT NOT NULL UNIQUE,
    custom_domain TEXT,
    platform_type TEXT NOT NULL,
    timezone TEXT NOT NULL,
    currency TEXT NOT NULL,
    currency_format TEXT NOT NULL,
    shop_owner TEXT NOT NULL,
    admin_email TEXT NOT NULL,
    pii_redacted_at BIGINT,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    deleted_at BIGINT
);

-- Tokens are stored as SHA-256 hashes only; token_prefix tells them apart in listings.
CREATE TABLE api_tokens (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    shop_id BIGINT NOT NULL REFERENCES shops (id),
    name TEXT NOT NULL,
    token_hash TEXT NOT NULL UNIQUE,
    token_prefix TEXT NOT NULL,
    scopes TEXT NOT NULL,
    source TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    revoked_at BIGINT
);
CREATE INDEX api_tokens_shop_id ON api_tokens (shop_id);

-- Secrets shared with a party outside Mercer; used to sign, so kept as written.
CREATE TABLE shared_secrets (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    shop_id BIGINT NOT NULL REFERENCES shops (id),
    kind TEXT NOT NULL,
    current_secret TEXT NOT NULL,
    previous_secret TEXT,
    previous_valid_until BIGINT,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    UNIQUE (shop_id, kind)
);

CREATE TABLE staff_accounts (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    shop_id BIGINT NOT NULL REFERENCES shops (id),
    email TEXT NOT NULL,
    password_hash TEXT NOT NULL,
    failed_sign_ins INTEGER NOT NULL DEFAULT 0,
    locked_until BIGINT,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    UNIQUE (shop_id, email)
);

-- client_secret_hash: SHA-256 of the client secret. redirect_uris: JSON array of exact URIs.
CREATE TABLE oauth_apps (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    client_id TEXT NOT NULL UNIQUE,
    client_secret_hash TEXT NOT NULL,
    name TEXT NOT NULL,
    redirect_uris TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    revoked_at BIGINT
);
