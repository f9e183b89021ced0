-- Pause until a date: the day a paused subscription comes back by itself (`resume_on`, as given,
-- YYYY-MM-DD) and the start of that day in the shop's zone when it was paused (`resume_at`,
-- microseconds), which the scheduler looks for. Both are null unless the subscription is paused
-- until a date.
ALTER TABLE subscriptions ADD COLUMN resume_on TEXT;
ALTER TABLE subscriptions ADD COLUMN resume_at BIGINT;
-- The scheduler's search for paused subscriptions whose day has come.
CREATE INDEX subscriptions_resume_at ON subscriptions (resume_at) WHERE resume_at IS NOT NULL;

-- A cancellation's reason (one of the shop's codes when it was given) and comment, on the
-- status log entry of the cancel.
ALTER TABLE subscription_status_logs ADD COLUMN cancellation_reason TEXT;
ALTER TABLE subscription_status_logs ADD COLUMN cancellation_comment TEXT;

-- A shop's cancellation reasons, in the order the shop gave them.
CREATE TABLE subscription_cancellation_reasons (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    shop_id BIGINT NOT NULL REFERENCES shops (id),
    position INTEGER NOT NULL,
    code TEXT NOT NULL,
    label TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    UNIQUE (shop_id, code)
);
