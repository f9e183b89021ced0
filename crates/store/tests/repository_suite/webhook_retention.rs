//! Webhooks: the retention purge of finished messages' payloads and attempts.

use std::time::Duration;

use mercer_domain::access::credentials::Secret;
use mercer_domain::kernel::ids::MessageId;
use mercer_domain::kernel::jobs::RunToEnd;
use mercer_domain::ports::Database;
use mercer_domain::webhooks::retention::{Purged, purge_expired};
use mercer_domain::webhooks::{
    AttemptOutcome, DeliveryAttempt, MessageStatus, MessageUpdate, NewWebhookEndpoint,
    NewWebhookMessage, WebhookEndpoint, WebhookKind, WebhookMessage,
};
use serde_json::json;

use crate::{at, shop};

fn endpoint(db: &impl Database, shop: &mercer_domain::access::shop::Shop) -> WebhookEndpoint {
    let new = NewWebhookEndpoint {
        shop_id: shop.id,
        kind: WebhookKind::Subscription,
        topic: "subscription_created".into(),
        callback_url: "http://127.0.0.1:9/hook".into(),
        secret: Some(Secret::new("endpoint-secret")),
        created_at: at(0),
    };
    db.write(|tx| Ok(tx.insert_webhook_endpoint(&new)?))
        .unwrap()
}

fn enqueue(db: &impl Database, endpoint: &WebhookEndpoint, n: u32) -> MessageId {
    let new = NewWebhookMessage {
        message_id: format!("msg_retention_{n}"),
        shop_id: endpoint.shop_id,
        endpoint_id: endpoint.id,
        topic: endpoint.topic.clone(),
        payload: json!({"n": n}).to_string(),
        created_at: at(0),
        subject: None,
        request_id: None,
        trace_parent: None,
        throttled: false,
    };
    db.write(|tx| Ok(tx.insert_webhook_messages(std::slice::from_ref(&new))?))
        .unwrap()[0]
}

/// One attempt at `seconds` that leaves the message `status` (pending: due again an hour on).
fn attempt(db: &impl Database, id: MessageId, seconds: i64, status: MessageStatus) {
    let delivered = status == MessageStatus::Delivered;
    let attempt = DeliveryAttempt {
        message_row: id,
        attempted_at: at(seconds),
        outcome: AttemptOutcome {
            status: Some(if delivered { 200 } else { 500 }),
            ..AttemptOutcome::default()
        },
    };
    let next_attempt_at = if status == MessageStatus::Pending {
        at(seconds + 3600)
    } else {
        at(seconds)
    };
    let update = MessageUpdate {
        id,
        status,
        attempts: 1,
        next_attempt_at,
        delivered_at: delivered.then(|| at(seconds)),
    };
    db.write(|tx| Ok(tx.record_webhook_attempts(&[attempt], &[update])?))
        .unwrap();
}

fn read(db: &impl Database, n: u32) -> (WebhookMessage, usize) {
    db.read(|tx| {
        let message = tx.webhook_message(&format!("msg_retention_{n}"))?.unwrap();
        let attempts = tx.webhook_attempts(message.id)?.len();
        Ok((message, attempts))
    })
    .unwrap()
}

/// Messages finished before the period's start lose their payload and attempts, in batches of
/// the size asked, oldest finished first; their rows stay with their status. Messages finished
/// later, and pending ones however old, keep everything. A purged message is never sent again,
/// and purging again changes nothing.
fn the_purge_empties_only_messages_finished_before_the_period(db: &impl Database) {
    let shop = shop(db, "a.shop.test");
    let hook = endpoint(db, &shop);
    let ids: Vec<MessageId> = (1..=6).map(|n| enqueue(db, &hook, n)).collect();
    attempt(db, ids[0], 10, MessageStatus::Delivered);
    attempt(db, ids[1], 20, MessageStatus::Failed);
    attempt(db, ids[2], 100, MessageStatus::Delivered);
    attempt(db, ids[3], 5, MessageStatus::Pending);
    attempt(db, ids[4], 15, MessageStatus::Delivered);
    attempt(db, ids[5], 30, MessageStatus::Cancelled);

    // Five finished messages, four of them before at(50): two batches of two, then none.
    let purge = |limit| {
        db.write(|tx| Ok(tx.purge_webhook_messages(at(50), limit, at(200))?))
            .unwrap()
    };
    assert_eq!(purge(2), 2);
    // The oldest finished go first: messages 1 (at 10) and 5 (at 15).
    assert!(read(db, 1).0.purged_at.is_some() && read(db, 5).0.purged_at.is_some());
    assert!(read(db, 2).0.purged_at.is_none() && read(db, 6).0.purged_at.is_none());
    assert_eq!(purge(2), 2);
    assert_eq!(purge(2), 0, "nothing left before the period");

    for (n, status) in [
        (1, MessageStatus::Delivered),
        (2, MessageStatus::Failed),
        (5, MessageStatus::Delivered),
        (6, MessageStatus::Cancelled),
    ] {
        let (message, attempts) = read(db, n);
        assert_eq!(
            (
                message.status,
                message.purged_at,
                message.payload.as_str(),
                attempts
            ),
            (status, Some(at(200)), "", 0),
            "message {n}"
        );
        assert_eq!(message.attempts, 1, "its row keeps its count of attempts");
    }
    let (recent, attempts) = read(db, 3);
    assert_eq!(
        (recent.purged_at, recent.payload, attempts),
        (None, json!({"n": 3}).to_string(), 1)
    );
    let (pending, attempts) = read(db, 4);
    assert_eq!(
        (pending.status, pending.purged_at, attempts),
        (MessageStatus::Pending, None, 1)
    );

    // Purged messages are not queued again, one by one or failed ones together.
    db.write(|tx| {
        tx.requeue_webhook_message(ids[0], at(300))?;
        assert_eq!(
            tx.requeue_failed_webhook_messages(hook.id, at(0), at(300))?,
            0
        );
        Ok(())
    })
    .unwrap();
    assert_eq!(read(db, 1).0.status, MessageStatus::Delivered);
    assert_eq!(read(db, 2).0.status, MessageStatus::Failed);

    // The use case loops in batches until none is left; a pending message is never purged,
    // however long ago it was enqueued; and a second run finds nothing.
    let far = at(1_000_000);
    let day = Duration::from_secs(86_400);
    let run = purge_expired(db, far, day, 1, &RunToEnd).unwrap();
    assert_eq!(
        run,
        Purged {
            messages: 1,
            batches: 1,
            interrupted: false
        }
    );
    assert_eq!(read(db, 3).0.purged_at, Some(far));
    assert_eq!(read(db, 1).0.purged_at, Some(at(200)), "purged once");
    assert_eq!(read(db, 4).0.purged_at, None);
    assert_eq!(
        purge_expired(db, far, day, 1, &RunToEnd).unwrap(),
        Purged::default()
    );
}
every_database!(the_purge_empties_only_messages_finished_before_the_period);

/// More expired messages than a batch: the use case purges them all, one transaction a batch.
fn the_purge_goes_through_many_batches(db: &impl Database) {
    let shop = shop(db, "a.shop.test");
    let hook = endpoint(db, &shop);
    for n in 1..=7 {
        let id = enqueue(db, &hook, n);
        attempt(db, id, i64::from(n), MessageStatus::Delivered);
    }
    let run = purge_expired(
        db,
        at(86_400 + 100),
        Duration::from_secs(86_400),
        3,
        &RunToEnd,
    )
    .unwrap();
    assert_eq!((run.messages, run.batches), (7, 3));
    for n in 1..=7 {
        assert_eq!(read(db, n).1, 0);
    }
}
every_database!(the_purge_goes_through_many_batches);
