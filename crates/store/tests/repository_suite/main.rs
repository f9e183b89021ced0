//! One repository suite, three targets: every test here is written once against
//! `mercer_domain::ports::Database` and runs on the in-memory database (`name::memory`), the
//! store on SQLite (`name::sqlite`) and the store on PostgreSQL (`name::postgres`). The real
//! store is the reference: where the memory database answers otherwise, the memory database is
//! wrong. So the fake the domain's own tests run on cannot drift from the real thing.
//!
//! It covers what the memory database claims to model. Not covered, because memory does not
//! model them (they are SQL, tested in the store's other suites on both real databases): the
//! directory's filters, sorting and paging; concurrent claimers and the leases between
//! workers; a partition lock held by another process; rows that do not read back.
//!
//! One file per feature, with the domain's folder names; the helpers every feature uses are
//! here, a feature's own helpers are in its file (`pub(crate)` when another feature's tests use
//! them). A test is a `fn name(db: &impl Database)` with `every_database!(name);` right under
//! it. A test fn without that line runs nowhere: it is dead code, which
//! `cargo clippy --all-targets -- -D warnings` refuses.

#![allow(clippy::unwrap_used)] // test code: a panic is a failed assertion

use mercer_domain::access::shop::{Shop, ShopInput, create_shop};
use mercer_domain::ports::Database;
use mercer_domain::{DomainError, Timestamp};

// The store's `every_database!`, for every feature file below.
#[macro_use]
extern crate mercer_store;

mod access;
mod analytics;
mod box_builder;
mod checkout;
mod directory;
mod overrides;
mod platform;
mod portal;
mod scheduler;
mod subscriptions;
mod units_of_work;
mod webhook_retention;
mod webhooks;

fn at(seconds: i64) -> Timestamp {
    Timestamp::from_micros(1_700_000_000_000_000).plus_seconds(seconds)
}

fn shop(db: &impl Database, domain: &str) -> Shop {
    db.write(|tx| {
        create_shop(
            tx,
            ShopInput {
                shop_domain: domain.into(),
                ..ShopInput::default()
            },
            at(0),
        )
    })
    .unwrap()
}

/// Asserts that the work was refused by a unique constraint.
fn assert_taken<T: std::fmt::Debug>(result: Result<T, DomainError>) {
    let Err(DomainError::Storage(error)) = &result else {
        panic!("must be refused as taken: {result:?}")
    };
    assert!(error.is_unique_violation(), "{error:?}");
}
