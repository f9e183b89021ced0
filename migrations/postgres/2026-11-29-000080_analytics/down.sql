DROP TABLE analytics_backfill;
DROP TABLE shop_analytics;
