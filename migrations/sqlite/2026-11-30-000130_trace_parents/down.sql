ALTER TABLE webhook_messages DROP COLUMN trace_parent;
ALTER TABLE jobs DROP COLUMN trace_parent;
