//! A deleted shop's background work stops, on both databases: the scheduler claims none of its
//! subscriptions, its webhook endpoints go and their waiting messages are cancelled, while the
//! work of the shops left is untouched.

#![allow(clippy::unwrap_used)] // test code: a panic is a failed assertion

use mercer_domain::Timestamp;
use mercer_domain::access::credentials::Secret;
use mercer_domain::access::shop::{Shop, ShopInput, create_shop};
use mercer_domain::kernel::ids::{ShopId, SubscriptionId};
use mercer_domain::operations::delete_shop;
use mercer_domain::ports::Database;
use mercer_domain::subscriptions::input::NewSubscription;
use mercer_domain::subscriptions::operations::create_subscription;
use mercer_domain::subscriptions::resources::{Actor, ActorType, SubscriptionStatus};
use mercer_domain::webhooks::{
    MessageStatus, NewWebhookEndpoint, WebhookKind, enqueue_for_endpoint,
};
use mercer_store::testing::TestDatabase;
use mercer_store::{Backend, Store, backend_tests};
use serde_json::json;

fn at(text: &str) -> Timestamp {
    Timestamp::parse_rfc3339(text).unwrap()
}

const CREATED: &str = "2026-03-01T12:00:00Z";
const DUE: &str = "2026-03-02T14:00:00Z";

fn shop(store: &Store, domain: &str) -> Shop {
    store
        .write(|tx| {
            create_shop(
                tx,
                ShopInput {
                    shop_domain: domain.into(),
                    ..ShopInput::default()
                },
                at(CREATED),
            )
        })
        .unwrap()
}

/// An active subscription of `shop` whose order comes due at [`DUE`].
fn due_subscription(store: &Store, shop: &Shop, n: usize) -> i64 {
    let actor = Actor {
        kind: ActorType::Api,
        id: 1,
        name: "test".into(),
    };
    let body = json!({
        "customer": {"email": format!("c{n}@example.test")},
        "subscription": {
            "subscription_status": "active",
            "order_rrule": "DTSTART:20260302T140000Z\nRRULE:FREQ=WEEKLY",
            "next_order_datetime": DUE,
            "line_items": [{"platform_product_id": "p", "platform_variant_id": "v",
                            "quantity": 1, "price": 100}],
            "shipping_address": {"street1": "1 Main St", "city": "Lyon", "country_code": "FR"}
        }
    });
    let new = NewSubscription::parse(&body, shop, at(CREATED)).unwrap();
    store
        .write(|tx| create_subscription(tx, shop, new, actor.clone(), at(CREATED)))
        .unwrap()
        .0
        .id
        .0
}

fn due(store: &Store) -> Vec<i64> {
    let mut ids: Vec<i64> = store
        .write(|tx| Ok(tx.lock_due_subscriptions(SubscriptionStatus::Active, at(DUE), 100)?))
        .unwrap()
        .into_iter()
        .map(|(_, SubscriptionId(id))| id)
        .collect();
    ids.sort_unstable();
    ids
}

fn delete(store: &Store, shop: &Shop) {
    store
        .write(|tx| delete_shop(tx, shop.identifier.as_str(), true, at(DUE)))
        .unwrap();
}

fn the_scheduler_claims_no_subscription_of_a_deleted_shop(backend: Backend) {
    let (_db, store) = TestDatabase::migrated(backend);
    let gone = shop(&store, "gone.shop.test");
    let kept = shop(&store, "kept.shop.test");
    let gone_ids = [
        due_subscription(&store, &gone, 0),
        due_subscription(&store, &gone, 1),
    ];
    let kept_id = due_subscription(&store, &kept, 2);
    let mut all = vec![gone_ids[0], gone_ids[1], kept_id];
    all.sort_unstable();
    assert_eq!(due(&store), all);
    delete(&store, &gone);
    assert_eq!(due(&store), [kept_id], "only the shop left has due orders");
}

fn deleting_a_shop_deletes_its_endpoints_and_cancels_their_messages(backend: Backend) {
    let (_db, store) = TestDatabase::migrated(backend);
    let gone = shop(&store, "gone.shop.test");
    let kept = shop(&store, "kept.shop.test");
    let endpoint = |shop: &Shop, kind: WebhookKind| {
        let new = NewWebhookEndpoint {
            shop_id: shop.id,
            kind,
            topic: "subscription_created".into(),
            callback_url: "http://127.0.0.1:9/hook".into(),
            secret: (kind == WebhookKind::Subscription).then(|| Secret::new("endpoint-secret")),
            created_at: at(CREATED),
        };
        store
            .write(|tx| Ok(tx.insert_webhook_endpoint(&new)?))
            .unwrap()
    };
    let endpoints = [
        endpoint(&gone, WebhookKind::Subscription),
        endpoint(&gone, WebhookKind::Checkout),
        endpoint(&kept, WebhookKind::Subscription),
    ];
    for target in &endpoints {
        store
            .write(|tx| enqueue_for_endpoint(tx, target, &json!({"n": 1}), at(CREATED)))
            .unwrap();
    }
    delete(&store, &gone);

    let status_of = |shop_id: ShopId, status: MessageStatus| {
        store
            .read(|tx| Ok(tx.count_shop_webhook_messages(shop_id, status)?))
            .unwrap()
    };
    assert_eq!(status_of(gone.id, MessageStatus::Pending), 0);
    assert_eq!(status_of(gone.id, MessageStatus::Cancelled), 2);
    assert_eq!(status_of(kept.id, MessageStatus::Pending), 1);
    for kind in [WebhookKind::Subscription, WebhookKind::Checkout] {
        assert!(
            store
                .read(|tx| Ok(tx.webhook_endpoints(gone.id, kind)?))
                .unwrap()
                .is_empty()
        );
    }
    // No new message is queued for it, and the dispatcher finds only the other shop's.
    assert!(
        store
            .read(|tx| Ok(tx.active_webhook_endpoints(
                gone.id,
                WebhookKind::Subscription,
                &["subscription_created"]
            )?))
            .unwrap()
            .is_empty()
    );
    let claimed = store
        .write(|tx| Ok(tx.claim_webhook_messages(at(DUE), 10, at(DUE).plus_seconds(60))?))
        .unwrap();
    assert_eq!(claimed.len(), 1);
    assert_eq!(claimed[0].shop_id, kept.id);
}

backend_tests!(
    the_scheduler_claims_no_subscription_of_a_deleted_shop,
    deleting_a_shop_deletes_its_endpoints_and_cancels_their_messages,
);
