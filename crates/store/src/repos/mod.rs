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

/// One connection, inside or outside a transaction, seen through the domain's ports.
pub struct StoreTx<'a> {
    pub(super) conn: &'a mut DbConnection,
}

impl<'a> StoreTx<'a> {
    pub fn new(conn: &'a mut DbConnection) -> Self {
        StoreTx { conn }
    }
}
