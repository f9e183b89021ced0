-- subscription_counts is kept in 16 shards a status (by subscription id), as on PostgreSQL,
-- where concurrent status changes of one shop would otherwise queue on one row lock. SQLite has
-- one writer and gains nothing, but the schema and its reads stay the same on both. Reads sum
-- the shards; a shard may go below zero (a subscription counted before this migration, in
-- shard 0, decremented in its own); only the sums mean anything.
DROP TRIGGER subscription_counts_insert;
DROP TRIGGER subscription_counts_update;
DROP TRIGGER subscription_counts_delete;
ALTER TABLE subscription_counts RENAME TO subscription_counts_unsharded;
CREATE TABLE subscription_counts (
    shop_id BIGINT NOT NULL REFERENCES shops (id),
    subscription_status TEXT NOT NULL,
    shard BIGINT NOT NULL DEFAULT 0,
    subscriptions BIGINT NOT NULL,
    PRIMARY KEY (shop_id, subscription_status, shard)
);
INSERT INTO subscription_counts (shop_id, subscription_status, shard, subscriptions)
    SELECT shop_id, subscription_status, 0, subscriptions FROM subscription_counts_unsharded;
DROP TABLE subscription_counts_unsharded;
CREATE TRIGGER subscription_counts_insert AFTER INSERT ON subscriptions BEGIN
    INSERT INTO subscription_counts (shop_id, subscription_status, shard, subscriptions)
    VALUES (NEW.shop_id, NEW.subscription_status, NEW.id % 16, 1)
    ON CONFLICT (shop_id, subscription_status, shard) DO UPDATE SET subscriptions = subscriptions + 1;
END;
CREATE TRIGGER subscription_counts_update AFTER UPDATE OF subscription_status ON subscriptions
WHEN OLD.subscription_status <> NEW.subscription_status BEGIN
    INSERT INTO subscription_counts (shop_id, subscription_status, shard, subscriptions)
    VALUES (OLD.shop_id, OLD.subscription_status, OLD.id % 16, -1)
    ON CONFLICT (shop_id, subscription_status, shard) DO UPDATE SET subscriptions = subscriptions - 1;
    INSERT INTO subscription_counts (shop_id, subscription_status, shard, subscriptions)
    VALUES (NEW.shop_id, NEW.subscription_status, NEW.id % 16, 1)
    ON CONFLICT (shop_id, subscription_status, shard) DO UPDATE SET subscriptions = subscriptions + 1;
END;
CREATE TRIGGER subscription_counts_delete AFTER DELETE ON subscriptions BEGIN
    INSERT INTO subscription_counts (shop_id, subscription_status, shard, subscriptions)
    VALUES (OLD.shop_id, OLD.subscription_status, OLD.id % 16, -1)
    ON CONFLICT (shop_id, subscription_status, shard) DO UPDATE SET subscriptions = subscriptions - 1;
END;
