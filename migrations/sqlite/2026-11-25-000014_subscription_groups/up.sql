-- Subscription groups: what subscriptions and boxes are sold under. A group's
-- products are a JSON array of {platform_product_id, platform_variant_id}; its billing rules
-- are rows, since subscription line items name them by id.
CREATE TABLE subscription_groups (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    shop_id BIGINT NOT NULL REFERENCES shops (id),
    name TEXT NOT NULL,
    percent_discount DOUBLE PRECISION NOT NULL DEFAULT 0,
    products TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);
CREATE INDEX subscription_groups_shop ON subscription_groups (shop_id, id);

CREATE TABLE subscription_group_billing_rules (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    shop_id BIGINT NOT NULL REFERENCES shops (id),
    subscription_group_id BIGINT NOT NULL REFERENCES subscription_groups (id) ON DELETE CASCADE,
    position INTEGER NOT NULL,
    interval_number INTEGER NOT NULL,
    interval_type TEXT NOT NULL,
    interval_name TEXT NOT NULL,
    billing_rule TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);
CREATE INDEX subscription_group_billing_rules_group
    ON subscription_group_billing_rules (subscription_group_id, position);

-- The group and billing rule a line item names, beside its document, so that a group or a rule
-- in use is found without reading every document.
ALTER TABLE subscription_line_items ADD COLUMN subscription_group_id BIGINT;
ALTER TABLE subscription_line_items ADD COLUMN subscription_group_billing_rules_id BIGINT;
UPDATE subscription_line_items
SET subscription_group_id = json_extract(document, '$.subscription_group_id'),
    subscription_group_billing_rules_id = json_extract(document, '$.subscription_group_billing_rules_id');
CREATE INDEX subscription_line_items_group
    ON subscription_line_items (shop_id, subscription_group_id);
CREATE INDEX subscription_line_items_billing_rule
    ON subscription_line_items (shop_id, subscription_group_billing_rules_id);
