-- Sign-in failures, counted per pair of the account a sign-in names (account_key: SHA-256 of
-- its shop and email, whether or not such an account exists) and the client's address (IPv6:
-- its /64). A lock holds only that pair: no one locks an account for everyone else, and an
-- unknown account answers as a known one does. Rows not touched for a day are forgotten.
CREATE TABLE sign_in_failures (
    account_key TEXT NOT NULL,
    client TEXT NOT NULL,
    failures INTEGER NOT NULL,
    locked_until BIGINT,
    updated_at BIGINT NOT NULL,
    PRIMARY KEY (account_key, client)
);
CREATE INDEX sign_in_failures_updated_at ON sign_in_failures (updated_at);

-- The account-wide lock these replace.
ALTER TABLE staff_accounts DROP COLUMN failed_sign_ins;
ALTER TABLE staff_accounts DROP COLUMN locked_until;
