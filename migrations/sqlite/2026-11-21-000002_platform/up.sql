-- The platform connector: destinations, the platform's entities, the event queue, syncs and
-- the outbox of calls to connectors. Times are integer microseconds since the Unix epoch.

CREATE TABLE destinations (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    shop_id BIGINT NOT NULL REFERENCES shops (id),
    topic TEXT NOT NULL,
    url TEXT NOT NULL,
    version TEXT NOT NULL,
    timeout_ms BIGINT NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    deleted_at BIGINT
);
-- At most one live destination per topic and shop.
CREATE UNIQUE INDEX destinations_live_topic ON destinations (shop_id, topic) WHERE deleted_at IS NULL;

-- platform_* columns are the platform's times; created_at/updated_at/deleted_at are Mercer's.
-- document is the entity as JSON; the columns pulled out of it are those filtered or sorted on.
CREATE TABLE platform_customers (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    shop_id BIGINT NOT NULL REFERENCES shops (id),
    platform_id TEXT NOT NULL,
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
    UNIQUE (shop_id, platform_id)
);
CREATE INDEX platform_customers_updated_at ON platform_customers (shop_id, updated_at);
CREATE INDEX platform_customers_created_at ON platform_customers (shop_id, created_at);
CREATE INDEX platform_customers_email ON platform_customers (shop_id, email);

CREATE TABLE customer_addresses (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    shop_id BIGINT NOT NULL REFERENCES shops (id),
    customer_id BIGINT NOT NULL REFERENCES platform_customers (id),
    -- The platform id, or the address's position for addresses the platform gave no id.
    address_key TEXT NOT NULL,
    platform_id TEXT,
    is_default BOOLEAN NOT NULL,
    document TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    deleted_at BIGINT
);
CREATE UNIQUE INDEX customer_addresses_key ON customer_addresses (customer_id, address_key);

CREATE TABLE customer_labels (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    shop_id BIGINT NOT NULL REFERENCES shops (id),
    customer_id BIGINT NOT NULL REFERENCES platform_customers (id),
    name TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    deleted_at BIGINT
);
CREATE INDEX customer_labels_customer ON customer_labels (customer_id);
CREATE INDEX customer_labels_name ON customer_labels (shop_id, name);

CREATE TABLE platform_orders (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    shop_id BIGINT NOT NULL REFERENCES shops (id),
    platform_id TEXT NOT NULL,
    platform_customer_id TEXT,
    order_number TEXT,
    fulfillment_status TEXT,
    financial_status TEXT,
    placed_at BIGINT,
    platform_updated_at BIGINT,
    platform_deleted_at BIGINT,
    document TEXT,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    deleted_at BIGINT,
    UNIQUE (shop_id, platform_id)
);
CREATE INDEX platform_orders_customer ON platform_orders (shop_id, platform_customer_id);

CREATE TABLE platform_products (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    shop_id BIGINT NOT NULL REFERENCES shops (id),
    platform_id TEXT NOT NULL,
    name TEXT,
    handle TEXT,
    published BOOLEAN,
    platform_updated_at BIGINT,
    platform_deleted_at BIGINT,
    document TEXT,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    deleted_at BIGINT,
    UNIQUE (shop_id, platform_id)
);

CREATE TABLE product_variants (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    shop_id BIGINT NOT NULL REFERENCES shops (id),
    product_id BIGINT NOT NULL REFERENCES platform_products (id),
    platform_id TEXT,
    sku TEXT,
    name TEXT,
    price TEXT,
    inventory_quantity BIGINT,
    document TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    deleted_at BIGINT
);
CREATE INDEX product_variants_product ON product_variants (product_id);
CREATE INDEX product_variants_platform_id ON product_variants (shop_id, platform_id);

CREATE TABLE platform_categories (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    shop_id BIGINT NOT NULL REFERENCES shops (id),
    platform_id TEXT NOT NULL,
    name TEXT,
    image_url TEXT,
    platform_updated_at BIGINT,
    platform_deleted_at BIGINT,
    document TEXT,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    deleted_at BIGINT,
    UNIQUE (shop_id, platform_id)
);

-- Events received and stored before their 202, applied in id (arrival) order, then deleted:
-- the table holds what is still to apply.
CREATE TABLE inbound_events (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    shop_id BIGINT NOT NULL REFERENCES shops (id),
    entity TEXT NOT NULL,
    action TEXT NOT NULL,
    platform_id TEXT NOT NULL,
    occurred_at BIGINT NOT NULL,
    document TEXT,
    source TEXT NOT NULL,
    received_at BIGINT NOT NULL
);

CREATE TABLE sync_runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    shop_id BIGINT NOT NULL REFERENCES shops (id),
    topic TEXT NOT NULL,
    status TEXT NOT NULL,
    pages BIGINT NOT NULL,
    items BIGINT NOT NULL,
    skipped BIGINT NOT NULL,
    error TEXT,
    started_at BIGINT NOT NULL,
    heartbeat_at BIGINT NOT NULL,
    finished_at BIGINT
);
-- At most one running sync per topic and shop.
CREATE UNIQUE INDEX sync_runs_running ON sync_runs (shop_id, topic) WHERE status = 'running';

-- Calls to make on connectors (service-side changes), with their retries.
CREATE TABLE connector_outbox (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    shop_id BIGINT NOT NULL REFERENCES shops (id),
    topic TEXT NOT NULL,
    call TEXT NOT NULL,
    status TEXT NOT NULL,
    attempts BIGINT NOT NULL,
    next_attempt_at BIGINT NOT NULL,
    locked_until BIGINT,
    last_error TEXT,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);
CREATE INDEX connector_outbox_due ON connector_outbox (next_attempt_at) WHERE status = 'pending';
CREATE INDEX connector_outbox_shop ON connector_outbox (shop_id);
