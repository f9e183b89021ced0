DROP TABLE oauth_codes;
DROP TABLE api_overrides;
