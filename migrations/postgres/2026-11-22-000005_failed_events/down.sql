DROP TABLE failed_inbound_events;
ALTER TABLE inbound_events DROP COLUMN last_error;
ALTER TABLE inbound_events DROP COLUMN retry_at;
ALTER TABLE inbound_events DROP COLUMN attempts;
