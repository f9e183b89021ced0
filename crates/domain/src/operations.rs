//! What an operator watches across the features: the queue figures `/metrics` reads at each
//! scrape, and the console's overview and jobs of one shop. Like `ports`, it combines every
//! feature's repositories, and no feature imports it.

use crate::access::console::{ConsoleStaff, record_action};
use crate::access::operator::{self, DeletedShop};
use crate::access::shop::Shop;
use crate::kernel::activity::{self, ActivityFigures};
use crate::kernel::error::DomainError;
use crate::kernel::ids::{JobId, ShopId};
use crate::kernel::jobs::{Job, JobCount, JobFilter, JobState};
use crate::kernel::time::Timestamp;
use crate::ports::{Database, Repositories};
use crate::subscriptions::analytics::{self, Period, Report};
use crate::subscriptions::repository::SchedulerBacklog;
use crate::webhooks::MessageStatus;

/// The depth of each queue at one instant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueFigures {
    /// Pending webhook messages due now.
    pub webhooks_due: i64,
    /// Pending webhook messages waiting for a later attempt.
    pub webhooks_delayed: i64,
    /// Webhook endpoints that are disabled and not deleted.
    pub disabled_endpoints: i64,
    /// Platform events waiting to be applied.
    pub pending_events: i64,
    /// Platform events set aside after their last attempt.
    pub failed_events: i64,
    /// Jobs of each kind in each state.
    pub jobs: Vec<JobCount>,
    /// The subscription scheduler's backlog: orders due, being placed, or waiting for a retry.
    pub scheduler: SchedulerBacklog,
}

/// The queues as they are at `now`, read in one unit of work.
pub fn queue_figures(
    tx: &mut dyn Repositories,
    now: Timestamp,
) -> Result<QueueFigures, DomainError> {
    let (webhooks_due, webhooks_delayed) = tx.webhook_queue_depth(now)?;
    Ok(QueueFigures {
        webhooks_due,
        webhooks_delayed,
        disabled_endpoints: tx.count_disabled_webhook_endpoints()?,
        pending_events: tx.count_pending_inbound_events()?,
        failed_events: tx.count_failed_inbound_events()?,
        jobs: tx.count_jobs()?,
        scheduler: tx.scheduler_backlog(now)?,
    })
}

/// The console's overview of one shop.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ShopOverview {
    /// What the shop's work did in the last hour (five-minute buckets: up to 65 minutes).
    pub last_hour: ActivityFigures,
    /// What the shop's work did in the last day.
    pub last_day: ActivityFigures,
    /// Messages waiting for an attempt now.
    pub messages_pending: i64,
    /// Connector events waiting to be applied now.
    pub events_pending: i64,
    /// The shop's jobs in each state now, every kind together (a done job is deleted, so not
    /// counted).
    pub jobs: Vec<(JobState, i64)>,
    /// Endpoints Mercer disabled.
    pub endpoints_disabled: usize,
    /// Endpoints failing without a success since, not yet disabled.
    pub endpoints_failing: usize,
    /// Connector events set aside, up to [`SET_ASIDE_SHOWN`] (more shows as that many).
    pub events_set_aside: usize,
    /// The shop's subscription analytics over the period asked for, with each day's active
    /// count and MRR (the same figures as `GET /analytics`).
    #[serde(skip)]
    pub analytics: Report,
}

/// The most set-aside events the overview counts.
pub const SET_ASIDE_SHOWN: usize = 100;

/// A shop's figures at `now`, read in one unit of work: the activity counts of the last hour
/// and day (kernel::activity), what waits now, and the subscription analytics of `period`
/// (the last 30 days when `None`).
pub fn shop_overview(
    tx: &mut dyn Repositories,
    shop: &Shop,
    period: Option<Period>,
    now: Timestamp,
) -> Result<ShopOverview, DomainError> {
    let shop_id = shop.id;
    let period = period.unwrap_or_else(|| analytics::default_period(shop, now));
    let analytics = analytics::shop_analytics(tx, shop, period)?;
    let endpoints = crate::webhooks::console::endpoints(tx, shop_id)?;
    let (last_hour, last_day) = activity::last_hour_and_day(tx, shop_id, now)?;
    let counts = tx.count_shop_jobs(shop_id)?;
    let jobs = JobState::ALL
        .into_iter()
        .filter_map(|state| {
            let count: i64 = counts
                .iter()
                .filter(|count| count.state == state)
                .map(|count| count.count)
                .sum();
            (count > 0).then_some((state, count))
        })
        .collect();
    Ok(ShopOverview {
        last_hour,
        last_day,
        messages_pending: tx.count_shop_webhook_messages(shop_id, MessageStatus::Pending)?,
        events_pending: tx.count_shop_pending_events(shop_id)?,
        jobs,
        endpoints_disabled: endpoints.iter().filter(|e| e.disabled_at.is_some()).count(),
        endpoints_failing: endpoints
            .iter()
            .filter(|e| e.disabled_at.is_none() && e.failing_since.is_some())
            .count(),
        events_set_aside: tx
            .failed_inbound_events(Some(shop_id), SET_ASIDE_SHOWN)?
            .len(),
        analytics,
    })
}

/// The console's Jobs page: the shop's jobs that `filter` keeps, newest first, older than the
/// job `before` (a page's cursor), and the kinds of job the shop has (for the filter).
pub fn shop_jobs(
    tx: &mut dyn Repositories,
    shop_id: ShopId,
    filter: &JobFilter,
    before: Option<JobId>,
    limit: usize,
) -> Result<(Vec<Job>, Vec<String>), DomainError> {
    let mut kinds: Vec<String> = tx
        .count_shop_jobs(shop_id)?
        .into_iter()
        .map(|count| count.kind)
        .collect();
    kinds.sort();
    kinds.dedup();
    Ok((tx.shop_jobs(shop_id, filter, before, limit)?, kinds))
}

/// The shop's job `id`, or 404 (another shop's, a process-wide one, or one done and gone).
fn shop_job(tx: &mut dyn Repositories, shop_id: ShopId, id: JobId) -> Result<Job, DomainError> {
    tx.job(id)?
        .filter(|job| job.shop_id == Some(shop_id))
        .ok_or_else(|| DomainError::not_found("job"))
}

/// Queues the shop's failed or cancelled job again (as `mercer jobs retry` does), and records
/// who did it.
pub fn retry_shop_job(
    db: &impl Database,
    staff: &ConsoleStaff,
    id: JobId,
    now: Timestamp,
) -> Result<(), DomainError> {
    db.write(|tx| {
        shop_job(tx, staff.shop.id, id)?;
        if tx.requeue_jobs(Some(&[id]), now)?.is_empty() {
            return Err(DomainError::Unprocessable {
                code: "job.not_retryable",
                message: "only a failed or cancelled job can be retried, and not while another \
                          job does the same work"
                    .to_string(),
            });
        }
        record_action(tx, staff, "job.retry", &id.to_string(), now)
    })
}

/// Cancels the shop's queued, running or failed job (as `mercer jobs cancel` does), and records
/// who did it.
pub fn cancel_shop_job(
    db: &impl Database,
    staff: &ConsoleStaff,
    id: JobId,
    now: Timestamp,
) -> Result<(), DomainError> {
    db.write(|tx| {
        shop_job(tx, staff.shop.id, id)?;
        if tx.cancel_jobs(&[id], now)?.is_empty() {
            return Err(DomainError::Unprocessable {
                code: "job.not_cancellable",
                message: "only a queued, running or failed job can be cancelled".to_string(),
            });
        }
        record_action(tx, staff, "job.cancel", &id.to_string(), now)
    })
}

/// Deletes a shop (`mercer shop delete`): the shop marked deleted and its tokens revoked, as
/// [`operator::delete_shop`] does, and its webhook endpoints ended with their waiting messages
/// (`webhooks::end_shop_endpoints`), in one unit of work. `confirmed` is the operator's yes.
pub fn delete_shop(
    tx: &mut dyn Repositories,
    shop_identifier: &str,
    confirmed: bool,
    now: Timestamp,
) -> Result<DeletedShop, DomainError> {
    let deleted = operator::delete_shop(tx, shop_identifier, confirmed, now)?;
    crate::webhooks::end_shop_endpoints(tx, deleted.shop.id, now)?;
    Ok(deleted)
}
