DROP TABLE request_budgets;
ALTER TABLE shop_settings DROP COLUMN storefront_rate_limit_per_s;
ALTER TABLE shop_settings DROP COLUMN connector_events_rate_limit_per_s;
ALTER TABLE shop_settings DROP COLUMN rate_limit_per_s;
