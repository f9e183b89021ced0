-- One row a status, and the triggers of migration 7.
DROP TRIGGER subscription_counts_insert;
DROP TRIGGER subscription_counts_update;
DROP TRIGGER subscription_counts_delete;
ALTER TABLE subscription_counts RENAME TO subscription_counts_sharded;
CREATE TABLE subscription_counts (
    shop_id BIGINT NOT NULL REFERENCES shops (id),
    subscription_status TEXT NOT NULL,
    subscriptions BIGINT NOT NULL,
    PRIMARY KEY (shop_id, subscription_status)
);
INSERT INTO subscription_counts (shop_id, subscription_status, subscriptions)
    SELECT shop_id, subscription_status, SUM(subscriptions) FROM subscription_counts_sharded
    GROUP BY shop_id, subscription_status;
DROP TABLE subscription_counts_sharded;
CREATE TRIGGER subscription_counts_insert AFTER INSERT ON subscriptions BEGIN
    INSERT INTO subscription_counts (shop_id, subscription_status, subscriptions)
    VALUES (NEW.shop_id, NEW.subscription_status, 1)
    ON CONFLICT (shop_id, subscription_status) DO UPDATE SET subscriptions = subscriptions + 1;
END;
CREATE TRIGGER subscription_counts_update AFTER UPDATE OF subscription_status ON subscriptions
WHEN OLD.subscription_status <> NEW.subscription_status BEGIN
    UPDATE subscription_counts SET subscriptions = subscriptions - 1
    WHERE shop_id = OLD.shop_id AND subscription_status = OLD.subscription_status;
    INSERT INTO subscription_counts (shop_id, subscription_status, subscriptions)
    VALUES (NEW.shop_id, NEW.subscription_status, 1)
    ON CONFLICT (shop_id, subscription_status) DO UPDATE SET subscriptions = subscriptions + 1;
END;
CREATE TRIGGER subscription_counts_delete AFTER DELETE ON subscriptions BEGIN
    UPDATE subscription_counts SET subscriptions = subscriptions - 1
    WHERE shop_id = OLD.shop_id AND subscription_status = OLD.subscription_status;
END;
