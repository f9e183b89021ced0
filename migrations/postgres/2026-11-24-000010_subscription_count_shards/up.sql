-- subscription_counts is kept in 16 shards a status (by subscription id): concurrent status
-- changes of one shop (the scheduler's claims and outcomes, thousands a minute under a burst)
-- then write different rows instead of queueing on one row lock until each commit. Reads sum
-- the shards, as they summed statuses. A shard may go below zero (a decrement of a subscription
-- counted before this migration, in shard 0); only the sums mean anything.
ALTER TABLE subscription_counts ADD COLUMN shard BIGINT NOT NULL DEFAULT 0;
ALTER TABLE subscription_counts DROP CONSTRAINT subscription_counts_pkey;
ALTER TABLE subscription_counts ADD PRIMARY KEY (shop_id, subscription_status, shard);

CREATE FUNCTION subscription_counts_add(shop BIGINT, status TEXT, shard_of BIGINT, delta BIGINT)
RETURNS void LANGUAGE sql AS $$
    INSERT INTO subscription_counts (shop_id, subscription_status, shard, subscriptions)
    VALUES (shop, status, shard_of % 16, delta)
    ON CONFLICT (shop_id, subscription_status, shard)
    DO UPDATE SET subscriptions = subscription_counts.subscriptions + delta;
$$;

-- A status change writes its two rows in the order of their status, whatever its direction,
-- so that claims and outcomes wait for one another instead of deadlocking (migration 9).
CREATE OR REPLACE FUNCTION subscription_counts_keep() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        PERFORM subscription_counts_add(NEW.shop_id, NEW.subscription_status, NEW.id, 1);
    ELSIF TG_OP = 'DELETE' THEN
        PERFORM subscription_counts_add(OLD.shop_id, OLD.subscription_status, OLD.id, -1);
    ELSIF NEW.subscription_status < OLD.subscription_status THEN
        PERFORM subscription_counts_add(NEW.shop_id, NEW.subscription_status, NEW.id, 1);
        PERFORM subscription_counts_add(OLD.shop_id, OLD.subscription_status, OLD.id, -1);
    ELSE
        PERFORM subscription_counts_add(OLD.shop_id, OLD.subscription_status, OLD.id, -1);
        PERFORM subscription_counts_add(NEW.shop_id, NEW.subscription_status, NEW.id, 1);
    END IF;
    RETURN NULL;
END;
$$;
