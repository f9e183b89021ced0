-- What a subscribed customer chose for one order of a box: one
-- selection per subscription line item and order date (a second replaces the first). Its
-- chosen products are JSON: [{box_product_id, choice_quantity}].
CREATE TABLE box_selections (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    shop_id BIGINT NOT NULL REFERENCES shops (id),
    platform_customer_id TEXT NOT NULL,
    subscription_line_item_id BIGINT NOT NULL REFERENCES subscription_line_items (id),
    box_id BIGINT NOT NULL REFERENCES boxes (id),
    box_size_id BIGINT NOT NULL REFERENCES box_sizes (id),
    time_slot_id BIGINT NOT NULL REFERENCES time_slots (id),
    order_datetime BIGINT NOT NULL,
    line_items TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    UNIQUE (shop_id, subscription_line_item_id, order_datetime)
);
CREATE INDEX box_selections_customer ON box_selections (shop_id, platform_customer_id, id);
CREATE INDEX box_selections_box ON box_selections (box_id);
CREATE INDEX box_selections_slot ON box_selections (time_slot_id);
