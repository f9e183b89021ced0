//! The retention purge of webhook payloads and attempts in a `mercer serve` process
//! (docs/operations.md, "Webhook retention"): one recurring job for all processes, which purges
//! every message finished longer ago than the period, a bounded batch per transaction, then
//! runs again a quarter of the period later (between 1 s and 10 minutes).

use std::time::{Duration, Instant};

use mercer_domain::kernel::jobs::{JobControl, JobFailure, JobOutcome};
use mercer_domain::kernel::time::{Clock, OffsetClock};
use mercer_domain::webhooks::retention::{
    DEFAULT_RETENTION_DAYS, PURGE_BATCH, purge_expired, purge_interval, retention_of_days,
};
use mercer_store::Store;

/// How the purge runs in this process.
#[derive(Debug, Clone, Copy)]
pub struct RetentionConfig {
    /// How long a finished message keeps its payload and attempts (`--webhook-retention-days`).
    pub retention: Duration,
}

impl Default for RetentionConfig {
    fn default() -> Self {
        RetentionConfig {
            retention: retention_of_days(DEFAULT_RETENTION_DAYS)
                .unwrap_or(Duration::from_secs(30 * 86_400)),
        }
    }
}

/// One purge, then the next a quarter period later. A storage error is logged and counted,
/// not the job's failure: the purge keeps its rhythm, and what it left is purged next time.
pub fn run(
    store: &Store,
    clock: OffsetClock,
    config: RetentionConfig,
    control: &dyn JobControl,
) -> Result<JobOutcome, JobFailure> {
    let started = Instant::now();
    match purge_expired(store, clock.now(), config.retention, PURGE_BATCH, control) {
        Ok(purged) => {
            if purged.messages > 0 {
                log::info!(
                    target: "mercer::webhooks",
                    "retention: the payloads and attempts of {} finished messages purged, in {} transactions, in {:.1}s",
                    purged.messages, purged.batches, started.elapsed().as_secs_f64()
                );
                metrics::counter!("mercer_webhook_messages_purged_total")
                    .increment(purged.messages as u64);
            }
            if purged.interrupted {
                return Ok(JobOutcome::Interrupted);
            }
        }
        Err(error) => {
            log::error!(target: "mercer::webhooks", "the webhook retention purge failed: {error}");
        }
    }
    Ok(JobOutcome::RunAgainAt(
        clock.now().plus(purge_interval(config.retention)),
    ))
}
