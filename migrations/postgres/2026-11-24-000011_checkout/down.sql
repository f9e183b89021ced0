DROP TABLE checkout_orders;
ALTER TABLE shop_settings DROP COLUMN flat_shipping_rate_cents;
ALTER TABLE shop_settings DROP COLUMN gift_card_skus;
ALTER TABLE shop_settings DROP COLUMN gift_cards_enabled;
ALTER TABLE shop_settings DROP COLUMN abandoned_cart_emails;
