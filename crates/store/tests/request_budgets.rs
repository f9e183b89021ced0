//! Request budgets in the store: a shop's budgets kept and cleared on both databases, and the
//! shared bucket processes lease slices of on PostgreSQL (refused on SQLite, whose buckets stay
//! in the one process's memory).

#![allow(clippy::unwrap_used)] // test code: a panic is a failed assertion

use std::time::Duration;

use mercer_domain::Timestamp;
use mercer_domain::access::budgets::{BudgetChange, SharedBudgets, TokenBucket};
use mercer_domain::access::shop::{
    BudgetChanges, ShopInput, ShopSettings, create_shop, find_shop, update_shop_settings,
};
use mercer_domain::ports::Database;
use mercer_store::testing::TestDatabase;
use mercer_store::{Backend, backend_tests};

fn a_shops_budgets_are_kept_and_cleared(backend: Backend) {
    let (_db, store) = TestDatabase::migrated(backend);
    let now = Timestamp::from_micros(1_800_000_000_000_000);
    let shop = store
        .write(|tx| {
            create_shop(
                tx,
                ShopInput {
                    shop_domain: "budgets.shop.test".into(),
                    ..ShopInput::default()
                },
                now,
            )
        })
        .unwrap();
    assert!(shop.budgets.is_empty(), "a new shop sets no budget");
    let id = shop.identifier.as_str().to_string();
    let change = |budgets: BudgetChanges| {
        let id = id.clone();
        store
            .write(move |tx| {
                update_shop_settings(
                    tx,
                    &id,
                    ShopSettings {
                        budgets,
                        ..ShopSettings::default()
                    },
                    now,
                )
            })
            .unwrap()
    };
    change(BudgetChanges {
        per_token: Some(BudgetChange::Set(25)),
        connector_events: Some(BudgetChange::Set(400)),
        storefront: Some(BudgetChange::Set(7)),
    });
    let read = store.read(|tx| find_shop(tx, &id)).unwrap();
    assert_eq!(read.budgets.per_token, Some(25));
    assert_eq!(read.budgets.connector_events, Some(400));
    assert_eq!(read.budgets.storefront, Some(7));
    change(BudgetChanges {
        connector_events: Some(BudgetChange::Clear),
        ..BudgetChanges::default()
    });
    let read = store.read(|tx| find_shop(tx, &id)).unwrap();
    assert_eq!(read.budgets.per_token, Some(25), "left as it was");
    assert_eq!(read.budgets.connector_events, None, "cleared");
    assert_eq!(read.budgets.storefront, Some(7));
}

/// A lease takes whole tokens from a bucket that starts full, never past it, and refills at the
/// rate on the database's clock, as `TokenBucket::take_up_to` does.
fn a_shared_bucket_hands_out_its_budget_in_slices(backend: Backend) {
    let (_db, store) = TestDatabase::migrated(backend);
    if backend == Backend::Sqlite {
        assert!(
            store.lease("token:1", 10, 3).is_err(),
            "not shared on SQLite"
        );
        return;
    }
    // 10/s: the burst is 20, handed out 8 at a time.
    let mut taken = Vec::new();
    for _ in 0..4 {
        taken.push(store.lease("token:1", 10, 8).unwrap().granted);
    }
    assert_eq!(
        taken[..3],
        [8, 8, 4],
        "the burst of 20, then nothing: {taken:?}"
    );
    assert!(taken[3] <= 1, "at most what refilled meanwhile: {taken:?}");
    // Another key has a bucket of its own.
    assert_eq!(store.lease("storefront:1", 10, 8).unwrap().granted, 8);
    // 0.35 s later, about 3.5 tokens refilled: three whole ones.
    let before = store.lease("token:1", 10, 0).unwrap().left;
    std::thread::sleep(Duration::from_millis(350));
    let lease = store.lease("token:1", 10, 8).unwrap();
    let mut mirror = TokenBucket::with_tokens(10, before, Duration::ZERO);
    let expected = mirror.take_up_to(8, Duration::from_millis(350));
    assert!(
        lease.granted.abs_diff(expected) <= 1,
        "granted {} where the bucket's arithmetic gives {expected}",
        lease.granted
    );
    // A lower rate caps the tokens at its burst.
    std::thread::sleep(Duration::from_millis(2100));
    let lease = store.lease("token:1", 1, 100).unwrap();
    assert_eq!(lease.granted, 2, "the burst of 1/s is 2");
}

/// Buckets no lease touched for the idle time are dropped, the others kept; a dropped bucket
/// starts full again.
fn idle_shared_buckets_are_dropped(backend: Backend) {
    let (db, store) = TestDatabase::migrated(backend);
    if backend == Backend::Sqlite {
        assert!(store.forget_idle(Duration::from_secs(1)).is_err());
        return;
    }
    store.lease("token:1", 10, 20).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    store.lease("token:2", 10, 20).unwrap();
    assert_eq!(store.forget_idle(Duration::from_millis(200)).unwrap(), 1);
    let keys = db.texts("SELECT budget_key AS t FROM request_budgets");
    assert_eq!(keys, ["token:2"], "the bucket used lately stays");
    assert_eq!(
        store.lease("token:1", 10, 20).unwrap().granted,
        20,
        "a dropped bucket starts full"
    );
    let kept = store.lease("token:2", 10, 20).unwrap().granted;
    assert!(kept < 10, "a kept one is still spent: {kept} granted");
}

backend_tests!(
    a_shops_budgets_are_kept_and_cleared,
    a_shared_bucket_hands_out_its_budget_in_slices,
    idle_shared_buckets_are_dropped
);
