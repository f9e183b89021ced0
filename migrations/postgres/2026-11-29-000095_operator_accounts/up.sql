-- What the operator's account commands show: when each API token was last used (written at most
-- once a minute per token, so requests do not each write), and when each staff account last
-- signed in (the console or the OAuth consent page). NULL: not since this column was added.
ALTER TABLE api_tokens ADD COLUMN last_used_at BIGINT;
ALTER TABLE staff_accounts ADD COLUMN last_sign_in_at BIGINT;
