ALTER TABLE staff_accounts ADD COLUMN failed_sign_ins INTEGER NOT NULL DEFAULT 0;
ALTER TABLE staff_accounts ADD COLUMN locked_until BIGINT;
DROP TABLE sign_in_failures;
