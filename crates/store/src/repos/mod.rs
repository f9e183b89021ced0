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

use mercer_domain::kernel::activity::{self, ActivityCount};
use mercer_domain::kernel::error::StoreResult;
use mercer_domain::subscriptions::analytics::{self, DayCount};

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
    activity: activity::Tally,
    analytics: analytics::Tally,
}

impl HeldCounters {
    fn hold_activity(&mut self, counts: &[ActivityCount]) {
        for count in counts {
            // A count's bucket is the bucket's start, which is its own bucket.
            self.activity
                .add(count.shop_id, count.activity, count.bucket, count.count);
        }
    }

    fn hold_analytics(&mut self, counts: &[DayCount]) {
        for count in counts {
            self.analytics
                .add(count.shop_id, count.day, count.metric.clone(), count.value);
        }
    }

    /// Writes what is held (merged, in key order, zeros left out), on the transaction's
    /// connection.
    pub fn write(self, conn: &mut DbConnection) -> StoreResult<()> {
        let mut tx = StoreTx::new(conn);
        self.activity.record(&mut tx)?;
        self.analytics.record(&mut tx)
    }
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
