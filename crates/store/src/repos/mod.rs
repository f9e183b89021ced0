//! The domain's storage ports, implemented with diesel on one pooled connection: one folder per
//! feature, with the domain's names.

mod access;
mod box_builder;
mod checkout;
mod directory;
mod kernel;
mod overrides;
pub(crate) mod platform;
mod portal;
mod privacy;
mod subscriptions;
mod webhooks;

use std::collections::BTreeMap;

use mercer_domain::kernel::activity::{Activity, ActivityCount, ActivityRepository};
use mercer_domain::kernel::error::StoreResult;
use mercer_domain::kernel::ids::ShopId;
use mercer_domain::subscriptions::analytics::{AnalyticsRepository, DayCount, Metric};
use mercer_domain::{StorageError, Timestamp};

use crate::connection::DbConnection;

/// Rows per multi-row statement: well under both databases' limits on bound values (SQLite
/// 32,766, PostgreSQL 65,535) for tables of a dozen columns.
pub(crate) const ROWS_PER_STATEMENT: usize = 400;

/// Shards of a per-shop counter row on PostgreSQL (`shop_analytics`, `shop_activity`): every
/// placed order, event or delivery adds to its shop's rows, and with one row each, concurrent
/// transactions queued on its lock until the holder had committed. Readers sum the shards.
const COUNTER_SHARDS: u64 = 16;

/// The shard the next counter addition on PostgreSQL writes to: taken in turn, so that
/// transactions running at the same time write different rows. (SQLite has one writer and
/// keeps shard 0.)
pub(crate) fn next_counter_shard() -> i16 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let shard = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed) % COUNTER_SHARDS;
    i16::try_from(shard).unwrap_or(0)
}

/// The counter additions of a PostgreSQL write transaction, held until just before it
/// commits ([`StoreTx::holding_counters`]). An addition locks its counter row until the
/// transaction ends: written at once, the row stayed locked for the rest of the transaction,
/// and transactions adding to the same shard queued behind each other (a scheduler run that
/// begins a hundred orders held every shard it touched for its whole length). Written last,
/// each row is held only while the transaction commits. The rows go in one order (sorted), so
/// two transactions never wait for each other's rows in a cycle.
#[derive(Default)]
pub struct HeldCounters {
    activity: BTreeMap<(ShopId, i64, Activity), i64>,
    analytics: BTreeMap<(ShopId, i64, Metric), i64>,
}

impl HeldCounters {
    fn hold_activity(&mut self, counts: &[ActivityCount]) -> StoreResult<()> {
        for count in counts {
            let key = (count.shop_id, count.bucket.as_micros(), count.activity);
            let sum = self.activity.entry(key).or_default();
            *sum = add_counts(*sum, count.count)?;
        }
        Ok(())
    }

    fn hold_analytics(&mut self, counts: &[DayCount]) -> StoreResult<()> {
        for count in counts {
            let key = (count.shop_id, count.day, count.metric.clone());
            let sum = self.analytics.entry(key).or_default();
            *sum = add_counts(*sum, count.value)?;
        }
        Ok(())
    }

    /// Writes what is held, on the transaction's connection.
    pub fn write(self, conn: &mut DbConnection) -> StoreResult<()> {
        let activity: Vec<ActivityCount> = self
            .activity
            .into_iter()
            .filter(|(_, count)| *count != 0)
            .map(|((shop_id, bucket, activity), count)| ActivityCount {
                shop_id,
                activity,
                bucket: Timestamp::from_micros(bucket),
                count,
            })
            .collect();
        let analytics: Vec<DayCount> = self
            .analytics
            .into_iter()
            .filter(|(_, value)| *value != 0)
            .map(|((shop_id, day, metric), value)| DayCount {
                shop_id,
                day,
                metric,
                value,
            })
            .collect();
        let mut tx = StoreTx::new(conn);
        if !activity.is_empty() {
            tx.add_activity(&activity)?;
        }
        if !analytics.is_empty() {
            tx.add_analytics(&analytics)?;
        }
        Ok(())
    }
}

fn add_counts(a: i64, b: i64) -> StoreResult<i64> {
    a.checked_add(b)
        .ok_or_else(|| StorageError::other("a counter past the largest integer"))
}

/// One connection, inside or outside a transaction, seen through the domain's ports.
pub struct StoreTx<'a> {
    pub(super) conn: &'a mut DbConnection,
    /// Where counter additions wait for the commit; None: they are written at once.
    pub(super) held: Option<&'a mut HeldCounters>,
}

impl<'a> StoreTx<'a> {
    pub fn new(conn: &'a mut DbConnection) -> Self {
        StoreTx { conn, held: None }
    }

    /// A write transaction whose counter additions wait in `held` until the caller writes them
    /// just before committing.
    pub fn holding_counters(conn: &'a mut DbConnection, held: &'a mut HeldCounters) -> Self {
        StoreTx {
            conn,
            held: Some(held),
        }
    }
}
