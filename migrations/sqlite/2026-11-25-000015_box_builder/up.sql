-- The box builder: boxes sold under a subscription group (one box
-- a group), the products they offer, their sizes, their time slots and the products offered
-- in each slot. Attributes are JSON arrays kept with the resource they describe.
CREATE TABLE boxes (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    shop_id BIGINT NOT NULL REFERENCES shops (id),
    subscription_group_id BIGINT NOT NULL REFERENCES subscription_groups (id),
    box_name TEXT NOT NULL,
    attributes TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    UNIQUE (shop_id, subscription_group_id)
);

CREATE TABLE box_products (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    shop_id BIGINT NOT NULL REFERENCES shops (id),
    platform_product_id TEXT NOT NULL,
    platform_variant_id TEXT NOT NULL,
    attributes TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);
CREATE INDEX box_products_shop ON box_products (shop_id, id);

CREATE TABLE box_sizes (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    shop_id BIGINT NOT NULL REFERENCES shops (id),
    box_id BIGINT NOT NULL REFERENCES boxes (id),
    box_size_name TEXT NOT NULL,
    pricing_mode TEXT NOT NULL,
    min_quantity BIGINT NOT NULL,
    max_quantity BIGINT NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);
CREATE INDEX box_sizes_box ON box_sizes (box_id, id);

CREATE TABLE time_slots (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    shop_id BIGINT NOT NULL REFERENCES shops (id),
    box_id BIGINT NOT NULL REFERENCES boxes (id),
    time_slot_name TEXT NOT NULL,
    start_date BIGINT NOT NULL,
    end_date BIGINT NOT NULL,
    selection_deadline_date BIGINT NOT NULL,
    visibility_date BIGINT NOT NULL,
    attributes TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);
CREATE INDEX time_slots_box ON time_slots (box_id, start_date);

-- The products a slot offers, in the order they were added (`id`).
CREATE TABLE time_slot_options (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    shop_id BIGINT NOT NULL REFERENCES shops (id),
    time_slot_id BIGINT NOT NULL REFERENCES time_slots (id),
    box_product_id BIGINT NOT NULL REFERENCES box_products (id),
    created_at BIGINT NOT NULL,
    UNIQUE (time_slot_id, box_product_id)
);
CREATE INDEX time_slot_options_product ON time_slot_options (box_product_id);
