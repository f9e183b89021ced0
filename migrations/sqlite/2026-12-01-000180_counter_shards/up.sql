-- The per-shop counters get a shard column, as on PostgreSQL, where concurrent writers add to
-- different shards; SQLite has one writer and uses shard 0. (SQLite cannot change a primary
-- key: the tables are made again.)
CREATE TABLE shop_analytics_sharded (
    shop_id BIGINT NOT NULL,
    day BIGINT NOT NULL,
    metric TEXT NOT NULL,
    value BIGINT NOT NULL,
    shard SMALLINT NOT NULL DEFAULT 0,
    PRIMARY KEY (shop_id, day, metric, shard)
);
INSERT INTO shop_analytics_sharded (shop_id, day, metric, value, shard)
    SELECT shop_id, day, metric, value, 0 FROM shop_analytics;
DROP TABLE shop_analytics;
ALTER TABLE shop_analytics_sharded RENAME TO shop_analytics;
CREATE TABLE shop_activity_sharded (
    shop_id BIGINT NOT NULL,
    bucket BIGINT NOT NULL,
    activity TEXT NOT NULL,
    count BIGINT NOT NULL,
    shard SMALLINT NOT NULL DEFAULT 0,
    PRIMARY KEY (shop_id, bucket, activity, shard)
);
INSERT INTO shop_activity_sharded (shop_id, bucket, activity, count, shard)
    SELECT shop_id, bucket, activity, count, 0 FROM shop_activity;
DROP TABLE shop_activity;
ALTER TABLE shop_activity_sharded RENAME TO shop_activity;
CREATE INDEX shop_activity_bucket ON shop_activity (bucket);
