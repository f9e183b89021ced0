-- A shop's subscription analytics (subscriptions::analytics): per shop and shop-local day (days
-- since 1970-01-01), what happened that day (new, cancelled, `reason:CODE`, paused, orders
-- placed and failed, revenue) and the day's change of the active count and MRR (`active`,
-- `mrr`). Added to in the unit of work of the write counted; a period's figures sum its days.
CREATE TABLE shop_analytics (
    shop_id BIGINT NOT NULL,
    day BIGINT NOT NULL,
    metric TEXT NOT NULL,
    value BIGINT NOT NULL,
    PRIMARY KEY (shop_id, day, metric)
);
-- The subscriptions stored before the counters were kept are counted once, by `mercer` right
-- after this migration (subscriptions::analytics::backfill), which deletes this row.
CREATE TABLE analytics_backfill (
    id BIGINT PRIMARY KEY NOT NULL
);
INSERT INTO analytics_backfill (id) VALUES (1);
