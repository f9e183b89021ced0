CREATE TABLE shop_analytics_folded (
    shop_id BIGINT NOT NULL,
    day BIGINT NOT NULL,
    metric TEXT NOT NULL,
    value BIGINT NOT NULL,
    PRIMARY KEY (shop_id, day, metric)
);
INSERT INTO shop_analytics_folded (shop_id, day, metric, value)
    SELECT shop_id, day, metric, SUM(value) FROM shop_analytics GROUP BY shop_id, day, metric;
DROP TABLE shop_analytics;
ALTER TABLE shop_analytics_folded RENAME TO shop_analytics;
CREATE TABLE shop_activity_folded (
    shop_id BIGINT NOT NULL,
    bucket BIGINT NOT NULL,
    activity TEXT NOT NULL,
    count BIGINT NOT NULL,
    PRIMARY KEY (shop_id, bucket, activity)
);
INSERT INTO shop_activity_folded (shop_id, bucket, activity, count)
    SELECT shop_id, bucket, activity, SUM(count) FROM shop_activity GROUP BY shop_id, bucket, activity;
DROP TABLE shop_activity;
ALTER TABLE shop_activity_folded RENAME TO shop_activity;
CREATE INDEX shop_activity_bucket ON shop_activity (bucket);
