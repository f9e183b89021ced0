//! Webhook storage on both real databases: endpoints, the message queue with leases, attempts.

#![allow(clippy::unwrap_used)] // test code: a panic is a failed assertion

use std::time::Duration;

use mercer_domain::Timestamp;
use mercer_domain::access::credentials::Secret;
use mercer_domain::access::shop::{Shop, ShopInput, create_shop};
use mercer_domain::kernel::ids::MessageId;
use mercer_domain::ports::Database;
use mercer_domain::webhooks::{
    AttemptOutcome, DeliveryAttempt, MessageStatus, MessageUpdate, NewWebhookEndpoint, WebhookKind,
    enqueue_for_endpoint, enqueue_for_topic,
};
use mercer_store::testing::TestDatabase;
use mercer_store::{Backend, Store, backend_tests};
use serde_json::json;

fn at(seconds: i64) -> Timestamp {
    Timestamp::from_micros(1_700_000_000_000_000).plus_seconds(seconds)
}

fn shop(store: &Store) -> Shop {
    store
        .write(|tx| {
            create_shop(
                tx,
                ShopInput {
                    shop_domain: "a.shop.test".into(),
                    ..ShopInput::default()
                },
                at(0),
            )
        })
        .unwrap()
}

fn endpoint(
    store: &Store,
    shop: &Shop,
    kind: WebhookKind,
    topic: &str,
) -> mercer_domain::webhooks::WebhookEndpoint {
    let new = NewWebhookEndpoint {
        shop_id: shop.id,
        kind,
        topic: topic.into(),
        callback_url: "http://127.0.0.1:9/hook".into(),
        secret: (kind == WebhookKind::Subscription).then(|| Secret::new("endpoint-secret")),
        created_at: at(0),
    };
    store
        .write(|tx| Ok(tx.insert_webhook_endpoint(&new)?))
        .unwrap()
}

fn endpoints_fan_out_by_topic(backend: Backend) {
    let (_db, store) = TestDatabase::migrated(backend);
    let shop = shop(&store);
    let one = endpoint(&store, &shop, WebhookKind::Checkout, "order/processed");
    let two = endpoint(&store, &shop, WebhookKind::Checkout, "order/processed");
    endpoint(&store, &shop, WebhookKind::Checkout, "order/failed");
    endpoint(&store, &shop, WebhookKind::Subscription, "order/processed");
    assert_eq!(one.public_id.len(), 32);
    assert_ne!(one.public_id, two.public_id);
    let rows = store
        .write(|tx| {
            enqueue_for_topic(
                tx,
                shop.id,
                WebhookKind::Checkout,
                "order/processed",
                &json!({"n": 1}),
                Some("checkout:one"),
                at(1),
            )
        })
        .unwrap();
    assert_eq!(
        rows.len(),
        2,
        "one message per subscribed checkout endpoint"
    );
    // Listed by what they are about, newest first (as the console's Checkouts page does).
    let about = store
        .read(|tx| Ok(tx.webhook_messages_about(shop.id, "checkout:one", 10)?))
        .unwrap();
    assert_eq!(
        about.iter().map(|m| m.id).collect::<Vec<_>>(),
        [rows[1], rows[0]]
    );
    store
        .write(|tx| {
            Ok(tx.set_webhook_endpoint_health(two.id, None, Some((at(2), "gone")), at(2))?)
        })
        .unwrap();
    let rows = store
        .write(|tx| {
            enqueue_for_topic(
                tx,
                shop.id,
                WebhookKind::Checkout,
                "order/processed",
                &json!({"n": 2}),
                None,
                at(3),
            )
        })
        .unwrap();
    assert_eq!(rows.len(), 1, "disabled endpoints get nothing");
    assert_eq!(
        store
            .read(|tx| Ok(tx.count_disabled_webhook_endpoints()?))
            .unwrap(),
        1
    );
    store
        .write(|tx| Ok(tx.enable_webhook_endpoint(two.id, at(4))?))
        .unwrap();
    assert_eq!(
        store
            .read(|tx| Ok(tx.count_disabled_webhook_endpoints()?))
            .unwrap(),
        0
    );
    let found = store
        .read(|tx| Ok(tx.webhook_endpoint(shop.id, &one.public_id)?))
        .unwrap()
        .unwrap();
    assert_eq!(found, one);
    let subscription = store
        .read(|tx| Ok(tx.webhook_endpoints(shop.id, WebhookKind::Subscription)?))
        .unwrap();
    assert_eq!(subscription[0].secret, Some(Secret::new("endpoint-secret")));
}

fn messages_are_leased_attempted_and_finished(backend: Backend) {
    let (_db, store) = TestDatabase::migrated(backend);
    let shop = shop(&store);
    let target = endpoint(&store, &shop, WebhookKind::Checkout, "order/created");
    let (row, message_id) = store
        .write(|tx| enqueue_for_endpoint(tx, &target, &json!({"a": 1}), at(0)))
        .unwrap();
    let claimed = store
        .write(|tx| Ok(tx.claim_webhook_messages(at(0), 10, at(30))?))
        .unwrap();
    assert_eq!(claimed.len(), 1);
    let message = &claimed[0];
    assert_eq!(message.next_attempt_at, at(30), "answered as leased");
    assert!(message.message_id.starts_with("msg_") && message.message_id.len() == 36);
    assert_eq!(message.message_id, message_id);
    assert_eq!(
        (message.id, message.payload.as_str(), message.attempts),
        (row, "{\"a\":1}", 0)
    );
    assert!(
        store
            .write(|tx| Ok(tx.claim_webhook_messages(at(5), 10, at(35))?))
            .unwrap()
            .is_empty(),
        "leased"
    );
    // A worker that died holding it: the message is taken again once the lease ends.
    let retaken = store
        .write_statement(|tx| Ok(tx.claim_webhook_messages(at(30), 10, at(60))?))
        .unwrap();
    assert_eq!(retaken.len(), 1, "the lease ended");

    let failed = DeliveryAttempt {
        message_row: row,
        attempted_at: at(1),
        outcome: AttemptOutcome {
            status: Some(503),
            latency: Duration::from_millis(12),
            response: Some("busy".into()),
            error: None,
            retry_after: Some(Duration::from_secs(7)),
        },
    };
    let retry = MessageUpdate {
        id: row,
        status: MessageStatus::Pending,
        attempts: 1,
        next_attempt_at: at(8),
        delivered_at: None,
    };
    store
        .write(|tx| Ok(tx.record_webhook_attempts(std::slice::from_ref(&failed), &[retry])?))
        .unwrap();
    assert_eq!(
        store.read(|tx| Ok(tx.webhook_queue_depth(at(2))?)).unwrap(),
        (0, 1)
    );
    let again = store
        .write(|tx| Ok(tx.claim_webhook_messages(at(8), 10, at(40))?))
        .unwrap();
    assert_eq!(
        (again[0].attempts, again[0].message_id.clone()),
        (1, message.message_id.clone()),
        "same webhook-id"
    );

    let delivered = DeliveryAttempt {
        message_row: row,
        attempted_at: at(9),
        outcome: AttemptOutcome {
            status: Some(200),
            latency: Duration::from_millis(3),
            ..AttemptOutcome::default()
        },
    };
    let done = MessageUpdate {
        id: row,
        status: MessageStatus::Delivered,
        attempts: 2,
        next_attempt_at: at(9),
        delivered_at: Some(at(9)),
    };
    store
        .write(|tx| Ok(tx.record_webhook_attempts(std::slice::from_ref(&delivered), &[done])?))
        .unwrap();
    let attempts = store.read(|tx| Ok(tx.webhook_attempts(row)?)).unwrap();
    assert_eq!(attempts, [failed, delivered]);
    let stored = store
        .read(|tx| Ok(tx.webhook_message(&message.message_id)?))
        .unwrap()
        .unwrap();
    assert_eq!(
        (stored.status, stored.attempts, stored.delivered_at),
        (MessageStatus::Delivered, 2, Some(at(9)))
    );
    assert!(
        store
            .write(|tx| Ok(tx.claim_webhook_messages(at(100), 10, at(200))?))
            .unwrap()
            .is_empty()
    );
}

fn deleting_an_endpoint_cancels_its_pending_messages(backend: Backend) {
    let (_db, store) = TestDatabase::migrated(backend);
    let shop = shop(&store);
    let target = endpoint(
        &store,
        &shop,
        WebhookKind::Subscription,
        "subscription_created",
    );
    for n in 0..3 {
        store
            .write(|tx| enqueue_for_endpoint(tx, &target, &json!({"n": n}), at(0)))
            .unwrap();
    }
    store
        .write(|tx| Ok(tx.delete_webhook_endpoint(target.id, at(1))?))
        .unwrap();
    assert!(
        store
            .read(|tx| Ok(tx.webhook_endpoint(shop.id, &target.public_id)?))
            .unwrap()
            .is_none()
    );
    let (found, deleted) = store
        .read(|tx| Ok(tx.webhook_endpoints_by_ids(&[target.id])?))
        .unwrap()
        .remove(0);
    assert!(deleted && found.id == target.id);
    let messages = store
        .read(|tx| Ok(tx.webhook_messages_of_endpoint(target.id, 10)?))
        .unwrap();
    assert!(
        messages
            .iter()
            .all(|m| m.status == MessageStatus::Cancelled)
    );
    assert_eq!(
        store.read(|tx| Ok(tx.webhook_queue_depth(at(2))?)).unwrap(),
        (0, 0)
    );
}

fn concurrent_dispatchers_never_share_a_message(backend: Backend) {
    let (_db, store) = TestDatabase::migrated(backend);
    let shop = shop(&store);
    let target = endpoint(&store, &shop, WebhookKind::Checkout, "order/created");
    for n in 0..80 {
        store
            .write(|tx| enqueue_for_endpoint(tx, &target, &json!({"n": n}), at(0)))
            .unwrap();
    }
    let workers: Vec<_> = (0..4)
        .map(|_| {
            let store = store.clone();
            std::thread::spawn(move || {
                let mut mine = Vec::new();
                loop {
                    // As the dispatcher claims: one statement, outside a transaction on
                    // PostgreSQL.
                    let batch = store
                        .write_statement(|tx| Ok(tx.claim_webhook_messages(at(1), 7, at(1000))?))
                        .unwrap();
                    if batch.is_empty() {
                        return mine;
                    }
                    mine.extend(batch.into_iter().map(|m| m.id));
                }
            })
        })
        .collect();
    let mut all: Vec<MessageId> = workers
        .into_iter()
        .flat_map(|w| w.join().unwrap())
        .collect();
    all.sort_unstable();
    let claimed = all.len();
    all.dedup();
    assert_eq!((claimed, all.len()), (80, 80));
}

/// A receiver's answer, or an error text, holding a NUL is stored with U+FFFD in its place: on
/// PostgreSQL the NUL would fail the whole batch's record, and its messages would be sent again.
fn answers_holding_a_nul_are_recorded(backend: Backend) {
    let (_db, store) = TestDatabase::migrated(backend);
    let shop = shop(&store);
    let target = endpoint(&store, &shop, WebhookKind::Checkout, "order/created");
    let (row, _) = store
        .write(|tx| enqueue_for_endpoint(tx, &target, &json!({"a": 1}), at(0)))
        .unwrap();
    let attempt = DeliveryAttempt {
        message_row: row,
        attempted_at: at(1),
        outcome: AttemptOutcome {
            status: Some(500),
            latency: Duration::from_millis(2),
            response: Some("bad\0answer".into()),
            error: Some("odd\0error".into()),
            retry_after: None,
        },
    };
    let update = MessageUpdate {
        id: row,
        status: MessageStatus::Pending,
        attempts: 1,
        next_attempt_at: at(8),
        delivered_at: None,
    };
    store
        .write(|tx| Ok(tx.record_webhook_attempts(&[attempt], &[update])?))
        .unwrap();
    let attempts = store.read(|tx| Ok(tx.webhook_attempts(row)?)).unwrap();
    assert_eq!(
        attempts[0].outcome.response.as_deref(),
        Some("bad\u{FFFD}answer")
    );
    assert_eq!(
        attempts[0].outcome.error.as_deref(),
        Some("odd\u{FFFD}error")
    );
}

/// The claim takes the messages due longest, answers them in id order, leased, and leaves
/// those not yet due.
fn the_longest_due_messages_are_claimed_first(backend: Backend) {
    let (_db, store) = TestDatabase::migrated(backend);
    let shop = shop(&store);
    let target = endpoint(&store, &shop, WebhookKind::Checkout, "order/created");
    let rows: Vec<MessageId> = [3, 9, 1, 2]
        .into_iter()
        .map(|due| {
            store
                .write(|tx| enqueue_for_endpoint(tx, &target, &json!({"due": due}), at(due)))
                .unwrap()
                .0
        })
        .collect();
    let claim = |now, limit| {
        store
            .write_statement(|tx| Ok(tx.claim_webhook_messages(now, limit, at(100))?))
            .unwrap()
    };
    let first = claim(at(5), 2);
    assert_eq!(
        first.iter().map(|m| m.id).collect::<Vec<_>>(),
        [rows[2], rows[3]],
        "due at 1 and 2, in id order"
    );
    assert!(first.iter().all(|m| m.next_attempt_at == at(100)));
    let second = claim(at(5), 10);
    assert_eq!(
        second.iter().map(|m| m.id).collect::<Vec<_>>(),
        [rows[0]],
        "due at 3; the one due at 9 is not due yet"
    );
    assert_eq!(claim(at(9), 10)[0].id, rows[1]);
}

backend_tests!(
    answers_holding_a_nul_are_recorded,
    the_longest_due_messages_are_claimed_first,
    endpoints_fan_out_by_topic,
    messages_are_leased_attempted_and_finished,
    deleting_an_endpoint_cancels_its_pending_messages,
    concurrent_dispatchers_never_share_a_message,
);
