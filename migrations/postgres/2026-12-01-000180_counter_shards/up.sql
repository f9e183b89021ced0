-- The per-shop counters in 16 shards: every placed order adds to its shop's analytics row of
-- the day and to its activity bucket, and with one row each, all of a shop's concurrent writes
-- queued on that row's lock until its holder had committed (a renewal day's placements went
-- one commit at a time, whatever the number of workers or processes). A write picks a shard;
-- reads sum the shards.
ALTER TABLE shop_analytics ADD COLUMN shard SMALLINT NOT NULL DEFAULT 0;
ALTER TABLE shop_analytics DROP CONSTRAINT shop_analytics_pkey;
ALTER TABLE shop_analytics ADD PRIMARY KEY (shop_id, day, metric, shard);
ALTER TABLE shop_activity ADD COLUMN shard SMALLINT NOT NULL DEFAULT 0;
ALTER TABLE shop_activity DROP CONSTRAINT shop_activity_pkey;
ALTER TABLE shop_activity ADD PRIMARY KEY (shop_id, bucket, activity, shard);
