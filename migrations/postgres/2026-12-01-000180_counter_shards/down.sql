CREATE TABLE shop_analytics_folded AS
    SELECT shop_id, day, metric, SUM(value)::BIGINT AS value
    FROM shop_analytics GROUP BY shop_id, day, metric;
DROP TABLE shop_analytics;
CREATE TABLE shop_analytics (
    shop_id BIGINT NOT NULL,
    day BIGINT NOT NULL,
    metric TEXT NOT NULL,
    value BIGINT NOT NULL,
    PRIMARY KEY (shop_id, day, metric)
);
INSERT INTO shop_analytics (shop_id, day, metric, value)
    SELECT shop_id, day, metric, value FROM shop_analytics_folded;
DROP TABLE shop_analytics_folded;
CREATE TABLE shop_activity_folded AS
    SELECT shop_id, bucket, activity, SUM(count)::BIGINT AS count
    FROM shop_activity GROUP BY shop_id, bucket, activity;
DROP TABLE shop_activity;
CREATE TABLE shop_activity (
    shop_id BIGINT NOT NULL,
    bucket BIGINT NOT NULL,
    activity TEXT NOT NULL,
    count BIGINT NOT NULL,
    PRIMARY KEY (shop_id, bucket, activity)
);
CREATE INDEX shop_activity_bucket ON shop_activity (bucket);
INSERT INTO shop_activity (shop_id, bucket, activity, count)
    SELECT shop_id, bucket, activity, count FROM shop_activity_folded;
DROP TABLE shop_activity_folded;
