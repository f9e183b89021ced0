-- One durable queue for background work (docs/jobs.md): typed jobs with a payload, a time to
-- run at, attempts and a lease. A done job is deleted; a failed or cancelled one stays for
-- `mercer jobs list|retry`.
CREATE TABLE jobs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    kind TEXT NOT NULL,
    payload TEXT NOT NULL,
    -- Names the work: at most one unfinished job per key (enqueueing again coalesces).
    unique_key TEXT,
    -- queued, running, failed or cancelled.
    state TEXT NOT NULL,
    -- When a queued job is due; for a running job, when its lease ends (then it is due again).
    run_at BIGINT NOT NULL,
    attempts BIGINT NOT NULL,
    max_attempts BIGINT NOT NULL,
    locked_by TEXT,
    locked_until BIGINT,
    -- Set when the job was enqueued again while it ran: it runs once more after this run.
    again_at BIGINT,
    last_error TEXT,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);
CREATE UNIQUE INDEX jobs_unique_key ON jobs (unique_key) WHERE state IN ('queued', 'running');
CREATE INDEX jobs_due ON jobs (run_at) WHERE state IN ('queued', 'running');

-- Where a sync stopped: it goes on from this cursor after a restart.
ALTER TABLE sync_runs ADD COLUMN next_cursor TEXT;

-- Calls recorded before the job runner existed: one delivery job per shop that has any.
INSERT INTO jobs (kind, payload, unique_key, state, run_at, attempts, max_attempts, created_at, updated_at)
SELECT 'platform.outbox',
       '{"shop_id":' || shop_id || '}',
       'platform.outbox:' || shop_id,
       'queued', MIN(next_attempt_at), 0, 10,
       MIN(created_at), MIN(created_at)
FROM connector_outbox
WHERE status = 'pending'
GROUP BY shop_id;
