PRAGMA foreign_keys = OFF;
BEGIN;
-- One customer record per shop (issue 13): a customer created by the subscription API has no
-- platform id until the connector gives one. NULLs are distinct in the unique key.
CREATE TABLE platform_customers_new (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    shop_id BIGINT NOT NULL REFERENCES shops (id),
    platform_id TEXT,
    email TEXT NOT NULL DEFAULT '',
    first_name TEXT NOT NULL DEFAULT '',
    last_name TEXT NOT NULL DEFAULT '',
    phone TEXT NOT NULL DEFAULT '',
    platform_created_at BIGINT,
    platform_updated_at BIGINT,
    platform_deleted_at BIGINT,
    document TEXT,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    deleted_at BIGINT,
    -- The subscription API's customer notes; the platform sends none.
    notes TEXT,
    UNIQUE (shop_id, platform_id)
);
INSERT INTO platform_customers_new (id, shop_id, platform_id, email, first_name, last_name,
    phone, platform_created_at, platform_updated_at, platform_deleted_at, document, created_at,
    updated_at, deleted_at)
SELECT id, shop_id, platform_id, email, first_name, last_name, phone, platform_created_at,
    platform_updated_at, platform_deleted_at, document, created_at, updated_at, deleted_at
FROM platform_customers;
DROP TABLE platform_customers;
ALTER TABLE platform_customers_new RENAME TO platform_customers;
CREATE INDEX platform_customers_updated_at ON platform_customers (shop_id, updated_at);
CREATE INDEX platform_customers_created_at ON platform_customers (shop_id, created_at);
CREATE INDEX platform_customers_email ON platform_customers (shop_id, email);

-- Subscriptions (issue 13, docs/subscriptions.md). Times are microseconds since the epoch.
CREATE TABLE subscriptions (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    shop_id BIGINT NOT NULL REFERENCES shops (id),
    customer_id BIGINT NOT NULL REFERENCES platform_customers (id),
    billing_address_id BIGINT NOT NULL REFERENCES customer_addresses (id),
    shipping_address_id BIGINT NOT NULL REFERENCES customer_addresses (id),
    orders_processed BIGINT NOT NULL DEFAULT 0,
    current_retries BIGINT NOT NULL DEFAULT 0,
    external_id TEXT,
    idempotency_key TEXT,
    -- SHA-256 of the Create Subscription body: the same key with another body is a conflict.
    idempotency_fingerprint TEXT,
    next_order_datetime BIGINT,
    next_payment_datetime BIGINT,
    next_processing_datetime BIGINT,
    last_payment_datetime BIGINT,
    last_order_datetime BIGINT,
    last_processed_datetime BIGINT,
    status_changed_at BIGINT,
    placed_at BIGINT,
    subscription_status TEXT NOT NULL,
    payment_method_token TEXT,
    payment_gateway_public_id TEXT,
    payment_gateway_customer_id TEXT,
    payment_rrule TEXT NOT NULL,
    payment_rrule_text TEXT NOT NULL,
    order_rrule TEXT NOT NULL,
    order_rrule_text TEXT NOT NULL,
    charged_currency TEXT NOT NULL,
    base_currency TEXT NOT NULL,
    base_to_charged_exchange_rate DOUBLE PRECISION NOT NULL,
    percent_discount DOUBLE PRECISION NOT NULL DEFAULT 0,
    discount_code TEXT,
    -- JSON array of shipping lines.
    shipping_lines TEXT NOT NULL DEFAULT '[]',
    last_failure_code TEXT,
    last_failure_reason TEXT,
    last_failure_message TEXT,
    -- JSON array of the skipped order dates (microseconds), kept beside the rule.
    skipped_dates TEXT NOT NULL DEFAULT '[]',
    note TEXT,
    order_note TEXT,
    latest_status_log_id BIGINT,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);
CREATE UNIQUE INDEX subscriptions_idempotency_key ON subscriptions (shop_id, idempotency_key)
    WHERE idempotency_key IS NOT NULL;
-- The keyset of List Subscriptions is (shop_id, id); the status and customer filters keep it.
CREATE INDEX subscriptions_shop ON subscriptions (shop_id, id);
CREATE INDEX subscriptions_status ON subscriptions (shop_id, subscription_status, id);
CREATE INDEX subscriptions_customer ON subscriptions (shop_id, customer_id, id);
CREATE INDEX subscriptions_next_order ON subscriptions (shop_id, next_order_datetime);

CREATE TABLE subscription_line_items (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    shop_id BIGINT NOT NULL REFERENCES shops (id),
    subscription_id BIGINT NOT NULL REFERENCES subscriptions (id),
    platform_product_id TEXT NOT NULL,
    platform_variant_id TEXT NOT NULL,
    quantity BIGINT NOT NULL,
    price BIGINT NOT NULL,
    -- JSON of the rest of the line item (titles, prices charged, discounts, prepaid metadata,
    -- attributes); the columns above win over it.
    document TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);
CREATE INDEX subscription_line_items_subscription ON subscription_line_items (subscription_id, id);

CREATE TABLE subscription_status_logs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    shop_id BIGINT NOT NULL REFERENCES shops (id),
    subscription_id BIGINT NOT NULL REFERENCES subscriptions (id),
    subscription_status TEXT NOT NULL,
    reason TEXT NOT NULL,
    actor_type TEXT NOT NULL,
    actor_id BIGINT NOT NULL,
    actor_name TEXT NOT NULL,
    created_at BIGINT NOT NULL
);
CREATE INDEX subscription_status_logs_subscription ON subscription_status_logs (subscription_id, id);

-- How many subscriptions each shop has in each status, kept by the triggers below: List
-- Subscriptions' `total` by status without reading a million rows.
CREATE TABLE subscription_counts (
    shop_id BIGINT NOT NULL REFERENCES shops (id),
    subscription_status TEXT NOT NULL,
    subscriptions BIGINT NOT NULL,
    PRIMARY KEY (shop_id, subscription_status)
);
CREATE TRIGGER subscription_counts_insert AFTER INSERT ON subscriptions BEGIN
    INSERT INTO subscription_counts (shop_id, subscription_status, subscriptions)
    VALUES (NEW.shop_id, NEW.subscription_status, 1)
    ON CONFLICT (shop_id, subscription_status) DO UPDATE SET subscriptions = subscriptions + 1;
END;
CREATE TRIGGER subscription_counts_update AFTER UPDATE OF subscription_status ON subscriptions
WHEN OLD.subscription_status <> NEW.subscription_status BEGIN
    UPDATE subscription_counts SET subscriptions = subscriptions - 1
    WHERE shop_id = OLD.shop_id AND subscription_status = OLD.subscription_status;
    INSERT INTO subscription_counts (shop_id, subscription_status, subscriptions)
    VALUES (NEW.shop_id, NEW.subscription_status, 1)
    ON CONFLICT (shop_id, subscription_status) DO UPDATE SET subscriptions = subscriptions + 1;
END;
CREATE TRIGGER subscription_counts_delete AFTER DELETE ON subscriptions BEGIN
    UPDATE subscription_counts SET subscriptions = subscriptions - 1
    WHERE shop_id = OLD.shop_id AND subscription_status = OLD.subscription_status;
END;

PRAGMA foreign_key_check;
COMMIT;
PRAGMA foreign_keys = ON;
