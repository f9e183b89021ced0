-- How the scheduler retries a subscription order that failed (issue 14): after this many
-- seconds, at most this many times; `mercer shop update --order-retry-interval --order-max-retries`.
ALTER TABLE shops ADD COLUMN order_retry_interval_seconds BIGINT NOT NULL DEFAULT 86400;
ALTER TABLE shops ADD COLUMN order_max_retries BIGINT NOT NULL DEFAULT 3;
