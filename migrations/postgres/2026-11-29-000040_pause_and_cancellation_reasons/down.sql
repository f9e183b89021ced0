DROP TABLE subscription_cancellation_reasons;
ALTER TABLE subscription_status_logs DROP COLUMN cancellation_comment;
ALTER TABLE subscription_status_logs DROP COLUMN cancellation_reason;
DROP INDEX subscriptions_resume_at;
ALTER TABLE subscriptions DROP COLUMN resume_at;
ALTER TABLE subscriptions DROP COLUMN resume_on;
