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

/// One connection, inside or outside a transaction, seen through the domain's ports.
pub struct StoreTx<'a> {
    pub(super) conn: &'a mut DbConnection,
}

impl<'a> StoreTx<'a> {
    pub fn new(conn: &'a mut DbConnection) -> Self {
        StoreTx { conn }
    }
}
