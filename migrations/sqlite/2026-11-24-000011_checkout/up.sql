-- The headless checkout (docs/checkout.md).

-- A shop's checkout settings (mercer shop update, PATCH /checkout/shop/{shop}/settings).
-- The shop's built-in abandoned-cart emails: while on, order/abandoned is not sent.
ALTER TABLE shop_settings ADD COLUMN abandoned_cart_emails BOOLEAN NOT NULL DEFAULT 1;
-- gift_card/created for the SKUs below, only while on.
ALTER TABLE shop_settings ADD COLUMN gift_cards_enabled BOOLEAN NOT NULL DEFAULT 0;
-- The SKUs the shop marked as gift cards: a JSON array of strings.
ALTER TABLE shop_settings ADD COLUMN gift_card_skus TEXT NOT NULL DEFAULT '[]';
-- The shipping line offered, in cents, when no shipping override is registered.
ALTER TABLE shop_settings ADD COLUMN flat_shipping_rate_cents BIGINT NOT NULL DEFAULT 0;

-- One checkout (an order being made at the storefront, then pushed to the platform). What the
-- storefront shows (application_state) and the per-order overrides are the JSON document; the
-- columns are what is looked up or swept by.
CREATE TABLE checkout_orders (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    shop_id BIGINT NOT NULL REFERENCES shops (id),
    -- 32 hex, the storefront's handle on the order.
    public_order_id TEXT NOT NULL UNIQUE,
    -- open, processed (being pushed to the platform), created, failed.
    status TEXT NOT NULL,
    -- The customer's email, once given (order/abandoned needs one).
    email TEXT,
    item_count BIGINT NOT NULL,
    platform_order_id TEXT,
    -- The last change made at the storefront: abandonment is counted from it.
    last_activity_at BIGINT NOT NULL,
    -- When order/abandoned, order/fulfilled were emitted (once each).
    abandoned_at BIGINT,
    fulfilled_at BIGINT,
    -- Bumped by every write: a change computed from an older read is refused and redone.
    version BIGINT NOT NULL,
    document TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);
-- Open checkouts not yet reported abandoned, by their last change.
CREATE INDEX checkout_orders_abandonment ON checkout_orders (last_activity_at)
    WHERE status = 'open' AND abandoned_at IS NULL;
-- The checkout of a platform order (Order Saved events: order/fulfilled).
CREATE INDEX checkout_orders_platform_order ON checkout_orders (shop_id, platform_order_id)
    WHERE platform_order_id IS NOT NULL;
