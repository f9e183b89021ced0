//! Retention of webhook payloads and attempts: a message finished (delivered, failed or
//! cancelled) longer ago than the retention period loses its payload and its attempts, which
//! are most of what the delivery log stores; the message row stays (its id, topic, status,
//! endpoint and times), marked purged, so the log still lists it. Pending messages are never
//! touched.
//!
//! The purge runs as one recurring job for all processes ([`WebhookRetentionJob`]), in bounded
//! batches of one transaction each, until nothing is left; then it waits for its next run.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::WebhookDatabase;
use crate::kernel::error::DomainError;
use crate::kernel::jobs::{JobControl, JobPayload};
use crate::kernel::time::Timestamp;

/// The retention period when none is given: 30 days.
pub const DEFAULT_RETENTION_DAYS: f64 = 30.0;

/// Messages one purge transaction handles at most: short transactions, no long lock.
pub const PURGE_BATCH: usize = 1_000;

/// The longest wait between two purges.
const LONGEST_INTERVAL: Duration = Duration::from_secs(10 * 60);
/// The shortest wait between two purges.
const SHORTEST_INTERVAL: Duration = Duration::from_secs(1);

const DAY_SECONDS: f64 = 24.0 * 60.0 * 60.0;

/// The recurring purge: one, under a fixed key, enqueued at every start of `mercer serve` (it
/// coalesces into the one queued or running, so several processes never purge at once).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WebhookRetentionJob {}

impl JobPayload for WebhookRetentionJob {
    const KIND: &'static str = "webhooks.retention";

    fn unique_key(&self) -> Option<String> {
        Some(Self::KIND.to_string())
    }
}

/// The retention period of `days` (a decimal, such as 0.5), which must be more than 0.
pub fn retention_of_days(days: f64) -> Result<Duration, String> {
    if !days.is_finite() || days <= 0.0 {
        return Err(format!("{days}: give a number of days more than 0"));
    }
    Duration::try_from_secs_f64(days * DAY_SECONDS).map_err(|_| format!("{days}: too many days"))
}

/// How long the purge waits before its next run: a quarter of the period (so a message is
/// purged at most a quarter late), between 1 s and 10 minutes.
pub fn purge_interval(retention: Duration) -> Duration {
    (retention / 4).clamp(SHORTEST_INTERVAL, LONGEST_INTERVAL)
}

/// What one run of the purge did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Purged {
    /// Messages purged.
    pub messages: usize,
    /// Transactions that purged some.
    pub batches: usize,
    /// It stopped early because its process is stopping; the rest waits for the next run.
    pub interrupted: bool,
}

/// Purges every message finished before `now - retention`, `batch` messages per transaction,
/// until none is left or `control` says to stop.
pub fn purge_expired(
    db: &impl WebhookDatabase,
    now: Timestamp,
    retention: Duration,
    batch: usize,
    control: &dyn JobControl,
) -> Result<Purged, DomainError> {
    let retention_micros = i64::try_from(retention.as_micros()).unwrap_or(i64::MAX);
    let finished_before = Timestamp::from_micros(now.as_micros().saturating_sub(retention_micros));
    let batch = batch.max(1);
    let mut purged = Purged::default();
    loop {
        if control.should_stop() {
            purged.interrupted = true;
            return Ok(purged);
        }
        let count =
            db.write_tx(|tx| Ok(tx.purge_webhook_messages(finished_before, batch, now)?))?;
        if count > 0 {
            purged.messages += count;
            purged.batches += 1;
        }
        if count < batch {
            return Ok(purged);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_period_reads_decimal_days() {
        assert_eq!(
            retention_of_days(30.0),
            Ok(Duration::from_secs(30 * 86_400))
        );
        assert_eq!(retention_of_days(0.0001).map(|d| d.as_millis()), Ok(8_640));
        assert!(retention_of_days(0.0).is_err());
        assert!(retention_of_days(-1.0).is_err());
        assert!(retention_of_days(f64::NAN).is_err());
        assert!(retention_of_days(f64::INFINITY).is_err());
    }

    #[test]
    fn the_purge_runs_a_quarter_period_apart_within_bounds() {
        let days = |d: f64| retention_of_days(d).unwrap();
        assert_eq!(purge_interval(days(30.0)), Duration::from_secs(600));
        assert_eq!(
            purge_interval(Duration::from_secs(120)),
            Duration::from_secs(30)
        );
        assert_eq!(purge_interval(days(0.0001)), Duration::from_millis(2_160));
        assert_eq!(
            purge_interval(Duration::from_secs(2)),
            Duration::from_secs(1)
        );
    }
}
