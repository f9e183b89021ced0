//! Webhooks: endpoints and messages.

use mercer_domain::kernel::ids::ShopId;
use std::time::Duration;

use mercer_domain::access::credentials::Secret;
use mercer_domain::kernel::ids::{MessageId, WebhookId};
use mercer_domain::ports::Database;
use mercer_domain::webhooks::{
    AttemptOutcome, DeliveryAttempt, MessageStatus, MessageUpdate, NewWebhookEndpoint,
    NewWebhookMessage, WebhookEndpoint, WebhookKind,
};
use serde_json::json;

use crate::{assert_taken, at, shop};

fn new_endpoint(
    shop_id: ShopId,
    kind: WebhookKind,
    topic: &str,
    seconds: i64,
) -> NewWebhookEndpoint {
    NewWebhookEndpoint {
        shop_id,
        kind,
        topic: topic.into(),
        callback_url: "http://127.0.0.1:9/hook".into(),
        secret: (kind == WebhookKind::Subscription).then(|| Secret::new("endpoint-secret")),
        created_at: at(seconds),
    }
}

fn endpoint(db: &impl Database, new: NewWebhookEndpoint) -> WebhookEndpoint {
    db.write(|tx| Ok(tx.insert_webhook_endpoint(&new)?))
        .unwrap()
}

fn webhook_endpoints_live_and_die(db: &impl Database) {
    let shop = shop(db, "a.shop.test");
    let one = endpoint(
        db,
        new_endpoint(shop.id, WebhookKind::Checkout, "order/processed", 1),
    );
    let two = endpoint(
        db,
        new_endpoint(shop.id, WebhookKind::Checkout, "order/processed", 2),
    );
    let failed = endpoint(
        db,
        new_endpoint(shop.id, WebhookKind::Checkout, "order/failed", 3),
    );
    let subscription = endpoint(
        db,
        new_endpoint(shop.id, WebhookKind::Subscription, "order/processed", 4),
    );
    assert_eq!(one.public_id.len(), 32);
    assert_ne!(one.public_id, two.public_id);
    assert_eq!(subscription.secret, Some(Secret::new("endpoint-secret")));
    assert_eq!(
        (
            one.created_at,
            one.updated_at,
            one.disabled_at,
            one.failing_since
        ),
        (at(1), at(1), None, None)
    );
    let found = db
        .read(|tx| Ok(tx.webhook_endpoint(shop.id, &one.public_id)?))
        .unwrap();
    assert_eq!(found, Some(one.clone()));
    assert!(
        db.read(|tx| Ok(tx.webhook_endpoint(ShopId(shop.id.0 + 1), &one.public_id)?))
            .unwrap()
            .is_none()
    );
    let checkout = db
        .read(|tx| Ok(tx.webhook_endpoints(shop.id, WebhookKind::Checkout)?))
        .unwrap();
    assert_eq!(
        checkout.iter().map(|e| e.id).collect::<Vec<_>>(),
        [one.id, two.id, failed.id],
        "oldest first, of the kind"
    );
    db.write(|tx| {
        let mut moved = two.clone();
        moved.callback_url = "http://127.0.0.1:9/other".to_string();
        tx.update_webhook_endpoint(&moved, at(5))?;
        tx.set_webhook_endpoint_health(one.id, Some(at(6)), None, at(6))?;
        Ok(())
    })
    .unwrap();
    let active = db
        .read(|tx| {
            Ok(tx.active_webhook_endpoints(shop.id, WebhookKind::Checkout, &["order/processed"])?)
        })
        .unwrap();
    assert_eq!(
        active.iter().map(|e| e.id).collect::<Vec<_>>(),
        [one.id, two.id]
    );
    assert_eq!(
        active[0].failing_since,
        Some(at(6)),
        "failing, still active"
    );
    let either = db
        .read(|tx| {
            Ok(tx.active_webhook_endpoints(
                shop.id,
                WebhookKind::Checkout,
                &["order/failed", "order/processed"],
            )?)
        })
        .unwrap();
    assert_eq!(
        either.iter().map(|e| e.id).collect::<Vec<_>>(),
        [one.id, two.id, failed.id],
        "several topics in one read, oldest first, of the kind"
    );
    assert_eq!(
        (active[1].callback_url.as_str(), active[1].updated_at),
        ("http://127.0.0.1:9/other", at(5))
    );
    let mut retopic = subscription.clone();
    retopic.topic = "subscription_paused".to_string();
    retopic.secret = Some(Secret::new("rotated-endpoint-secret"));
    db.write(|tx| Ok(tx.update_webhook_endpoint(&retopic, at(5))?))
        .unwrap();
    let stored = db
        .read(|tx| Ok(tx.webhook_endpoint(shop.id, &subscription.public_id)?))
        .unwrap()
        .unwrap();
    assert_eq!(
        (stored.topic.as_str(), stored.secret, stored.updated_at),
        (
            "subscription_paused",
            Some(Secret::new("rotated-endpoint-secret")),
            at(5)
        )
    );
    db.write(|tx| {
        Ok(tx.set_webhook_endpoint_health(
            one.id,
            Some(at(6)),
            Some((at(7), "failing for days")),
            at(7),
        )?)
    })
    .unwrap();
    let disabled = db
        .read(|tx| Ok(tx.webhook_endpoint(shop.id, &one.public_id)?))
        .unwrap()
        .unwrap();
    assert_eq!(
        (
            disabled.disabled_at,
            disabled.disabled_reason.as_deref(),
            disabled.updated_at
        ),
        (Some(at(7)), Some("failing for days"), at(7))
    );
    assert_eq!(
        db.read(|tx| Ok(tx.active_webhook_endpoints(
            shop.id,
            WebhookKind::Checkout,
            &["order/processed"]
        )?))
        .unwrap()
        .iter()
        .map(|e| e.id)
        .collect::<Vec<_>>(),
        [two.id]
    );
    assert_eq!(
        db.read(|tx| Ok(tx.count_disabled_webhook_endpoints()?))
            .unwrap(),
        1
    );
    db.write(|tx| Ok(tx.enable_webhook_endpoint(one.id, at(8))?))
        .unwrap();
    let enabled = db
        .read(|tx| Ok(tx.webhook_endpoint(shop.id, &one.public_id)?))
        .unwrap()
        .unwrap();
    assert_eq!(
        (
            enabled.disabled_at,
            enabled.disabled_reason,
            enabled.failing_since,
            enabled.updated_at
        ),
        (None, None, None, at(8)),
        "as new"
    );
    assert_eq!(
        db.read(|tx| Ok(tx.count_disabled_webhook_endpoints()?))
            .unwrap(),
        0
    );
    db.write(|tx| Ok(tx.delete_webhook_endpoint(two.id, at(9))?))
        .unwrap();
    assert!(
        db.read(|tx| Ok(tx.webhook_endpoint(shop.id, &two.public_id)?))
            .unwrap()
            .is_none()
    );
    let mut by_ids = db
        .read(|tx| Ok(tx.webhook_endpoints_by_ids(&[one.id, two.id])?))
        .unwrap();
    by_ids.sort_by_key(|(e, _)| e.id);
    assert_eq!(
        by_ids
            .iter()
            .map(|(e, deleted)| (e.id, *deleted))
            .collect::<Vec<_>>(),
        [(one.id, false), (two.id, true)],
        "deleted ones included"
    );
    assert_eq!(
        db.read(|tx| Ok(tx.webhook_endpoints(shop.id, WebhookKind::Checkout)?))
            .unwrap()
            .len(),
        2
    );
}
every_database!(webhook_endpoints_live_and_die);

/// The platform's applier asks this before enqueuing a customer-changed job: only a live
/// subscription endpoint of `customer_updated`, with the kind and topic the subscriptions
/// feature registers, hears it.
fn a_shop_hears_customer_changes_through_a_live_customer_updated_endpoint(db: &impl Database) {
    let other = shop(db, "b.shop.test");
    let shop = shop(db, "a.shop.test");
    let topic = mercer_domain::subscriptions::topics::Topic::CustomerUpdated.as_str();
    let hears = |shop_id| {
        db.read(|tx| Ok(tx.hears_customer_changes(shop_id)?))
            .unwrap()
    };
    assert!(!hears(shop.id));
    endpoint(db, new_endpoint(shop.id, WebhookKind::Checkout, topic, 1));
    endpoint(
        db,
        new_endpoint(
            shop.id,
            WebhookKind::Subscription,
            "subscription_created",
            2,
        ),
    );
    let disabled = endpoint(
        db,
        new_endpoint(shop.id, WebhookKind::Subscription, topic, 3),
    );
    db.write(|tx| {
        let disabled_at = Some((at(4), "failing"));
        Ok(tx.set_webhook_endpoint_health(disabled.id, None, disabled_at, at(4))?)
    })
    .unwrap();
    assert!(
        !hears(shop.id),
        "another kind, another topic, or disabled: not heard"
    );
    let live = endpoint(
        db,
        new_endpoint(shop.id, WebhookKind::Subscription, topic, 5),
    );
    assert!(hears(shop.id));
    assert!(!hears(other.id), "another shop's endpoint");
    db.write(|tx| Ok(tx.delete_webhook_endpoint(live.id, at(6))?))
        .unwrap();
    assert!(!hears(shop.id), "deleted");
}
every_database!(a_shop_hears_customer_changes_through_a_live_customer_updated_endpoint);

fn message(shop_id: ShopId, endpoint_id: WebhookId, n: u32, seconds: i64) -> NewWebhookMessage {
    NewWebhookMessage {
        message_id: format!("msg_{n}"),
        shop_id,
        endpoint_id,
        topic: "order/processed".into(),
        payload: json!({"n": n}).to_string(),
        created_at: at(seconds),
        subject: None,
        request_id: None,
        trace_parent: None,
        throttled: false,
    }
}

/// A message enqueued while a request is handled keeps the request's id through its claim
/// (which PostgreSQL makes in one statement naming its columns); one enqueued outside a
/// request has none.
fn webhook_messages_keep_the_request_that_enqueued_them(db: &impl Database) {
    use mercer_domain::kernel::jobs::within_request;
    use mercer_domain::webhooks::enqueue_for_topic;

    let shop = shop(db, "a.shop.test");
    let hook = endpoint(
        db,
        new_endpoint(shop.id, WebhookKind::Checkout, "order/processed", 0),
    );
    let enqueue = |seconds| {
        db.write(|tx| {
            enqueue_for_topic(
                tx,
                shop.id,
                WebhookKind::Checkout,
                "order/processed",
                &json!({"n": seconds}),
                None,
                at(seconds),
            )
        })
        .unwrap()
    };
    let from_request = within_request(Some("req-3".into()), || enqueue(1));
    let from_nowhere = enqueue(2);
    let mut claimed: Vec<(MessageId, WebhookId, Option<String>)> = db
        .write(|tx| Ok(tx.claim_webhook_messages(at(5), 10, at(35))?))
        .unwrap()
        .into_iter()
        .map(|message| (message.id, message.endpoint_id, message.request_id))
        .collect();
    claimed.sort();
    assert_eq!(
        claimed,
        [
            (from_request[0], hook.id, Some("req-3".to_string())),
            (from_nowhere[0], hook.id, None),
        ]
    );
}
every_database!(webhook_messages_keep_the_request_that_enqueued_them);

/// Messages for endpoints the caller knew (a test delivery's) are stored, in one call, only for
/// those that still take them: of the message's shop, kind and topic, neither deleted nor
/// disabled. The others are answered None and leave nothing behind; the stored ones keep their
/// request id and trace context, in the order given.
fn messages_are_stored_only_for_endpoints_that_still_take_them(db: &impl Database) {
    let (shop, other) = (shop(db, "a.shop.test"), shop(db, "b.shop.test"));
    let hook = |shop_id, kind| endpoint(db, new_endpoint(shop_id, kind, "order/processed", 0));
    let live = hook(shop.id, WebhookKind::Checkout);
    let disabled = hook(shop.id, WebhookKind::Checkout);
    let deleted = hook(shop.id, WebhookKind::Checkout);
    let subscription = hook(shop.id, WebhookKind::Subscription);
    db.write(|tx| {
        tx.set_webhook_endpoint_health(disabled.id, None, Some((at(1), "HTTP 410")), at(1))?;
        Ok(tx.delete_webhook_endpoint(deleted.id, at(1))?)
    })
    .unwrap();
    let mut traced = message(shop.id, live.id, 1, 2);
    traced.request_id = Some("req-1".into());
    traced.trace_parent = Some("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01".into());
    let mut other_topic = message(shop.id, live.id, 6, 2);
    other_topic.topic = "order/created".into();
    let messages = [
        traced,
        message(shop.id, disabled.id, 2, 2),
        message(shop.id, deleted.id, 3, 2),
        message(other.id, live.id, 4, 2),
        message(shop.id, subscription.id, 5, 2),
        other_topic,
        message(shop.id, live.id, 7, 2),
    ];
    let ids = db
        .write_statement(|tx| {
            Ok(tx.insert_webhook_messages_for_live_endpoints(WebhookKind::Checkout, &messages)?)
        })
        .unwrap();
    let stored: Vec<bool> = ids.iter().map(Option::is_some).collect();
    assert_eq!(stored, [true, false, false, false, false, false, true]);
    assert!(ids[0] < ids[6], "rows follow the order given: {ids:?}");
    let first = db
        .read(|tx| Ok(tx.webhook_message("msg_1")?))
        .unwrap()
        .unwrap();
    assert_eq!(
        (
            Some(first.id),
            first.endpoint_id,
            first.status,
            first.next_attempt_at,
            first.payload.as_str(),
            first.request_id.as_deref(),
            first.trace_parent.as_deref(),
        ),
        (
            ids[0],
            live.id,
            MessageStatus::Pending,
            at(2),
            r#"{"n":1}"#,
            Some("req-1"),
            messages[0].trace_parent.as_deref(),
        )
    );
    for refused in ["msg_2", "msg_3", "msg_4", "msg_5", "msg_6"] {
        let found = db.read(|tx| Ok(tx.webhook_message(refused)?)).unwrap();
        assert!(found.is_none(), "{refused} was stored");
    }
    let none = db
        .write_statement(|tx| {
            Ok(tx.insert_webhook_messages_for_live_endpoints(WebhookKind::Checkout, &[])?)
        })
        .unwrap();
    assert!(none.is_empty());
}
every_database!(messages_are_stored_only_for_endpoints_that_still_take_them);

fn webhook_messages_are_claimed_attempted_and_requeued(db: &impl Database) {
    let shop = shop(db, "a.shop.test");
    let hook = endpoint(
        db,
        new_endpoint(shop.id, WebhookKind::Checkout, "order/processed", 0),
    );
    let other = endpoint(
        db,
        new_endpoint(shop.id, WebhookKind::Checkout, "order/processed", 0),
    );
    let ids = db
        .write(|tx| {
            Ok(tx.insert_webhook_messages(&[
                message(shop.id, hook.id, 1, 1),
                message(shop.id, hook.id, 2, 2),
                message(shop.id, other.id, 3, 3),
            ])?)
        })
        .unwrap();
    assert_eq!(ids.len(), 3);
    assert_taken(
        db.write(|tx| Ok(tx.insert_webhook_messages(&[message(shop.id, other.id, 1, 4)])?)),
    );
    let first = db
        .read(|tx| Ok(tx.webhook_message("msg_1")?))
        .unwrap()
        .unwrap();
    assert_eq!(
        (first.id, first.endpoint_id, first.status, first.attempts),
        (ids[0], hook.id, MessageStatus::Pending, 0)
    );
    assert_eq!(
        (first.next_attempt_at, first.created_at, first.delivered_at),
        (at(1), at(1), None)
    );
    assert_eq!(first.payload, json!({"n": 1}).to_string());
    assert_eq!(
        db.read(|tx| Ok(tx.webhook_queue_depth(at(2))?)).unwrap(),
        (2, 1)
    );
    let claimed = db
        .write(|tx| Ok(tx.claim_webhook_messages(at(2), 10, at(32))?))
        .unwrap();
    let mut claimed_ids: Vec<MessageId> = claimed.iter().map(|m| m.id).collect();
    claimed_ids.sort_unstable();
    assert_eq!(claimed_ids, [ids[0], ids[1]]);
    assert!(
        db.write(|tx| Ok(tx.claim_webhook_messages(at(3), 10, at(33))?))
            .unwrap()
            .iter()
            .all(|m| m.id == ids[2]),
        "leased messages are held"
    );
    let outcome = |status: u16| AttemptOutcome {
        status: Some(status),
        latency: Duration::from_millis(12),
        response: Some("body".into()),
        error: None,
        retry_after: None,
    };
    db.write(|tx| {
        Ok(tx.record_webhook_attempts(
            &[
                DeliveryAttempt {
                    message_row: ids[0],
                    attempted_at: at(4),
                    outcome: outcome(500),
                },
                DeliveryAttempt {
                    message_row: ids[0],
                    attempted_at: at(5),
                    outcome: outcome(200),
                },
                DeliveryAttempt {
                    message_row: ids[1],
                    attempted_at: at(5),
                    outcome: outcome(410),
                },
            ],
            &[
                MessageUpdate {
                    id: ids[0],
                    status: MessageStatus::Delivered,
                    attempts: 2,
                    next_attempt_at: at(5),
                    delivered_at: Some(at(5)),
                },
                MessageUpdate {
                    id: ids[1],
                    status: MessageStatus::Failed,
                    attempts: 1,
                    next_attempt_at: at(5),
                    delivered_at: None,
                },
            ],
        )?)
    })
    .unwrap();
    let attempts = db.read(|tx| Ok(tx.webhook_attempts(ids[0])?)).unwrap();
    assert_eq!(
        attempts
            .iter()
            .map(|a| (a.attempted_at, a.outcome.status))
            .collect::<Vec<_>>(),
        [(at(4), Some(500)), (at(5), Some(200))],
        "oldest first"
    );
    assert_eq!(attempts[1].outcome.latency, Duration::from_millis(12));
    assert_eq!(attempts[1].outcome.response.as_deref(), Some("body"));
    // The last attempt of each message that has one, in one read.
    let mut last = db
        .read(|tx| Ok(tx.last_webhook_attempts(&[ids[0], ids[1], ids[2]])?))
        .unwrap();
    last.sort_by_key(|a| a.message_row);
    assert_eq!(
        last.iter()
            .map(|a| (a.message_row, a.attempted_at, a.outcome.status))
            .collect::<Vec<_>>(),
        [(ids[0], at(5), Some(200)), (ids[1], at(5), Some(410))]
    );
    let delivered = db
        .read(|tx| Ok(tx.webhook_message("msg_1")?))
        .unwrap()
        .unwrap();
    assert_eq!(
        (delivered.status, delivered.attempts, delivered.delivered_at),
        (MessageStatus::Delivered, 2, Some(at(5)))
    );
    let newest_first = db
        .read(|tx| Ok(tx.webhook_messages_of_endpoint(hook.id, 10)?))
        .unwrap();
    assert_eq!(
        newest_first.iter().map(|m| m.id).collect::<Vec<_>>(),
        [ids[1], ids[0]]
    );
    assert_eq!(
        db.read(|tx| Ok(tx.webhook_messages_of_endpoint(hook.id, 1)?))
            .unwrap()
            .len(),
        1
    );

    // The failed one, created at 2: requeued when created since 2, not since 3.
    assert_eq!(
        db.write(|tx| Ok(tx.requeue_failed_webhook_messages(hook.id, at(3), at(10))?))
            .unwrap(),
        0
    );
    assert_eq!(
        db.write(|tx| Ok(tx.requeue_failed_webhook_messages(hook.id, at(2), at(10))?))
            .unwrap(),
        1
    );
    let again = db
        .read(|tx| Ok(tx.webhook_message("msg_2")?))
        .unwrap()
        .unwrap();
    assert_eq!(
        (again.status, again.next_attempt_at),
        (MessageStatus::Pending, at(10))
    );
    db.write(|tx| Ok(tx.requeue_webhook_message(ids[0], at(11))?))
        .unwrap();
    let resent = db
        .read(|tx| Ok(tx.webhook_message("msg_1")?))
        .unwrap()
        .unwrap();
    assert_eq!(
        (
            resent.status,
            resent.next_attempt_at,
            resent.message_id.as_str()
        ),
        (MessageStatus::Pending, at(11), "msg_1")
    );
    assert_eq!(
        db.write(|tx| Ok(tx.end_pending_webhook_messages(
            hook.id,
            MessageStatus::Failed,
            at(12)
        )?))
        .unwrap(),
        2
    );
    assert_eq!(
        db.read(|tx| Ok(tx.webhook_queue_depth(at(100))?)).unwrap(),
        (1, 0)
    );
    // Deleting the other endpoint cancels its pending message.
    db.write(|tx| Ok(tx.delete_webhook_endpoint(other.id, at(13))?))
        .unwrap();
    let cancelled = db
        .read(|tx| Ok(tx.webhook_message("msg_3")?))
        .unwrap()
        .unwrap();
    assert_eq!(cancelled.status, MessageStatus::Cancelled);
    assert_eq!(
        db.read(|tx| Ok(tx.webhook_queue_depth(at(100))?)).unwrap(),
        (0, 0)
    );
}
every_database!(webhook_messages_are_claimed_attempted_and_requeued);

fn a_shops_messages_are_listed_by_topic_and_status_newest_first(db: &impl Database) {
    use mercer_domain::webhooks::console::MessageFilter;
    let shop = shop(db, "a.shop.test");
    let other_shop = crate::shop(db, "b.shop.test");
    let hook = endpoint(
        db,
        new_endpoint(shop.id, WebhookKind::Checkout, "order/processed", 0),
    );
    let elsewhere = endpoint(
        db,
        new_endpoint(other_shop.id, WebhookKind::Checkout, "order/processed", 0),
    );
    let mut created = message(shop.id, hook.id, 3, 3);
    created.topic = "order/created".into();
    let ids = db
        .write(|tx| {
            Ok(tx.insert_webhook_messages(&[
                message(shop.id, hook.id, 1, 1),
                message(other_shop.id, elsewhere.id, 2, 2),
                created,
                message(shop.id, hook.id, 4, 4),
            ])?)
        })
        .unwrap();
    db.write(|tx| {
        Ok(tx.record_webhook_attempts(
            &[],
            &[MessageUpdate {
                id: ids[0],
                status: MessageStatus::Failed,
                attempts: 1,
                next_attempt_at: at(5),
                delivered_at: None,
            }],
        )?)
    })
    .unwrap();
    let list = |filter: MessageFilter, before, limit| {
        db.read(|tx| Ok(tx.webhook_messages_of_shop(shop.id, &filter, before, limit)?))
            .unwrap()
            .into_iter()
            .map(|m| m.message_id)
            .collect::<Vec<_>>()
    };
    assert_eq!(
        list(MessageFilter::default(), None, 10),
        ["msg_4", "msg_3", "msg_1"]
    );
    assert_eq!(list(MessageFilter::default(), None, 2), ["msg_4", "msg_3"]);
    assert_eq!(list(MessageFilter::default(), Some(ids[2]), 2), ["msg_1"]);
    let topic = |topic: &str| MessageFilter {
        topic: Some(topic.into()),
        status: None,
    };
    assert_eq!(list(topic("order/processed"), None, 10), ["msg_4", "msg_1"]);
    assert_eq!(list(topic("order/created"), None, 10), ["msg_3"]);
    let failed = MessageFilter {
        topic: Some("order/processed".into()),
        status: Some(MessageStatus::Failed),
    };
    assert_eq!(list(failed, None, 10), ["msg_1"]);
    // The newest of the shop's messages created at or before a time (another shop's at 2 s
    // is not it).
    let row_at = |seconds| {
        db.read(|tx| Ok(tx.webhook_message_row_at(shop.id, at(seconds))?))
            .unwrap()
    };
    assert_eq!(row_at(2), Some(ids[0]));
    assert_eq!(row_at(3), Some(ids[2]));
    assert_eq!(row_at(0), None);
    // The overview's live count: the shop's messages in one status (other shops' left out).
    let count = |status| {
        db.read(|tx| Ok(tx.count_shop_webhook_messages(shop.id, status)?))
            .unwrap()
    };
    assert_eq!(count(MessageStatus::Pending), 2);
    assert_eq!(count(MessageStatus::Failed), 1);
    assert_eq!(count(MessageStatus::Delivered), 0);
}
every_database!(a_shops_messages_are_listed_by_topic_and_status_newest_first);
