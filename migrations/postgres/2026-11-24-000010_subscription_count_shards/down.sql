-- subscription_counts_keep() as migration 9 made it, and one row a status.
CREATE OR REPLACE FUNCTION subscription_counts_keep() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' AND NEW.subscription_status < OLD.subscription_status THEN
        INSERT INTO subscription_counts (shop_id, subscription_status, subscriptions)
        VALUES (NEW.shop_id, NEW.subscription_status, 1)
        ON CONFLICT (shop_id, subscription_status)
        DO UPDATE SET subscriptions = subscription_counts.subscriptions + 1;
        UPDATE subscription_counts SET subscriptions = subscriptions - 1
        WHERE shop_id = OLD.shop_id AND subscription_status = OLD.subscription_status;
        RETURN NULL;
    END IF;
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
DROP FUNCTION subscription_counts_add(BIGINT, TEXT, BIGINT, BIGINT);
CREATE TEMPORARY TABLE subscription_counts_summed AS
    SELECT shop_id, subscription_status, SUM(subscriptions) AS subscriptions
    FROM subscription_counts GROUP BY shop_id, subscription_status;
DELETE FROM subscription_counts;
ALTER TABLE subscription_counts DROP CONSTRAINT subscription_counts_pkey;
ALTER TABLE subscription_counts DROP COLUMN shard;
ALTER TABLE subscription_counts ADD PRIMARY KEY (shop_id, subscription_status);
INSERT INTO subscription_counts (shop_id, subscription_status, subscriptions)
    SELECT shop_id, subscription_status, subscriptions FROM subscription_counts_summed;
DROP TABLE subscription_counts_summed;
