ALTER TABLE shops DROP COLUMN order_max_retries;
ALTER TABLE shops DROP COLUMN order_retry_interval_seconds;
