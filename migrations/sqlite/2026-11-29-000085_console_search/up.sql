-- The operator console's lists: a shop's order attempts by order date (all, or of one status),
-- and customers found by their email without case.
CREATE INDEX subscription_orders_shop_scheduled ON subscription_orders (shop_id, scheduled_at, id);
CREATE INDEX subscription_orders_shop_status ON subscription_orders (shop_id, status, scheduled_at, id);
CREATE INDEX platform_customers_lower_email ON platform_customers (shop_id, lower(email));
