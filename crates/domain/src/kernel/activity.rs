//! A shop's activity counted in five-minute buckets: events in, applied and set aside,
//! deliveries sent, delivered and failed, orders the scheduler placed, checkouts processed and
//! abandoned. The work that does each thing adds to its bucket in its own transaction, once per
//! batch, so the console's overview sums a few hundred rows instead of counting the day's
//! messages and events (some of which are gone by then: an applied event is deleted).

use crate::kernel::ids::ShopId;
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::kernel::error::{DomainError, StoreResult};
use crate::kernel::jobs::JobPayload;
use crate::kernel::time::Timestamp;

/// The width of a bucket.
pub const BUCKET_SECONDS: i64 = 5 * 60;
/// Buckets older than this are pruned.
pub const KEPT_SECONDS: i64 = 2 * 24 * 60 * 60;
/// How often the prune runs.
pub const PRUNE_INTERVAL_SECONDS: i64 = 60 * 60;

/// What is counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Activity {
    /// Connector events accepted (answered 202).
    EventsReceived,
    /// Connector events applied (stale ones included: they were read and decided).
    EventsApplied,
    /// Connector events set aside after their last attempt.
    EventsSetAside,
    /// Webhook attempts made.
    WebhooksSent,
    /// Webhook messages delivered.
    WebhooksDelivered,
    /// Webhook messages that failed for good (given up, or their endpoint disabled).
    WebhooksFailed,
    /// Orders the subscription scheduler placed.
    OrdersPlaced,
    /// Checkouts processed (their order placed at the storefront).
    CheckoutsProcessed,
    /// Checkouts reported abandoned.
    CheckoutsAbandoned,
}

impl Activity {
    /// Every activity counted.
    pub const ALL: [Activity; 9] = [
        Activity::EventsReceived,
        Activity::EventsApplied,
        Activity::EventsSetAside,
        Activity::WebhooksSent,
        Activity::WebhooksDelivered,
        Activity::WebhooksFailed,
        Activity::OrdersPlaced,
        Activity::CheckoutsProcessed,
        Activity::CheckoutsAbandoned,
    ];

    /// The name as stored.
    pub fn as_str(self) -> &'static str {
        match self {
            Activity::EventsReceived => "events.received",
            Activity::EventsApplied => "events.applied",
            Activity::EventsSetAside => "events.set_aside",
            Activity::WebhooksSent => "webhooks.sent",
            Activity::WebhooksDelivered => "webhooks.delivered",
            Activity::WebhooksFailed => "webhooks.failed",
            Activity::OrdersPlaced => "scheduler.orders_placed",
            Activity::CheckoutsProcessed => "checkouts.processed",
            Activity::CheckoutsAbandoned => "checkouts.abandoned",
        }
    }

    /// The activity a stored name names.
    pub fn parse(text: &str) -> Option<Activity> {
        Activity::ALL.into_iter().find(|a| a.as_str() == text)
    }
}

/// The start of the bucket `at` falls in.
pub fn bucket_of(at: Timestamp) -> Timestamp {
    let width = BUCKET_SECONDS * 1_000_000;
    Timestamp::from_micros(at.as_micros().div_euclid(width) * width)
}

/// One bucket's addition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActivityCount {
    /// The shop the activity was for.
    pub shop_id: ShopId,
    /// What was done.
    pub activity: Activity,
    /// The bucket's start.
    pub bucket: Timestamp,
    /// How many times.
    pub count: i64,
}

/// What a unit of work did, gathered before it is added in one go. Its counts come out in
/// key order, so two transactions adding to the same buckets lock them in the same order.
#[derive(Debug, Default)]
pub struct Tally(BTreeMap<(ShopId, i64, Activity), i64>);

impl Tally {
    /// Counts `count` more of `activity` for the shop, in the bucket of `at`.
    pub fn add(&mut self, shop_id: ShopId, activity: Activity, at: Timestamp, count: i64) {
        if count != 0 {
            *self
                .0
                .entry((shop_id, bucket_of(at).as_micros(), activity))
                .or_default() += count;
        }
    }

    /// Whether nothing was counted.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Adds the tally to the store in the caller's transaction.
    pub fn record(self, tx: &mut (impl ActivityRepository + ?Sized)) -> StoreResult<()> {
        if self.is_empty() {
            return Ok(());
        }
        let counts: Vec<ActivityCount> = self
            .0
            .into_iter()
            .map(|((shop_id, bucket, activity), count)| ActivityCount {
                shop_id,
                activity,
                bucket: Timestamp::from_micros(bucket),
                count,
            })
            .collect();
        tx.add_activity(&counts)
    }
}

/// Adds `count` of `activity` at `at` in the caller's transaction.
pub fn record_one(
    tx: &mut (impl ActivityRepository + ?Sized),
    shop_id: ShopId,
    activity: Activity,
    at: Timestamp,
    count: i64,
) -> StoreResult<()> {
    let mut tally = Tally::default();
    tally.add(shop_id, activity, at, count);
    tally.record(tx)
}

/// The storage of the counts.
pub trait ActivityRepository {
    /// Adds each count to its bucket (created at zero when new).
    fn add_activity(&mut self, counts: &[ActivityCount]) -> StoreResult<()>;
    /// The shop's counts of buckets starting at or after `since`.
    fn shop_activity_since(
        &mut self,
        shop_id: ShopId,
        since: Timestamp,
    ) -> StoreResult<Vec<ActivityCount>>;
    /// Deletes the buckets that start before `before`; returns how many.
    fn prune_activity(&mut self, before: Timestamp) -> StoreResult<usize>;
}

/// A shop's activity over a period, each thing counted.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ActivityFigures {
    /// Connector events accepted.
    pub events_received: i64,
    /// Connector events applied.
    pub events_applied: i64,
    /// Connector events set aside.
    pub events_set_aside: i64,
    /// Webhook attempts made.
    pub webhooks_sent: i64,
    /// Webhook messages delivered.
    pub webhooks_delivered: i64,
    /// Webhook messages failed for good.
    pub webhooks_failed: i64,
    /// Orders the scheduler placed.
    pub orders_placed: i64,
    /// Checkouts processed.
    pub checkouts_processed: i64,
    /// Checkouts reported abandoned.
    pub checkouts_abandoned: i64,
}

impl ActivityFigures {
    /// The sum of the counts of buckets starting at or after `since`.
    pub fn of(counts: &[ActivityCount], since: Timestamp) -> ActivityFigures {
        let mut figures = ActivityFigures::default();
        for count in counts.iter().filter(|count| count.bucket >= since) {
            let slot = match count.activity {
                Activity::EventsReceived => &mut figures.events_received,
                Activity::EventsApplied => &mut figures.events_applied,
                Activity::EventsSetAside => &mut figures.events_set_aside,
                Activity::WebhooksSent => &mut figures.webhooks_sent,
                Activity::WebhooksDelivered => &mut figures.webhooks_delivered,
                Activity::WebhooksFailed => &mut figures.webhooks_failed,
                Activity::OrdersPlaced => &mut figures.orders_placed,
                Activity::CheckoutsProcessed => &mut figures.checkouts_processed,
                Activity::CheckoutsAbandoned => &mut figures.checkouts_abandoned,
            };
            *slot += count.count;
        }
        figures
    }
}

/// The shop's activity of the last hour and the last day, read in one query. Each period
/// starts at the bucket `now` minus its length falls in, so it covers up to five minutes more.
pub fn last_hour_and_day(
    tx: &mut (impl ActivityRepository + ?Sized),
    shop_id: ShopId,
    now: Timestamp,
) -> Result<(ActivityFigures, ActivityFigures), DomainError> {
    let day_start = bucket_of(now.plus_seconds(-24 * 60 * 60));
    let counts = tx.shop_activity_since(shop_id, day_start)?;
    Ok((
        ActivityFigures::of(&counts, bucket_of(now.plus_seconds(-60 * 60))),
        ActivityFigures::of(&counts, day_start),
    ))
}

/// The recurring prune of old buckets: one, under a fixed key, enqueued at every start of
/// `mercer serve`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ActivityPruneJob {}

impl JobPayload for ActivityPruneJob {
    const KIND: &'static str = "activity.prune";

    fn unique_key(&self) -> Option<String> {
        Some(Self::KIND.to_string())
    }
}

/// Deletes the buckets older than [`KEPT_SECONDS`]; returns how many.
pub fn prune(
    tx: &mut (impl ActivityRepository + ?Sized),
    now: Timestamp,
) -> Result<usize, DomainError> {
    Ok(tx.prune_activity(now.plus_seconds(-KEPT_SECONDS))?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_start_on_five_minute_boundaries() {
        let at = Timestamp::from_micros(7 * 60 * 1_000_000 + 3);
        assert_eq!(bucket_of(at).as_micros(), 5 * 60 * 1_000_000);
        assert_eq!(
            bucket_of(Timestamp::from_micros(-1)).as_micros(),
            -300_000_000
        );
    }

    #[test]
    fn a_tally_merges_counts_of_one_bucket_and_skips_zeros() {
        let mut tally = Tally::default();
        let at = Timestamp::from_micros(600 * 1_000_000);
        tally.add(ShopId(1), Activity::WebhooksSent, at, 2);
        tally.add(ShopId(1), Activity::WebhooksSent, at.plus_seconds(60), 3);
        tally.add(ShopId(1), Activity::WebhooksFailed, at, 0);
        assert_eq!(tally.0.len(), 1);
        assert_eq!(tally.0.values().copied().sum::<i64>(), 5);
    }

    #[test]
    fn figures_sum_only_buckets_of_their_period() {
        let bucket = |minutes: i64| Timestamp::from_micros(minutes * 60 * 1_000_000);
        let counts = [
            ActivityCount {
                shop_id: ShopId(1),
                activity: Activity::EventsReceived,
                bucket: bucket(0),
                count: 4,
            },
            ActivityCount {
                shop_id: ShopId(1),
                activity: Activity::EventsReceived,
                bucket: bucket(5),
                count: 6,
            },
        ];
        assert_eq!(ActivityFigures::of(&counts, bucket(5)).events_received, 6);
        assert_eq!(ActivityFigures::of(&counts, bucket(0)).events_received, 10);
    }

    #[test]
    fn activity_names_round_trip() {
        for activity in Activity::ALL {
            assert_eq!(Activity::parse(activity.as_str()), Some(activity));
        }
    }
}
