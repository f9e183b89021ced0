//! What an operator watches across the features: the queue figures `/metrics` reads at each
//! scrape. Like `ports`, it combines every feature's repositories, and no feature imports it.

use crate::kernel::error::DomainError;
use crate::kernel::jobs::JobCount;
use crate::kernel::time::Timestamp;
use crate::ports::Repositories;
use crate::subscriptions::repository::SchedulerBacklog;

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
