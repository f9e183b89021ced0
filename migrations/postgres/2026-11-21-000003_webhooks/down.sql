DROP TABLE webhook_attempts;
DROP TABLE webhook_messages;
DROP TABLE webhook_endpoints;
