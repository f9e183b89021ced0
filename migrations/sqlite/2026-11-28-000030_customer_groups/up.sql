-- The customer groups a platform says its customers belong to (wholesale, staff, VIP), from the
-- `groups` of Customer Saved events and synced customers. A group is the shop's, keyed by its
-- platform id, and keeps the newest name the platform gave it; a group no customer belongs to
-- any more stays. A membership goes with its customer's row and with its group's.
CREATE TABLE customer_groups (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    shop_id BIGINT NOT NULL REFERENCES shops (id),
    platform_id TEXT NOT NULL,
    name TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    UNIQUE (shop_id, platform_id)
);

CREATE TABLE customer_group_members (
    customer_id BIGINT NOT NULL REFERENCES platform_customers (id) ON DELETE CASCADE,
    group_id BIGINT NOT NULL REFERENCES customer_groups (id) ON DELETE CASCADE,
    PRIMARY KEY (customer_id, group_id)
);
-- A group's members, for the cascade from a deleted group.
CREATE INDEX customer_group_members_group ON customer_group_members (group_id);
