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

/// How many of a shop's webhook messages ended in each state.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct DeliveryFigures {
    /// Delivered: an attempt got a 2xx.
    pub delivered: i64,
    /// Given up, or their endpoint was disabled.
    pub failed: i64,
    /// Still waiting for an attempt.
    pub pending: i64,
    /// Their endpoint was deleted first.
    pub cancelled: i64,
}

impl DeliveryFigures {
    fn of(counts: &[(crate::webhooks::MessageStatus, i64)]) -> DeliveryFigures {
        use crate::webhooks::MessageStatus;
        let mut figures = DeliveryFigures::default();
        for (status, count) in counts {
            match status {
                MessageStatus::Delivered => figures.delivered += count,
                MessageStatus::Failed => figures.failed += count,
                MessageStatus::Pending => figures.pending += count,
                MessageStatus::Cancelled => figures.cancelled += count,
            }
        }
        figures
    }
}

/// The console's overview of one shop.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ShopOverview {
    /// Messages created in the last hour, by state.
    pub last_hour: DeliveryFigures,
    /// Messages created in the last day, by state.
    pub last_day: DeliveryFigures,
    /// Endpoints Mercer disabled.
    pub endpoints_disabled: usize,
    /// Endpoints failing without a success since, not yet disabled.
    pub endpoints_failing: usize,
    /// Connector events set aside, up to [`SET_ASIDE_SHOWN`] (more shows as that many).
    pub events_set_aside: usize,
}

/// The most set-aside events the overview counts.
pub const SET_ASIDE_SHOWN: usize = 100;

/// A shop's figures at `now`, read in one unit of work.
pub fn shop_overview(
    tx: &mut dyn Repositories,
    shop_id: i64,
    now: Timestamp,
) -> Result<ShopOverview, DomainError> {
    let endpoints = crate::webhooks::console::endpoints(tx, shop_id)?;
    Ok(ShopOverview {
        last_hour: DeliveryFigures::of(
            &tx.count_webhook_messages_since(shop_id, now.plus_seconds(-60 * 60))?,
        ),
        last_day: DeliveryFigures::of(
            &tx.count_webhook_messages_since(shop_id, now.plus_seconds(-24 * 60 * 60))?,
        ),
        endpoints_disabled: endpoints.iter().filter(|e| e.disabled_at.is_some()).count(),
        endpoints_failing: endpoints
            .iter()
            .filter(|e| e.disabled_at.is_none() && e.failing_since.is_some())
            .count(),
        events_set_aside: tx
            .failed_inbound_events(Some(shop_id), SET_ASIDE_SHOWN)?
            .len(),
    })
}
