-- The request whose handling enqueued a job or a webhook message, by its id (the
-- `X-Request-Id` its answer carried), so that the job's or the delivery's log lines can be
-- traced back to that request (docs/operations.md, "Logging"). None for work enqueued outside
-- a request (the scheduler, a sweep, the event applier, the command line), and for rows
-- enqueued before these columns existed.
ALTER TABLE jobs ADD COLUMN request_id TEXT;
ALTER TABLE webhook_messages ADD COLUMN request_id TEXT;
