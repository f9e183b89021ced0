//! The scheduler's claims against both real databases (docs/scheduler.md): two claimers take
//! different due subscriptions (PostgreSQL: `FOR UPDATE SKIP LOCKED`, neither waits; SQLite: the
//! second waits for the first to commit), and a subscription a client's change holds is left
//! to the next run, so the change and the claim never both read the same state.

#![allow(clippy::unwrap_used)] // test code: a panic is a failed assertion

use mercer_domain::Timestamp;
use mercer_domain::access::shop::{Shop, ShopInput, create_shop};
use mercer_domain::kernel::ids::ShopId;
use mercer_domain::kernel::ids::SubscriptionId;
use mercer_domain::ports::Database;
use mercer_domain::subscriptions::input::NewSubscription;
use mercer_domain::subscriptions::operations::{
    ActionRequest, create_subscription, take_subscription_action,
};
use mercer_domain::subscriptions::pausing::parse_pause;
use mercer_domain::subscriptions::resources::{Actor, ActorType, SubscriptionStatus};
use mercer_store::testing::{TestDatabase, claim_concurrently};
use mercer_store::{Backend, Store, backend_tests};
use serde_json::json;

fn at(text: &str) -> Timestamp {
    Timestamp::parse_rfc3339(text).unwrap()
}

const NOW: &str = "2026-03-02T14:00:00Z";

/// A shop with `count` active subscriptions whose order came due at 14:00.
fn due_subscriptions(store: &Store, count: usize) -> (Shop, Vec<i64>) {
    let now = at("2026-03-01T12:00:00Z");
    let shop = store
        .write(|tx| {
            create_shop(
                tx,
                ShopInput {
                    shop_domain: "scheduler.shop.test".into(),
                    ..ShopInput::default()
                },
                now,
            )
        })
        .unwrap();
    let actor = Actor {
        kind: ActorType::Api,
        id: 1,
        name: "test".into(),
    };
    let ids = (0..count)
        .map(|n| {
            let body = json!({
                "customer": {"email": format!("c{n}@example.test")},
                "subscription": {
                    "subscription_status": "active",
                    "order_rrule": "DTSTART:20260302T140000Z\nRRULE:FREQ=WEEKLY",
                    "next_order_datetime": NOW,
                    "line_items": [{"platform_product_id": "p", "platform_variant_id": "v",
                                    "quantity": 1, "price": 100}],
                    "shipping_address": {"street1": "1 Main St", "city": "Lyon", "country_code": "FR"}
                }
            });
            let new = NewSubscription::parse(&body, &shop, now).unwrap();
            store
                .write(|tx| create_subscription(tx, &shop, new, actor.clone(), now))
                .unwrap()
                .0
                .id
                .0
        })
        .collect();
    (shop, ids)
}

fn ids(pairs: Vec<(ShopId, SubscriptionId)>) -> Vec<i64> {
    pairs.into_iter().map(|(_, id)| id.0).collect()
}

fn concurrent_claimers_take_different_due_subscriptions(backend: Backend) {
    let (_db, store) = TestDatabase::migrated(backend);
    let (_, all) = due_subscriptions(&store, 6);
    let (first, second) = claim_concurrently(backend, &store, |tx, _| {
        Ok(ids(tx.lock_due_subscriptions(
            SubscriptionStatus::Active,
            at(NOW),
            3,
        )?))
    });
    assert_eq!((first.len(), second.len()), (3, 3));
    let mut claimed: Vec<i64> = first.iter().chain(&second).copied().collect();
    claimed.sort_unstable();
    match backend {
        // Neither waited: the second took the three the first had not locked.
        Backend::Postgres => assert_eq!(claimed, all),
        // The second ran after the first committed, which changed nothing: the same three.
        Backend::Sqlite => assert_eq!(first, second),
    }
}

fn a_subscription_a_change_holds_is_left_to_the_next_run(backend: Backend) {
    let (_db, store) = TestDatabase::migrated(backend);
    let (shop, all) = due_subscriptions(&store, 2);
    let held = all[0];
    let (first, second) = claim_concurrently(backend, &store, move |tx, claimer| {
        if claimer == "first" {
            // A client's action on the subscription, its transaction still open.
            tx.lock_subscription(shop.id, SubscriptionId(held))?;
            Ok(vec![held])
        } else {
            Ok(ids(tx.lock_due_subscriptions(
                SubscriptionStatus::Active,
                at(NOW),
                10,
            )?))
        }
    });
    assert_eq!(first, [held]);
    match backend {
        Backend::Postgres => assert_eq!(second, [all[1]], "the held one is skipped"),
        // SQLite writes one at a time: the claim came after the change was committed.
        Backend::Sqlite => assert_eq!(second, all),
    }
}

/// Two schedulers at once resume a subscription paused until a date once: on PostgreSQL the
/// second skips the row the first holds; on SQLite it waits, then finds it resumed.
fn racing_schedulers_resume_a_paused_subscription_once(backend: Backend) {
    let (_db, store) = TestDatabase::migrated(backend);
    let (shop, all) = due_subscriptions(&store, 1);
    let id = SubscriptionId(all[0]);
    let pause = parse_pause(&json!({"resume_on": "2026-03-05"})).unwrap();
    store
        .write(|tx| {
            take_subscription_action(
                tx,
                &shop,
                id,
                ActionRequest::Pause(pause),
                Actor::system(),
                at("2026-03-01T12:00:00Z"),
            )
        })
        .unwrap();
    let resume_at = at("2026-03-05T00:00:00Z");
    let (first, second) = claim_concurrently(backend, &store, move |tx, _| {
        if !tx.lock_due_resumption(shop.id, id, resume_at)? {
            return Ok(Vec::new());
        }
        let shop = tx.shop_by_id(shop.id)?.unwrap();
        take_subscription_action(
            tx,
            &shop,
            id,
            ActionRequest::Resume,
            Actor::system(),
            resume_at,
        )?;
        Ok(vec![id.0])
    });
    assert_eq!((first, second), (vec![id.0], Vec::new()));
    let (subscription, logs) = store
        .read(|tx| {
            Ok((
                tx.subscription(shop.id, id)?.unwrap(),
                tx.status_logs_of_subscription(shop.id, id, 10)?,
            ))
        })
        .unwrap();
    assert_eq!(
        subscription.state.subscription_status,
        SubscriptionStatus::Active
    );
    assert_eq!(subscription.state.resume_on, None);
    let resumed = logs.iter().filter(|log| log.reason == "resumed").count();
    assert_eq!(resumed, 1);
}

backend_tests!(
    concurrent_claimers_take_different_due_subscriptions,
    a_subscription_a_change_holds_is_left_to_the_next_run,
    racing_schedulers_resume_a_paused_subscription_once,
);
