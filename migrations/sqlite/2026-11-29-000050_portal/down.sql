ALTER TABLE shops DROP COLUMN portal_logo_url;
ALTER TABLE shops DROP COLUMN portal_accent;
DROP TABLE portal_sessions;
