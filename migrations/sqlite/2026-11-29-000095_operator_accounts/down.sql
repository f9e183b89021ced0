ALTER TABLE staff_accounts DROP COLUMN last_sign_in_at;
ALTER TABLE api_tokens DROP COLUMN last_used_at;
