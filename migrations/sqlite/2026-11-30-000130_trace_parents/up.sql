-- The trace a job or a webhook message was enqueued in, as a W3C `traceparent` value
-- (`00-{trace id}-{span id}-{flags}`), so that the job's run and the message's delivery
-- attempts join the trace of the request that caused them when traces are exported
-- (`serve --otlp-endpoint`; docs/operations.md, "Traces"). NULL when traces are not exported,
-- for work enqueued outside a traced span, and for rows enqueued before these columns existed.
ALTER TABLE jobs ADD COLUMN trace_parent TEXT;
ALTER TABLE webhook_messages ADD COLUMN trace_parent TEXT;
