-- Request budgets (rate limits) a shop sets, in requests per second; NULL follows the server's
-- default (`serve --rate-limit-per-s` and its siblings), which may be off too. In
-- `shop_settings`, the shop's row of settings (the shops table's declaration is full).
ALTER TABLE shop_settings ADD COLUMN rate_limit_per_s BIGINT;
ALTER TABLE shop_settings ADD COLUMN connector_events_rate_limit_per_s BIGINT;
ALTER TABLE shop_settings ADD COLUMN storefront_rate_limit_per_s BIGINT;
-- The buckets processes on one PostgreSQL database share: the tokens left and when they were
-- last counted (microseconds since the Unix epoch, on the database's clock), and how many
-- whole tokens the last lease took (so the one statement that takes them can return it). SQLite serves one
-- process, whose buckets are in its memory: the table stays empty there.
CREATE TABLE request_budgets (
    budget_key TEXT PRIMARY KEY NOT NULL,
    tokens DOUBLE PRECISION NOT NULL,
    refilled_at BIGINT NOT NULL,
    last_granted DOUBLE PRECISION NOT NULL DEFAULT 0
);
