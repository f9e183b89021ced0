DROP TABLE subscription_orders;
DROP INDEX subscriptions_expiring_payment;
DROP INDEX subscriptions_due;
ALTER TABLE subscriptions DROP COLUMN expiring_payment_notified_at;
ALTER TABLE subscriptions DROP COLUMN payment_method_expires_at;
ALTER TABLE shops ADD COLUMN order_retry_interval_seconds BIGINT NOT NULL DEFAULT 86400;
ALTER TABLE shops ADD COLUMN order_max_retries BIGINT NOT NULL DEFAULT 3;
UPDATE shops SET
    order_retry_interval_seconds = (SELECT s.order_retry_interval_seconds FROM shop_settings s WHERE s.shop_id = shops.id),
    order_max_retries = (SELECT s.order_max_retries FROM shop_settings s WHERE s.shop_id = shops.id)
WHERE EXISTS (SELECT 1 FROM shop_settings s WHERE s.shop_id = shops.id);
DROP TABLE shop_settings;
