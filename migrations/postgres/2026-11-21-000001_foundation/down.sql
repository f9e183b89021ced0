DROP TABLE oauth_apps;
DROP TABLE staff_accounts;
DROP TABLE shared_secrets;
DROP TABLE api_tokens;
DROP TABLE shops;
