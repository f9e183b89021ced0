//! Per-endpoint throttling on both real databases: the send times the throttled claim hands
//! out, the everyday claim leaving throttled messages alone, and a limit set and cleared.

#![allow(clippy::unwrap_used)] // test code: a panic is a failed assertion

use std::time::Duration;

use mercer_domain::Timestamp;
use mercer_domain::access::credentials::Secret;
use mercer_domain::access::shop::{Shop, ShopInput, create_shop};
use mercer_domain::kernel::ids::MessageId;
use mercer_domain::ports::Database;
use mercer_domain::webhooks::{
    MessageStatus, NewWebhookEndpoint, Reservation, WebhookEndpoint, WebhookKind,
    enqueue_for_topic, reservation_slack_us,
};
use mercer_store::testing::TestDatabase;
use mercer_store::{Backend, Store, backend_tests};
use serde_json::json;

const TOPIC: &str = "subscription_created";

fn at_us(micros: i64) -> Timestamp {
    Timestamp::from_micros(1_700_000_000_000_000 + micros)
}

fn ms(millis: i64) -> Timestamp {
    at_us(millis * 1_000)
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
                ms(0),
            )
        })
        .unwrap()
}

fn endpoint(store: &Store, shop: &Shop, rate: Option<u32>) -> WebhookEndpoint {
    let new = NewWebhookEndpoint {
        shop_id: shop.id,
        kind: WebhookKind::Subscription,
        topic: TOPIC.into(),
        callback_url: "http://127.0.0.1:9/hook".into(),
        secret: Some(Secret::new("endpoint-secret")),
        created_at: ms(0),
    };
    let endpoint = store
        .write(|tx| Ok(tx.insert_webhook_endpoint(&new)?))
        .unwrap();
    set_rate(store, &endpoint, rate, ms(0));
    reread(store, &endpoint)
}

fn set_rate(store: &Store, endpoint: &WebhookEndpoint, rate: Option<u32>, now: Timestamp) {
    store
        .write(|tx| Ok(tx.set_webhook_rate_limit(endpoint.id, rate, now)?))
        .unwrap();
}

fn reread(store: &Store, endpoint: &WebhookEndpoint) -> WebhookEndpoint {
    store
        .read(|tx| Ok(tx.webhook_endpoints_by_ids(&[endpoint.id])?))
        .unwrap()
        .remove(0)
        .0
}

/// Enqueues `count` messages for every live endpoint of the topic (as a subscription change
/// does), created at `now`.
fn enqueue(store: &Store, shop: &Shop, count: usize, now: Timestamp) -> Vec<MessageId> {
    let payloads: Vec<serde_json::Value> = (0..count).map(|n| json!({ "n": n })).collect();
    store
        .write(|tx| {
            let mut ids = Vec::new();
            for payload in &payloads {
                ids.extend(enqueue_for_topic(
                    tx,
                    shop.id,
                    WebhookKind::Subscription,
                    TOPIC,
                    payload,
                    None,
                    now,
                )?);
            }
            Ok(ids)
        })
        .unwrap()
}

/// The throttled claim as the dispatcher makes it: throttles free within 50 ms, stretches of
/// at most `stretch_ms`.
fn claim_throttled(
    store: &Store,
    now: Timestamp,
    limit: usize,
    stretch_ms: u64,
) -> Vec<Reservation> {
    let ready_by = Timestamp::from_micros(now.as_micros() + 50_000);
    let stretch = Duration::from_millis(stretch_ms);
    let lease_until = now.plus_seconds(60);
    store
        .write(|tx| {
            Ok(tx.claim_throttled_webhook_messages(now, limit, ready_by, stretch, lease_until)?)
        })
        .unwrap()
}

fn claim_everyday(store: &Store, now: Timestamp) -> Vec<MessageId> {
    let mut ids: Vec<MessageId> = store
        .write_statement(|tx| Ok(tx.claim_webhook_messages(now, 100, now.plus_seconds(60))?))
        .unwrap()
        .into_iter()
        .map(|message| message.id)
        .collect();
    ids.sort_unstable();
    ids
}

/// Every send time a stretch allows: its messages, one interval apart from its first start.
fn nominal_starts(reservation: &Reservation) -> Vec<i64> {
    let interval = i64::try_from(reservation.interval.as_micros()).unwrap();
    (0..reservation.messages.len() as i64)
        .map(|k| reservation.first_start.as_micros() + k * interval)
        .collect()
}

/// Stretches one after another never come closer than an interval: each one's first start is
/// at least an interval after the latest start the one before allowed.
fn assert_apart(mut reservations: Vec<Reservation>, interval_us: i64) {
    reservations.sort_by_key(|reservation| reservation.first_start);
    for pair in reservations.windows(2) {
        let gap = pair[1].first_start.as_micros() - pair[0].last_start.as_micros();
        assert!(
            gap >= interval_us,
            "a stretch starts {gap} µs after the one before may still start: {:?} then {:?}",
            (pair[0].first_start, pair[0].last_start),
            (pair[1].first_start, pair[1].last_start)
        );
    }
}

fn two_claims_in_a_row_never_hand_out_send_times_closer_than_the_interval(backend: Backend) {
    let (_db, store) = TestDatabase::migrated(backend);
    let shop = shop(&store);
    let hook = endpoint(&store, &shop, Some(20));
    assert_eq!(hook.rate_limit_per_s, Some(20));
    let ids = enqueue(&store, &shop, 30, ms(0));
    let interval = 50_000;
    let slack = reservation_slack_us(interval);

    // 250 ms at 20/s: six send times, 50 ms apart, from now.
    let first = claim_throttled(&store, ms(10), 16, 250);
    assert_eq!(first.len(), 1);
    let stretch = &first[0];
    assert_eq!(stretch.endpoint_id, hook.id);
    assert_eq!(stretch.interval, Duration::from_micros(50_000));
    assert_eq!(stretch.first_start, ms(10));
    assert_eq!(stretch.messages.len(), 6);
    assert_eq!(stretch.last_start, at_us(10_000 + 5 * interval + slack));
    let taken: Vec<MessageId> = stretch.messages.iter().map(|m| m.id).collect();
    assert_eq!(taken, ids[..6], "the oldest due first, in order");

    // At once again, or before the next free time comes within 50 ms: nothing.
    assert!(claim_throttled(&store, ms(10), 16, 250).is_empty());
    assert!(claim_throttled(&store, ms(200), 16, 250).is_empty());
    // Then the next stretch starts an interval after the first one's latest start, as long
    // as the first.
    let second = claim_throttled(&store, ms(270), 16, 250);
    assert_eq!(second.len(), 1);
    assert_eq!(
        second[0].first_start.as_micros(),
        stretch.last_start.as_micros() + interval
    );
    assert_eq!(second[0].messages.len(), 6);
    // The limit caps a claim whatever the window allows.
    let third = claim_throttled(&store, ms(2_000), 2, 1_000);
    assert_eq!(third[0].messages.len(), 2);
    let mut all = first.clone();
    all.extend(second);
    all.extend(third);
    assert_apart(all.clone(), interval);
    let starts: Vec<i64> = all.iter().flat_map(nominal_starts).collect();
    for pair in starts.windows(2) {
        assert!(pair[1] - pair[0] >= interval, "{starts:?}");
    }
    // Nothing handed out twice, and nothing claimed without its send time.
    let mut handed: Vec<MessageId> = all
        .iter()
        .flat_map(|reservation| reservation.messages.iter().map(|m| m.id))
        .collect();
    let count = handed.len();
    handed.sort_unstable();
    handed.dedup();
    assert_eq!(handed.len(), count);
}

fn the_everyday_claim_leaves_throttled_messages_alone(backend: Backend) {
    let (_db, store) = TestDatabase::migrated(backend);
    let shop = shop(&store);
    let throttled = endpoint(&store, &shop, Some(5));
    let free = endpoint(&store, &shop, None);
    assert_eq!(free.rate_limit_per_s, None);
    let ids = enqueue(&store, &shop, 3, ms(0));
    let (to_throttled, to_free): (Vec<MessageId>, Vec<MessageId>) =
        ids.chunks(2).map(|pair| (pair[0], pair[1])).unzip();
    assert_eq!(
        store.read(|tx| Ok(tx.webhook_queue_depth(ms(1))?)).unwrap(),
        (6, 0),
        "both kinds are in the queue's depth"
    );
    assert_eq!(claim_everyday(&store, ms(1)), to_free);
    assert!(claim_everyday(&store, ms(2)).is_empty());
    let stretches = claim_throttled(&store, ms(3), 16, 1_000);
    assert_eq!(stretches.len(), 1);
    assert_eq!(stretches[0].endpoint_id, throttled.id);
    let taken: Vec<MessageId> = stretches[0].messages.iter().map(|m| m.id).collect();
    assert_eq!(taken, to_throttled, "5/s: all three fit in a second");
    let pending = store
        .read(|tx| Ok(tx.pending_webhook_messages(&[throttled.id, free.id])?))
        .unwrap();
    let mut pending = pending;
    pending.sort();
    assert_eq!(pending, [(throttled.id, 3), (free.id, 3)]);
}

fn clearing_the_limit_releases_waiting_messages_at_once(backend: Backend) {
    let (_db, store) = TestDatabase::migrated(backend);
    let shop = shop(&store);
    let hook = endpoint(&store, &shop, Some(1));
    let ids = enqueue(&store, &shop, 10, ms(0));
    // At 1/s one message goes now, the other nine wait.
    assert_eq!(claim_throttled(&store, ms(1), 16, 250)[0].messages.len(), 1);
    assert!(claim_everyday(&store, ms(2)).is_empty());
    set_rate(&store, &hook, None, ms(3));
    assert_eq!(reread(&store, &hook).rate_limit_per_s, None);
    assert_eq!(claim_everyday(&store, ms(4)), ids[1..], "all due at once");
    assert!(claim_throttled(&store, ms(5), 16, 250).is_empty());
    // Set again, it starts free: new messages are throttled from the first.
    set_rate(&store, &hook, Some(2), ms(6));
    let more = enqueue(&store, &shop, 2, ms(6));
    assert!(claim_everyday(&store, ms(7)).is_empty());
    let stretch = claim_throttled(&store, ms(7), 16, 1_000);
    assert_eq!(stretch[0].first_start, ms(7));
    assert_eq!(
        stretch[0].messages.iter().map(|m| m.id).collect::<Vec<_>>(),
        more
    );
}

fn a_message_put_back_is_as_it_was(backend: Backend) {
    let (_db, store) = TestDatabase::migrated(backend);
    let shop = shop(&store);
    endpoint(&store, &shop, Some(10));
    enqueue(&store, &shop, 2, ms(0));
    let stretch = claim_throttled(&store, ms(1), 16, 1_000).remove(0);
    let ids: Vec<MessageId> = stretch.messages.iter().map(|m| m.id).collect();
    store
        .write(|tx| Ok(tx.release_webhook_messages(&ids, ms(500))?))
        .unwrap();
    for message in &stretch.messages {
        let now = store
            .read(|tx| Ok(tx.webhook_message(&message.message_id)?))
            .unwrap()
            .unwrap();
        assert_eq!(
            (now.status, now.attempts, now.next_attempt_at),
            (MessageStatus::Pending, 0, ms(500))
        );
        assert!(
            store
                .read(|tx| Ok(tx.webhook_attempts(message.id)?))
                .unwrap()
                .is_empty()
        );
    }
    assert!(
        claim_throttled(&store, ms(499), 16, 1_000).is_empty(),
        "due again at 500 ms"
    );
    assert_eq!(
        claim_throttled(&store, ms(500), 16, 1_000)[0]
            .messages
            .len(),
        2
    );
}

/// A message marked throttled after its endpoint's limit was cleared (enqueued by a transaction
/// that read the endpoint before) is still claimed, and the cleared throttle's row goes once
/// it has nothing left and is old enough.
fn a_cleared_throttle_still_hands_out_stray_messages(backend: Backend) {
    let (_db, store) = TestDatabase::migrated(backend);
    let shop = shop(&store);
    let hook = endpoint(&store, &shop, Some(1));
    assert!(
        store
            .write(|tx| Ok(tx.webhook_throttle_upkeep(ms(0))?))
            .unwrap()
    );
    set_rate(&store, &hook, None, ms(10));
    // The message as such a transaction writes it: throttled.
    let mut stale = hook.clone();
    stale.rate_limit_per_s = Some(1);
    store
        .write(|tx| {
            mercer_domain::webhooks::enqueue_for_endpoint(tx, &stale, &json!({"n": 1}), ms(11))
        })
        .unwrap();
    assert!(claim_everyday(&store, ms(12)).is_empty());
    let stretch = claim_throttled(&store, ms(12), 16, 250);
    assert_eq!(stretch[0].messages.len(), 1);
    assert_eq!(stretch[0].interval, Duration::ZERO);
    let eleven_minutes = ms(11 * 60 * 1_000);
    // Still a throttle while its stray message is pending.
    assert!(
        store
            .write(|tx| Ok(tx.webhook_throttle_upkeep(eleven_minutes)?))
            .unwrap()
    );
    store
        .write(|tx| {
            Ok(tx.end_pending_webhook_messages(hook.id, MessageStatus::Cancelled, ms(13))?)
        })
        .unwrap();
    assert!(
        !store
            .write(|tx| Ok(tx.webhook_throttle_upkeep(eleven_minutes)?))
            .unwrap()
    );
}

/// Claimers racing (threads, each with its own connection, as processes are): the stretches
/// they get never overlap.
fn racing_claims_never_overlap(backend: Backend) {
    let (_db, store) = TestDatabase::migrated(backend);
    let shop = shop(&store);
    endpoint(&store, &shop, Some(100));
    enqueue(&store, &shop, 200, ms(0));
    let claimers: Vec<_> = (0..4)
        .map(|n| {
            let store = store.clone();
            std::thread::spawn(move || {
                let mut got = Vec::new();
                for round in 0..20 {
                    got.extend(claim_throttled(&store, ms(round * 50 + n), 8, 100));
                }
                got
            })
        })
        .collect();
    let all: Vec<Reservation> = claimers
        .into_iter()
        .flat_map(|claimer| claimer.join().unwrap())
        .collect();
    assert!(all.len() > 4, "{} stretches", all.len());
    assert_apart(all, 10_000);
}

backend_tests!(
    two_claims_in_a_row_never_hand_out_send_times_closer_than_the_interval,
    the_everyday_claim_leaves_throttled_messages_alone,
    clearing_the_limit_releases_waiting_messages_at_once,
    a_message_put_back_is_as_it_was,
    a_cleared_throttle_still_hands_out_stray_messages,
    racing_claims_never_overlap,
);
