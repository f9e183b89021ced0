//! The domain's storage ports, implemented with diesel on one pooled connection: one folder per
//! feature, with the domain's names.

mod access;
mod box_builder;
mod checkout;
mod directory;
mod kernel;
mod overrides;
pub(crate) mod platform;
mod subscriptions;
mod webhooks;

use crate::connection::DbConnection;

/// One connection, inside or outside a transaction, seen through the domain's ports.
pub struct StoreTx<'a> {
    pub(super) conn: &'a mut DbConnection,
}

impl<'a> StoreTx<'a> {
    pub fn new(conn: &'a mut DbConnection) -> Self {
        StoreTx { conn }
    }
}
