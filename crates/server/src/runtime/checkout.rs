//! The headless checkout's jobs in a `mercer serve` process (docs/checkout.md): pushing
//! processed orders to the platform, the recurring sweep of abandoned checkouts, and
//! `order/fulfilled` when the platform fulfils a checkout's order.

use std::time::Duration;

use mercer_domain::checkout::processing::{PushOrderJob, Pushed, push_order};
use mercer_domain::checkout::sweeps::{Fulfilment, order_fulfilled, sweep_abandoned};
use mercer_domain::kernel::jobs::{Job, JobControl, JobFailure, JobOutcome};
use mercer_domain::kernel::time::{Clock, OffsetClock};
use mercer_domain::platform::connector::PlatformConnector;
use mercer_domain::platform::events::OrderFulfilledJob;
use mercer_store::Store;

/// How the abandoned-checkout sweep runs in this process.
#[derive(Debug, Clone, Copy)]
pub struct CheckoutConfig {
    /// A checkout untouched this long is abandoned (`MERCER_ABANDONMENT_DELAY_S`).
    pub abandonment_delay: Duration,
    /// Between two sweeps (`MERCER_ABANDONMENT_INTERVAL_S`).
    pub abandonment_interval: Duration,
}

impl Default for CheckoutConfig {
    fn default() -> Self {
        CheckoutConfig {
            abandonment_delay: Duration::from_secs(3600),
            abandonment_interval: Duration::from_secs(300),
        }
    }
}

/// One sweep, then the next `abandonment_interval` later. A storage error is logged, not the
/// job's failure: the sweep keeps its rhythm.
pub fn sweep(
    store: &Store,
    clock: OffsetClock,
    config: CheckoutConfig,
    control: &dyn JobControl,
) -> Result<JobOutcome, JobFailure> {
    let delay = i64::try_from(config.abandonment_delay.as_secs()).unwrap_or(i64::MAX);
    match sweep_abandoned(store, clock.now(), delay, control) {
        Ok(0) => {}
        Ok(count) => {
            log::info!(target: "mercer::checkout", "{count} abandoned checkouts reported");
            metrics::counter!("mercer_checkout_abandoned_total").increment(count as u64);
        }
        Err(error) => {
            log::error!(target: "mercer::checkout", "the abandoned-checkout sweep failed: {error}");
        }
    }
    if control.should_stop() {
        return Ok(JobOutcome::Interrupted);
    }
    Ok(JobOutcome::RunAgainAt(
        clock.now().plus(config.abandonment_interval),
    ))
}

/// Pushes one processed checkout to the platform and counts how it went.
pub fn push(
    store: &Store,
    connector: &dyn PlatformConnector,
    clock: OffsetClock,
    push_job: PushOrderJob,
    job: &Job,
) -> Result<JobOutcome, JobFailure> {
    let outcome = match push_order(
        store,
        connector,
        push_job,
        job.is_last_attempt(),
        clock.now(),
    )? {
        Pushed::Created { .. } => "created",
        Pushed::Failed { .. } => "failed",
        Pushed::Nothing => return Ok(JobOutcome::Done),
    };
    metrics::counter!("mercer_checkout_orders_total", "outcome" => outcome).increment(1);
    Ok(JobOutcome::Done)
}

/// `order/fulfilled` for the checkout whose platform order this is, if one is.
pub fn fulfilled(
    store: &Store,
    clock: OffsetClock,
    job: OrderFulfilledJob,
) -> Result<JobOutcome, JobFailure> {
    match order_fulfilled(store, &job, clock.now())? {
        Fulfilment::Sent => {
            metrics::counter!("mercer_checkout_orders_total", "outcome" => "fulfilled")
                .increment(1);
        }
        Fulfilment::Nothing => {}
        // Its push is not over: after order/created, then.
        Fulfilment::NotYet => {
            return Err(JobFailure::retry(format!(
                "order {} of shop {}: its checkout is not created yet",
                job.platform_order_id, job.shop_id
            )));
        }
    }
    Ok(JobOutcome::Done)
}
