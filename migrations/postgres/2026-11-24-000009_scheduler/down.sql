-- subscription_counts_keep() as migration 7 made it.
CREATE OR REPLACE FUNCTION subscription_counts_keep() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP IN ('UPDATE', 'DELETE') THEN
        UPDATE subscription_counts SET subscriptions = subscriptions - 1
        WHERE shop_id = OLD.shop_id AND subscription_status = OLD.subscription_status;
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        INSERT INTO subscription_counts (shop_id, subscription_status, subscriptions)
        VALUES (NEW.shop_id, NEW.subscription_status, 1)
        ON CONFLICT (shop_id, subscription_status)
        DO UPDATE SET subscriptions = subscription_counts.subscriptions + 1;
    END IF;
    RETURN NULL;
END;
$$;
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
