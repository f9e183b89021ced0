ALTER TABLE platform_customers DROP COLUMN pii_redacted_at;
