-- The subscription scheduler (issue 14, docs/scheduler.md).

-- A shop's settings of the scheduler move to a table of their own (`shops` had reached the
-- sixteen columns diesel is built for), with the days of notice before a payment method expires.
CREATE TABLE shop_settings (
    shop_id BIGINT PRIMARY KEY REFERENCES shops (id),
    order_retry_interval_seconds BIGINT NOT NULL DEFAULT 86400,
    order_max_retries BIGINT NOT NULL DEFAULT 3,
    expiring_payment_notice_days BIGINT NOT NULL DEFAULT 30,
    updated_at BIGINT NOT NULL
);
INSERT INTO shop_settings (shop_id, order_retry_interval_seconds, order_max_retries, updated_at)
SELECT id, order_retry_interval_seconds, order_max_retries, updated_at FROM shops;
ALTER TABLE shops DROP COLUMN order_retry_interval_seconds;
ALTER TABLE shops DROP COLUMN order_max_retries;

-- When the subscription's payment method expires (the first instant of the month after its
-- expiry month), and when `subscription_expiring_payment` was emitted for it.
ALTER TABLE subscriptions ADD COLUMN payment_method_expires_at BIGINT;
ALTER TABLE subscriptions ADD COLUMN expiring_payment_notified_at BIGINT;
-- The scheduler's due orders: by status, the earliest first.
CREATE INDEX subscriptions_due ON subscriptions (subscription_status, next_order_datetime);
-- Payment methods not yet announced as expiring, per shop by expiry.
CREATE INDEX subscriptions_expiring_payment ON subscriptions (shop_id, payment_method_expires_at)
    WHERE expiring_payment_notified_at IS NULL AND payment_method_expires_at IS NOT NULL;

-- Each attempt to place a subscription's order through the connector, and how it ended.
CREATE TABLE subscription_orders (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    shop_id BIGINT NOT NULL REFERENCES shops (id),
    subscription_id BIGINT NOT NULL REFERENCES subscriptions (id),
    -- The order date placed (`next_order_datetime` when the attempt began).
    scheduled_at BIGINT NOT NULL,
    -- 1 for the first attempt of that date, 2 for its first retry...
    attempt BIGINT NOT NULL,
    -- Create Order's Idempotency-Key: the same for every attempt of one date.
    idempotency_key TEXT NOT NULL,
    -- placing, placed or failed.
    status TEXT NOT NULL,
    -- When the order came due (the date, or the retry's time): placement lag is measured from it.
    due_at BIGINT NOT NULL,
    platform_order_id TEXT,
    platform_payment_id TEXT,
    failure_code TEXT,
    failure_reason TEXT,
    finished_at BIGINT,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    UNIQUE (subscription_id, scheduled_at, attempt)
);
CREATE INDEX subscription_orders_subscription ON subscription_orders (subscription_id, id);
-- Attempts still placing, oldest first: those whose job is gone get one again.
CREATE INDEX subscription_orders_placing ON subscription_orders (created_at)
    WHERE status = 'placing';
