-- When a customer's personal data was erased by a privacy request (docs/subscriptions.md,
-- "Privacy requests"); NULL for a customer never erased.
ALTER TABLE platform_customers ADD COLUMN pii_redacted_at BIGINT;
