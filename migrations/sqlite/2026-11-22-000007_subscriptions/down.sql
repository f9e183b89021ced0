DROP TABLE subscription_counts;
DROP TABLE subscription_status_logs;
DROP TABLE subscription_line_items;
DROP TABLE subscriptions;
DELETE FROM customer_labels WHERE customer_id IN (SELECT id FROM platform_customers WHERE platform_id IS NULL);
DELETE FROM customer_addresses WHERE customer_id IN (SELECT id FROM platform_customers WHERE platform_id IS NULL);
DELETE FROM platform_customers WHERE platform_id IS NULL;
ALTER TABLE platform_customers DROP COLUMN notes;
