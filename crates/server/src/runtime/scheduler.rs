//! The subscription scheduler's jobs in a `mercer serve` process (docs/scheduler.md): the
//! recurring run that begins due orders, and the job that places each order through the
//! connector; with the figures `/metrics` shows.

use std::time::{Duration, Instant};

use mercer_domain::box_builder::orders::BoxOrders;
use mercer_domain::kernel::jobs::{JobControl, JobFailure, JobOutcome};
use mercer_domain::kernel::time::{Clock, OffsetClock};
use mercer_domain::platform::connector::PlatformConnector;
use mercer_domain::subscriptions::scheduler::{OrderJob, Placement, place_order, run_scheduler};
use mercer_store::Store;

/// When a run stopped at the most attempts placing at once, the next one comes this soon: a
/// wave of 200 every 100 ms lets up to 2,000 orders a second begin, above what the placements
/// themselves reach on the benchmark's machine (250 ms capped them at 800 a second).
const NEXT_WAVE: Duration = Duration::from_millis(100);

/// How the scheduler runs in this process.
#[derive(Debug, Clone, Copy)]
pub struct SchedulerConfig {
    /// Between two runs (`MERCER_SCHEDULER_INTERVAL_MS`).
    pub interval: Duration,
}

impl Default for SchedulerConfig {
    fn default() -> Self {
        SchedulerConfig {
            interval: Duration::from_secs(60),
        }
    }
}

/// One run of the scheduler, then the next one `interval` later. A storage error is logged and
/// counted, not the job's failure: the scheduler keeps its rhythm and tries again at its next
/// run, rather than backing off for up to an hour.
pub fn run(
    store: &Store,
    clock: OffsetClock,
    config: SchedulerConfig,
    control: &dyn JobControl,
) -> Result<JobOutcome, JobFailure> {
    let started = Instant::now();
    let outcome = match run_scheduler(store, &clock, control) {
        Ok(run) => {
            if run.started + run.auto_resumed + run.begun + run.resumed + run.expiring > 0 {
                log::info!(
                    target: "mercer::scheduler",
                    "{} started, {} paused subscriptions resumed on their date, {} orders begun, {} attempts resumed, {} expiring payment methods announced",
                    run.started, run.auto_resumed, run.begun, run.resumed, run.expiring
                );
            }
            metrics::counter!("mercer_subscription_orders_begun_total").increment(run.begun as u64);
            metrics::counter!("mercer_scheduler_runs_total", "outcome" => "ok").increment(1);
            if run.interrupted {
                return Ok(JobOutcome::Interrupted);
            }
            // More orders due than may be placing at once: the next wave in a moment.
            let next = if run.more_due {
                config.interval.min(NEXT_WAVE)
            } else {
                config.interval
            };
            JobOutcome::RunAgainAt(clock.now().plus(next))
        }
        Err(error) => {
            log::error!(target: "mercer::scheduler", "the scheduler's run failed: {error}");
            metrics::counter!("mercer_scheduler_runs_total", "outcome" => "error").increment(1);
            JobOutcome::RunAgainAt(clock.now().plus(config.interval))
        }
    };
    metrics::histogram!("mercer_scheduler_run_seconds").record(started.elapsed().as_secs_f64());
    Ok(outcome)
}

/// Places one attempt's order, a box line item filled with the box's contents, and counts how
/// it went.
pub fn place(
    store: &Store,
    connector: &dyn PlatformConnector,
    clock: OffsetClock,
    job: OrderJob,
    control: &dyn JobControl,
) -> Result<JobOutcome, JobFailure> {
    let boxes = BoxOrders::new(store.clone());
    let (outcome, attempt) = match place_order(store, connector, &clock, &boxes, job, control)? {
        Placement::Interrupted => return Ok(JobOutcome::Interrupted),
        Placement::Nothing => return Ok(JobOutcome::Done),
        Placement::Placed {
            attempt,
            lag_micros,
        } => {
            metrics::histogram!("mercer_subscription_order_lag_seconds")
                .record(lag_micros.max(0) as f64 / 1e6);
            ("placed", attempt)
        }
        Placement::Failed {
            attempt,
            ended: false,
        } => ("failed", attempt),
        Placement::Failed {
            attempt,
            ended: true,
        } => ("retries_exhausted", attempt),
    };
    metrics::counter!("mercer_subscription_orders_total", "outcome" => outcome).increment(1);
    if attempt > 1 {
        metrics::counter!("mercer_subscription_order_retries_total").increment(1);
    }
    Ok(JobOutcome::Done)
}
