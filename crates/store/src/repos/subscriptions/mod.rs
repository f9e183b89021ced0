//! The subscriptions feature's storage: its writes of the shop's one customer record and its
//! addresses (the rows the platform's events and the directory share), and the subscriptions
//! with their line items and status log, and the scheduler's attempts to place their orders.

mod analytics;
mod cancellation;
mod customers;
mod dunning;
mod groups;
mod imports;
mod orders;
pub(crate) mod records;

use mercer_domain::{StorageError, Timestamp};

fn time(micros: i64) -> Timestamp {
    Timestamp::from_micros(micros)
}

fn micros(time: Option<Timestamp>) -> Option<i64> {
    time.map(Timestamp::as_micros)
}

/// A stored value that does not read back.
fn corrupt(what: &str, id: i64, detail: impl std::fmt::Display) -> StorageError {
    StorageError::other(format!("stored {what} {id} does not read back: {detail}"))
}

/// Where a 1-based page of `limit` rows starts.
fn offset(limit: i64, page: i64) -> i64 {
    page.max(1).saturating_sub(1).saturating_mul(limit.max(0))
}
