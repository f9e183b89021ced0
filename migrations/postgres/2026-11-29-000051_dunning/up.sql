-- A shop's dunning policy, once it sets one: the waits before each retry of a failed
-- subscription order, in seconds (a JSON array of integers, in order), and what happens when the
-- last retry fails (`cancel`, `pause` or `skip_order`). A shop without a row follows its
-- `order_retry_interval_seconds` and `order_max_retries` (shop_settings).
CREATE TABLE subscription_dunning_policies (
    shop_id BIGINT PRIMARY KEY NOT NULL REFERENCES shops (id),
    retry_intervals_s TEXT NOT NULL,
    at_max_retries TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);
