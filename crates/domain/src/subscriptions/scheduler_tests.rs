//! The scheduler's use cases on the memory database, with a platform in memory behind the
//! connector port and a clock the tests move.

#![cfg(test)]

use std::sync::Mutex;

use serde_json::{Value, json};

use super::*;
use crate::access::shop::{ShopInput, ShopSettings, create_shop, update_shop_settings};
use crate::kernel::jobs::RunToEnd;
use crate::platform::destinations::DestinationSettings;
use crate::platform::resources::Order;
use crate::ports::Database;
use crate::subscriptions::cancellation::CancelRequest;
use crate::subscriptions::input::{
    NewSubscription, parse_payment_method_change, parse_subscription_update,
};
use crate::subscriptions::operations::{
    ActionRequest, create_subscription, get_subscription, take_subscription_action,
    update_subscription,
};
use crate::subscriptions::resources::ActorType;
use crate::testing::{MemoryDatabase, MemoryPlatform};
use crate::webhooks::{NewWebhookEndpoint, WebhookKind};

fn at(text: &str) -> Timestamp {
    Timestamp::parse_rfc3339(text).unwrap()
}

/// A clock the test sets.
struct TestClock(Mutex<Timestamp>);

impl TestClock {
    fn new(text: &str) -> TestClock {
        TestClock(Mutex::new(at(text)))
    }

    fn set(&self, text: &str) {
        *self.0.lock().unwrap() = at(text);
    }

    fn advance(&self, seconds: i64) {
        let mut now = self.0.lock().unwrap();
        *now = now.plus_seconds(seconds);
    }
}

impl Clock for TestClock {
    fn now(&self) -> Timestamp {
        *self.0.lock().unwrap()
    }
}

struct World {
    db: MemoryDatabase,
    platform: MemoryPlatform,
    clock: TestClock,
    shop: Shop,
}

const SHOP_ZONE: &str = "America/New_York";

impl World {
    /// A shop in New York with an orders destination and a webhook subscription per topic.
    fn new(now: &str) -> World {
        let db = MemoryDatabase::default();
        let clock = TestClock::new(now);
        let shop = db
            .write(|tx| {
                let shop = create_shop(
                    tx,
                    ShopInput {
                        shop_domain: "scheduler.shop.test".into(),
                        timezone: Some(SHOP_ZONE.into()),
                        ..ShopInput::default()
                    },
                    clock.now(),
                )?;
                tx.insert_destination(
                    shop.id,
                    &DestinationSettings {
                        topic: DestinationTopic::Orders,
                        url: "http://127.0.0.1:9".into(),
                        version: "v1".into(),
                        timeout_ms: 5000,
                    },
                    clock.now(),
                )?;
                for topic in crate::subscriptions::topics::webhook_topics() {
                    tx.insert_webhook_endpoint(&NewWebhookEndpoint {
                        shop_id: shop.id,
                        kind: WebhookKind::Subscription,
                        topic: topic.name.to_string(),
                        callback_url: "http://127.0.0.1:9/hook".into(),
                        secret: None,
                        created_at: clock.now(),
                    })?;
                }
                Ok(shop)
            })
            .unwrap();
        World {
            db,
            platform: MemoryPlatform::default(),
            clock,
            shop,
        }
    }

    fn settings(&mut self, settings: ShopSettings) {
        let now = self.clock.now();
        self.shop = self
            .db
            .write(|tx| update_shop_settings(tx, self.shop.identifier.as_str(), settings, now))
            .unwrap();
    }

    /// Creates a subscription from a body's `subscription` fields over a default one.
    fn create(&self, fields: Value) -> Subscription {
        let mut body = json!({
            "customer": {"email": "ada@example.test", "first_name": "Ada"},
            "subscription": {
                "order_rrule": "DTSTART;TZID=America/New_York:20260302T090000\nRRULE:FREQ=WEEKLY",
                "line_items": [{"platform_product_id": "p-1", "platform_variant_id": "v-1",
                                "quantity": 2, "price": 1250}],
                "shipping_address": {"street1": "1 Main St", "city": "New York", "country_code": "US"},
                "payment_details": {"gateway_name": "test", "gateway_payment_id": "tok_success"}
            }
        });
        for (name, value) in fields.as_object().unwrap() {
            body["subscription"][name] = value.clone();
        }
        let now = self.clock.now();
        let new = NewSubscription::parse(&body, &self.shop, now).unwrap();
        self.db
            .write(|tx| create_subscription(tx, &self.shop, new, api(), now))
            .unwrap()
            .0
    }

    fn get(&self, id: SubscriptionId) -> Subscription {
        self.db
            .read(|tx| get_subscription(tx, &self.shop, id, false))
            .unwrap()
    }

    fn tick(&self) -> SchedulerRun {
        run_scheduler(&self.db, &self.clock, &RunToEnd).unwrap()
    }

    /// Runs every due order job to its end, as the job runner would.
    fn place_due(&self) -> Vec<Placement> {
        let mut placements = Vec::new();
        loop {
            let now = self.clock.now();
            let jobs = self
                .db
                .write(|tx| {
                    Ok(tx.claim_jobs(&[OrderJob::KIND], "held", now, now.plus_seconds(30), 10)?)
                })
                .unwrap();
            if jobs.is_empty() {
                return placements;
            }
            for job in jobs {
                let payload: OrderJob = job.payload().unwrap();
                let control = Held {
                    job: job.id,
                    attempt: job.attempts,
                    failing: false,
                };
                placements.push(self.place_held(payload, &control).unwrap());
                // A run that wrote no outcome leaves its job to the runner to complete.
                if self.job_exists(job.id) {
                    self.db
                        .write(|tx| Ok(tx.complete_job(job.id, "held", None, now)?))
                        .unwrap();
                }
            }
        }
    }

    /// The topics sent so far, in order, with their payloads.
    fn messages(&self) -> Vec<(String, Value)> {
        self.db.with_state(|state| {
            let mut messages: Vec<_> = state.webhook_messages.iter().collect();
            messages.sort_by_key(|m| m.id);
            messages
                .iter()
                .map(|m| (m.topic.clone(), serde_json::from_str(&m.payload).unwrap()))
                .collect()
        })
    }

    fn topics_since(&self, from: usize) -> Vec<String> {
        self.messages()[from..]
            .iter()
            .map(|(topic, _)| topic.clone())
            .collect()
    }

    fn attempts(&self) -> Vec<SubscriptionOrder> {
        self.db
            .with_state(|state| state.subscription_orders.clone())
    }
}

fn api() -> Actor {
    Actor {
        kind: ActorType::Api,
        id: 1,
        name: "test".into(),
    }
}

#[test]
fn a_weekly_order_is_placed_on_time_three_times_across_the_change_to_summer_time() {
    // US clocks go forward on Sunday 8 March 2026: 09:00 in New York is 14:00Z before, 13:00Z
    // after.
    let w = World::new("2026-03-01T12:00:00Z");
    let s = w.create(json!({"subscription_status": "active"}));
    assert_eq!(s.next_order_datetime, Some(at("2026-03-02T14:00:00Z")));

    w.clock.set("2026-03-02T13:59:59Z");
    assert_eq!(w.tick().begun, 0, "not due a second early");
    let mut keys = Vec::new();
    for (due, next) in [
        ("2026-03-02T14:00:00Z", "2026-03-09T13:00:00Z"),
        ("2026-03-09T13:00:00Z", "2026-03-16T13:00:00Z"),
        ("2026-03-16T13:00:00Z", "2026-03-23T13:00:00Z"),
    ] {
        w.clock.set(due);
        let sent = w.messages().len();
        assert_eq!(w.tick().begun, 1, "due at {due}");
        assert_eq!(
            w.get(s.id).subscription_status,
            SubscriptionStatus::Processing
        );
        assert_eq!(w.topics_since(sent), ["subscription_upcoming_order"]);
        w.clock.advance(1);
        assert!(matches!(
            w.place_due()[..],
            [Placement::Placed {
                attempt: 1,
                lag_micros: 1_000_000
            }]
        ));
        let after = w.get(s.id);
        assert_eq!(after.subscription_status, SubscriptionStatus::Active);
        assert_eq!(after.next_order_datetime, Some(at(next)), "after {due}");
        assert_eq!(after.next_payment_datetime, Some(at(next)));
        assert_eq!(after.last_order_datetime, Some(at(due)));
        assert_eq!(after.latest_status_log.unwrap().reason, "order_placed");
        assert_eq!(
            w.topics_since(sent),
            [
                "subscription_upcoming_order",
                "subscription_order_created",
                "subscription_updated"
            ]
        );
        keys.push(w.attempts().last().unwrap().idempotency_key.clone());
    }
    assert_eq!(w.get(s.id).orders_processed, 3);
    assert_eq!(
        keys,
        [
            format!("{}:2026-03-02T14:00:00Z", s.id),
            format!("{}:2026-03-09T13:00:00Z", s.id),
            format!("{}:2026-03-16T13:00:00Z", s.id),
        ]
    );
    w.platform.state(|p| {
        assert_eq!(p.orders.len(), 3);
        assert_eq!(p.create_order_calls, keys);
        assert_eq!(p.get_order_calls, 0, "nothing to look up on a first run");
    });
    // 2 × 12.50 a week, paid with the subscription's method.
    let payments = w.platform.payments();
    assert_eq!(payments.len(), 3);
    assert_eq!(
        payments[0].amount_planned.as_ref().unwrap().as_str(),
        "25.00"
    );
    assert_eq!(payments[0].payment_method.as_deref(), Some("tok_success"));

    // The payload of subscription_order_created says which order.
    let (_, created) = w
        .messages()
        .into_iter()
        .rfind(|(topic, _)| topic == "subscription_order_created")
        .unwrap();
    assert_eq!(created["order"]["platform_order_id"], "ord-3");
    assert_eq!(created["order"]["order_datetime"], "2026-03-16T13:00:00Z");
    assert_eq!(created["order"]["total"], 2500);
    assert_eq!(created["order"]["status"], "placed");
    assert_eq!(created["data"]["orders_processed"], 3);
    assert_eq!(
        created["data"],
        serde_json::to_value(w.get(s.id)).unwrap(),
        "the payload is the subscription as a read gives it"
    );
    let (_, upcoming) = w
        .messages()
        .into_iter()
        .rfind(|(topic, _)| topic == "subscription_upcoming_order")
        .unwrap();
    assert_eq!(upcoming["data"]["subscription_status"], "processing");
    assert_eq!(
        upcoming["data"]["latest_status_log"]["reason"],
        "order_processing"
    );
}

#[test]
fn a_burst_of_due_orders_is_begun_in_waves() {
    let w = World::new("2026-03-01T12:00:00Z");
    let count = MAX_PLACING as usize + 5;
    for n in 0..count {
        w.db.write(|tx| {
            let body = json!({
                "customer": {"email": format!("c{n}@example.test")},
                "subscription": {
                    "subscription_status": "active",
                    "order_rrule": "DTSTART;TZID=America/New_York:20260302T090000\nRRULE:FREQ=WEEKLY",
                    "line_items": [{"platform_product_id": "p", "platform_variant_id": "v",
                                    "quantity": 1, "price": 100}],
                    "shipping_address": {"street1": "1 Main St", "city": "New York", "country_code": "US"},
                    "payment_details": {"gateway_name": "test", "gateway_payment_id": "tok_success"}
                }
            });
            let new = NewSubscription::parse(&body, &w.shop, w.clock.now())?;
            create_subscription(tx, &w.shop, new, api(), w.clock.now())
        })
        .unwrap();
    }
    w.clock.set("2026-03-02T14:00:00Z");
    let first = w.tick();
    assert_eq!((first.begun, first.more_due), (MAX_PLACING as usize, true));
    assert_eq!(w.tick().begun, 0, "no room while the first wave is placing");
    assert_eq!(w.place_due().len(), MAX_PLACING as usize);
    let second = w.tick();
    assert_eq!((second.begun, second.more_due), (5, false));
    w.place_due();
    let placed = w
        .attempts()
        .iter()
        .filter(|a| a.status == OrderAttemptStatus::Placed)
        .count();
    assert_eq!(placed, count);
}

#[test]
fn a_skipped_date_is_not_ordered() {
    let w = World::new("2026-03-01T12:00:00Z");
    let s = w.create(json!({}));
    let skipped =
        w.db.write(|tx| {
            take_subscription_action(
                tx,
                &w.shop,
                s.id,
                ActionRequest::Skip {
                    order_datetime: at("2026-03-02T12:00:00Z"),
                },
                api(),
                w.clock.now(),
            )
        })
        .unwrap();
    assert_eq!(
        skipped.next_order_datetime,
        Some(at("2026-03-09T13:00:00Z"))
    );
    w.clock.set("2026-03-02T14:00:01Z");
    assert_eq!(w.tick().begun, 0);
    assert!(w.place_due().is_empty());
    w.clock.set("2026-03-09T13:00:00Z");
    assert_eq!(w.tick().begun, 1);
    w.place_due();
    assert_eq!(
        w.attempts()
            .iter()
            .map(|a| a.scheduled_at)
            .collect::<Vec<_>>(),
        [at("2026-03-09T13:00:00Z")]
    );
}

#[test]
fn a_failing_order_is_retried_after_the_interval_until_the_maximum_then_the_subscription_ends() {
    let mut w = World::new("2026-03-01T12:00:00Z");
    w.settings(ShopSettings {
        order_retry_interval_seconds: Some(3_600),
        order_max_retries: Some(2),
        ..ShopSettings::default()
    });
    let s = w.create(json!({
        "payment_details": {"gateway_name": "test", "gateway_payment_id": "tok_decline"}
    }));
    w.clock.set("2026-03-02T14:00:00Z");
    w.tick();
    let sent = w.messages().len();
    assert!(matches!(
        w.place_due()[..],
        [Placement::Failed {
            attempt: 1,
            ended: false
        }]
    ));
    let failed = w.get(s.id);
    assert_eq!(failed.subscription_status, SubscriptionStatus::Active);
    assert_eq!(failed.current_retries, 1);
    assert_eq!(
        failed.last_failure_code.as_deref(),
        Some("payment_declined")
    );
    assert_eq!(
        failed.last_failure_reason.as_deref(),
        Some("the payment was declined")
    );
    assert!(
        failed
            .last_failure_details
            .unwrap()
            .message
            .contains("declined")
    );
    assert_eq!(
        failed.next_order_datetime,
        Some(at("2026-03-02T14:00:00Z")),
        "the order is still owed"
    );
    assert_eq!(
        failed.next_processing_datetime,
        Some(at("2026-03-02T15:00:00Z"))
    );
    assert_eq!(failed.latest_status_log.unwrap().reason, "order_failed");
    // The subscription's first transaction failed: subscription_payment_failed too.
    assert_eq!(
        w.topics_since(sent),
        [
            "subscription_order_transaction_failed",
            "subscription_payment_failed",
            "subscription_updated"
        ]
    );

    w.clock.set("2026-03-02T14:59:59Z");
    assert_eq!(w.tick().begun, 0, "the retry waits for the interval");
    w.clock.set("2026-03-02T15:00:00Z");
    let sent = w.messages().len();
    assert_eq!(w.tick().begun, 1);
    assert!(
        w.topics_since(sent).is_empty(),
        "a retry is not an upcoming order"
    );
    assert!(matches!(
        w.place_due()[..],
        [Placement::Failed {
            attempt: 2,
            ended: false
        }]
    ));
    assert_eq!(w.get(s.id).current_retries, 2);

    w.clock.set("2026-03-02T16:00:00Z");
    w.tick();
    let sent = w.messages().len();
    assert!(matches!(
        w.place_due()[..],
        [Placement::Failed {
            attempt: 3,
            ended: true
        }]
    ));
    let ended = w.get(s.id);
    assert_eq!(ended.subscription_status, SubscriptionStatus::Inactive);
    assert_eq!(ended.current_retries, 3);
    assert_eq!(ended.next_processing_datetime, None);
    assert_eq!(
        ended.latest_status_log.unwrap().reason,
        "max_retries_reached"
    );
    assert_eq!(
        w.topics_since(sent),
        [
            "subscription_order_transaction_failed",
            "subscription_payment_failed",
            "subscription_order_max_retries_reached",
            "subscription_updated"
        ]
    );
    let (_, last) = w.messages().pop().unwrap();
    assert_eq!(last["data"], serde_json::to_value(w.get(s.id)).unwrap());
    // One order of that date on the platform, paid three times in vain.
    w.platform.state(|p| {
        assert_eq!(p.orders.len(), 1);
        assert_eq!(
            p.create_order_calls.len(),
            1,
            "later attempts reuse the order"
        );
        assert_eq!(p.payment_calls, 3);
    });
    let keys: Vec<String> = w
        .platform
        .payments()
        .iter()
        .map(|p| {
            crate::platform::placement::payment_key(p)
                .unwrap()
                .to_string()
        })
        .collect();
    let key = idempotency_key(s.id, at("2026-03-02T14:00:00Z"));
    assert_eq!(
        keys,
        [format!("{key}#1"), format!("{key}#2"), format!("{key}#3")]
    );
    w.clock.set("2026-03-09T13:00:00Z");
    assert_eq!(w.tick().begun, 0, "an inactive subscription orders nothing");
}

#[test]
fn a_success_after_failures_resets_the_retries_and_a_new_method_is_tried_at_once() {
    let w = World::new("2026-03-01T12:00:00Z");
    let s = w.create(json!({}));
    w.platform.state(|p| p.failing_orders = 1);
    w.clock.set("2026-03-02T14:00:00Z");
    w.tick();
    assert!(matches!(
        w.place_due()[..],
        [Placement::Failed { attempt: 1, .. }]
    ));
    let failed = w.get(s.id);
    assert_eq!(
        failed.last_failure_code.as_deref(),
        Some("connector_failed")
    );
    assert_eq!(failed.current_retries, 1);
    // Paying with a new method ends the wait: the next run retries.
    let change = parse_payment_method_change(&json!({
        "payment_method_token": "tok_new", "payment_gateway_public_id": "test"
    }))
    .unwrap();
    w.clock.advance(60);
    w.db.write(|tx| {
        take_subscription_action(
            tx,
            &w.shop,
            s.id,
            ActionRequest::ChangePaymentMethod(change),
            api(),
            w.clock.now(),
        )
    })
    .unwrap();
    assert_eq!(w.get(s.id).next_processing_datetime, None);
    assert_eq!(w.tick().begun, 1);
    assert!(matches!(
        w.place_due()[..],
        [Placement::Placed { attempt: 2, .. }]
    ));
    let placed = w.get(s.id);
    assert_eq!(placed.current_retries, 0);
    assert_eq!(placed.orders_processed, 1);
    assert_eq!(placed.next_order_datetime, Some(at("2026-03-09T13:00:00Z")));
    assert_eq!(
        w.platform.payments()[0].payment_method.as_deref(),
        Some("tok_new")
    );
}

#[test]
fn a_run_claimed_again_after_a_crash_places_no_second_order_and_no_second_payment() {
    let w = World::new("2026-03-01T12:00:00Z");
    let s = w.create(json!({}));
    w.clock.set("2026-03-02T14:00:00Z");
    w.tick();
    let attempt = w.attempts()[0].clone();
    // The first run got its order created and its payment made, then its process died before
    // it wrote the outcome.
    let context = read_attempt(&w.db, &w.clock, attempt.id).unwrap().unwrap();
    let amounts = try_charge(&context.subscription).unwrap();
    let target = context.target.clone().unwrap();
    let order_id = placement::create_order(
        &w.platform,
        &target,
        &Order::default(),
        &attempt.idempotency_key,
    )
    .unwrap()
    .platform_id;
    w.db.write(|tx| Ok(tx.set_order_platform_id(attempt.id, &order_id, w.clock.now())?))
        .unwrap();
    let payment = platform_payment(
        &context.subscription,
        &amounts,
        &payment_key(&attempt.idempotency_key, 1),
    );
    placement::pay_once(&w.platform, &target, &order_id, &payment, None).unwrap();

    assert!(matches!(
        w.place_due()[..],
        [Placement::Placed { attempt: 1, .. }]
    ));
    w.platform.state(|p| {
        assert_eq!(p.orders.len(), 1);
        assert_eq!(
            p.create_order_calls.len(),
            1,
            "the stored order id was used"
        );
        assert_eq!(p.payment_calls, 1, "the payment was found, not made again");
        assert_eq!(p.get_order_calls, 1);
    });
    let finished = w.attempts()[0].clone();
    assert_eq!(finished.status, OrderAttemptStatus::Placed);
    assert_eq!(finished.platform_payment_id.as_deref(), Some("pay-1"));
    assert_eq!(w.get(s.id).orders_processed, 1);
}

#[test]
fn a_timed_out_create_order_is_retried_with_its_key_and_not_doubled() {
    let mut w = World::new("2026-03-01T12:00:00Z");
    w.settings(ShopSettings {
        order_retry_interval_seconds: Some(60),
        ..ShopSettings::default()
    });
    let s = w.create(json!({}));
    w.platform.state(|p| p.timing_out = true);
    w.clock.set("2026-03-02T14:00:00Z");
    w.tick();
    w.place_due();
    assert_eq!(
        w.get(s.id).last_failure_code.as_deref(),
        Some("connector_timeout")
    );
    w.platform.state(|p| p.timing_out = false);
    w.clock.advance(60);
    w.tick();
    assert!(matches!(
        w.place_due()[..],
        [Placement::Placed { attempt: 2, .. }]
    ));
    w.platform.state(|p| {
        assert_eq!(p.create_order_calls.len(), 2);
        assert_eq!(p.create_order_calls[0], p.create_order_calls[1]);
        assert_eq!(
            p.orders.len(),
            1,
            "the platform answered the key's first order"
        );
    });
}

#[test]
fn a_payment_charged_whose_answer_was_lost_is_found_by_the_retry_and_not_made_again() {
    let mut w = World::new("2026-03-01T12:00:00Z");
    w.settings(ShopSettings {
        order_retry_interval_seconds: Some(60),
        ..ShopSettings::default()
    });
    let s = w.create(json!({}));
    w.platform.state(|p| p.lost_payment_answers = 1);
    w.clock.set("2026-03-02T14:00:00Z");
    w.tick();
    assert!(matches!(
        w.place_due()[..],
        [Placement::Failed { attempt: 1, .. }]
    ));
    assert_eq!(
        w.get(s.id).last_failure_code.as_deref(),
        Some("connector_timeout")
    );
    w.clock.advance(60);
    w.tick();
    assert!(matches!(
        w.place_due()[..],
        [Placement::Placed { attempt: 2, .. }]
    ));
    w.platform.state(|p| {
        assert_eq!(
            p.payment_calls, 1,
            "the retry found the charge and paid nothing"
        );
        assert_eq!(p.orders[0].payments.as_ref().map(Vec::len), Some(1));
    });
    let placed = w.get(s.id);
    assert_eq!((placed.orders_processed, placed.current_retries), (1, 0));
    assert_eq!(
        w.attempts()[1].platform_payment_id.as_deref(),
        Some("pay-1"),
        "the retry answers with the payment made by the first attempt"
    );
}

#[test]
fn a_client_setting_current_retries_during_a_retry_wait_does_not_stop_the_scheduler() {
    let mut w = World::new("2026-03-01T12:00:00Z");
    w.settings(ShopSettings {
        order_retry_interval_seconds: Some(60),
        ..ShopSettings::default()
    });
    let s = w.create(json!({}));
    w.platform.state(|p| p.failing_orders = 1);
    w.clock.set("2026-03-02T14:00:00Z");
    w.tick();
    w.place_due();
    assert_eq!(w.get(s.id).current_retries, 1);
    let body = json!({"subscription": {"current_retries": 0}});
    let update = parse_subscription_update(&body, &w.shop).unwrap();
    w.db.write(|tx| update_subscription(tx, &w.shop, s.id, update, api(), w.clock.now()))
        .unwrap();
    assert_eq!(w.get(s.id).current_retries, 0);
    w.clock.advance(60);
    assert_eq!(w.tick().begun, 1, "the retry is begun");
    assert!(matches!(
        w.place_due()[..],
        [Placement::Placed { attempt: 2, .. }]
    ));
    let attempts: Vec<i64> = w.attempts().iter().map(|a| a.attempt).collect();
    assert_eq!(attempts, [1, 2], "numbered after the date's attempts");
}

#[test]
fn an_order_date_placed_already_is_passed_not_ordered_again() {
    let w = World::new("2026-03-01T12:00:00Z");
    let s = w.create(json!({}));
    w.clock.set("2026-03-02T14:00:00Z");
    w.tick();
    w.place_due();
    assert_eq!(w.get(s.id).orders_processed, 1);
    // A client gives the date just placed back as the next order date.
    w.clock.advance(60);
    let body = json!({"subscription": {"next_order_datetime": "2026-03-02T14:00:00Z"}});
    let update = parse_subscription_update(&body, &w.shop).unwrap();
    w.db.write(|tx| update_subscription(tx, &w.shop, s.id, update, api(), w.clock.now()))
        .unwrap();
    let from = w.messages().len();
    assert_eq!(w.tick().begun, 1);
    assert!(w.place_due().is_empty(), "no attempt begun");
    let passed = w.get(s.id);
    assert_eq!(passed.orders_processed, 1);
    assert_eq!(passed.subscription_status, SubscriptionStatus::Active);
    assert_eq!(passed.next_order_datetime, Some(at("2026-03-09T13:00:00Z")));
    assert_eq!(w.topics_since(from), ["subscription_updated"]);
    w.platform.state(|p| {
        assert_eq!(p.orders.len(), 1);
        assert_eq!(p.create_order_calls.len(), 1);
    });
}

#[test]
fn an_ended_rule_ends_the_subscription_after_its_last_order() {
    let w = World::new("2026-03-01T12:00:00Z");
    let s = w.create(json!({
        "order_rrule": "DTSTART;TZID=America/New_York:20260302T090000\nRRULE:FREQ=WEEKLY;COUNT=2"
    }));
    w.clock.set("2026-03-02T14:00:00Z");
    w.tick();
    w.place_due();
    assert_eq!(w.get(s.id).subscription_status, SubscriptionStatus::Active);
    w.clock.set("2026-03-09T13:00:00Z");
    w.tick();
    let sent = w.messages().len();
    w.place_due();
    let ended = w.get(s.id);
    assert_eq!(ended.subscription_status, SubscriptionStatus::Inactive);
    assert_eq!(ended.orders_processed, 2);
    assert_eq!(ended.next_order_datetime, None);
    assert_eq!(ended.latest_status_log.unwrap().reason, "completed");
    assert_eq!(
        w.topics_since(sent),
        [
            "subscription_order_created",
            "subscription_cancelled",
            "subscription_updated"
        ]
    );
    let logs: Vec<String> = w.db.with_state(|state| {
        state
            .status_logs
            .iter()
            .filter(|(_, log)| log.subscription_id == s.id)
            .map(|(_, log)| format!("{}:{}", log.reason, log.subscription_status))
            .collect()
    });
    assert_eq!(
        logs[logs.len() - 2..],
        ["order_placed:active", "completed:inactive"]
    );
}

#[test]
fn a_scheduled_subscription_starts_with_its_first_order() {
    let w = World::new("2026-02-20T12:00:00Z");
    let s = w.create(json!({}));
    assert_eq!(s.subscription_status, SubscriptionStatus::Scheduled);
    w.clock.set("2026-03-02T14:00:00Z");
    let sent = w.messages().len();
    let run = w.tick();
    assert_eq!((run.started, run.begun), (1, 1));
    assert_eq!(
        w.topics_since(sent),
        ["subscription_updated", "subscription_upcoming_order"]
    );
    w.place_due();
    let started = w.get(s.id);
    assert_eq!(started.subscription_status, SubscriptionStatus::Active);
    assert_eq!(started.orders_processed, 1);
    let reasons: Vec<String> = w.db.with_state(|state| {
        state
            .status_logs
            .iter()
            .map(|(_, log)| log.reason.clone())
            .collect()
    });
    assert_eq!(
        reasons,
        ["created", "started", "order_processing", "order_placed"]
    );
}

#[test]
fn a_processing_subscription_refuses_changes_until_its_order_is_placed() {
    let w = World::new("2026-03-01T12:00:00Z");
    let s = w.create(json!({}));
    w.clock.set("2026-03-02T14:00:00Z");
    w.tick();
    let cancel = w.db.write(|tx| {
        take_subscription_action(
            tx,
            &w.shop,
            s.id,
            ActionRequest::Cancel(CancelRequest::default()),
            api(),
            w.clock.now(),
        )
    });
    assert!(matches!(
        cancel,
        Err(DomainError::Unprocessable {
            code: "subscription.invalid_transition",
            ..
        })
    ));
    let update = crate::subscriptions::input::parse_subscription_update(
        &json!({"subscription": {"next_order_datetime": "2026-03-05T14:00:00Z"}}),
        &w.shop,
    )
    .unwrap();
    let moved =
        w.db.write(|tx| update_subscription(tx, &w.shop, s.id, update, api(), w.clock.now()));
    assert!(matches!(
        moved,
        Err(DomainError::Unprocessable {
            code: "subscription.invalid_transition",
            ..
        })
    ));
    w.place_due();
    let cancelled =
        w.db.write(|tx| {
            take_subscription_action(
                tx,
                &w.shop,
                s.id,
                ActionRequest::Cancel(CancelRequest::default()),
                api(),
                w.clock.now(),
            )
        })
        .unwrap();
    assert_eq!(cancelled.subscription_status, SubscriptionStatus::Inactive);
    assert_eq!(
        cancelled.orders_processed, 1,
        "the order in flight was placed"
    );
}

#[test]
fn a_prepaid_item_is_charged_once_a_period() {
    let w = World::new("2026-03-01T12:00:00Z");
    let s = w.create(json!({
        "line_items": [{"platform_product_id": "p-1", "platform_variant_id": "v-1",
                        "quantity": 1, "price": 1000,
                        "prepaid_metadata": {"prepaid_duration": 2}}]
    }));
    for due in [
        "2026-03-02T14:00:00Z",
        "2026-03-09T13:00:00Z",
        "2026-03-16T13:00:00Z",
    ] {
        w.clock.set(due);
        w.tick();
        w.place_due();
    }
    let counts = w.get(s.id).line_items[0]
        .prepaid_metadata
        .as_ref()
        .unwrap()
        .current_recurrence_count;
    assert_eq!(counts, 1, "the third order started a second period");
    // Two periods paid, each 2 × 10.00; the order inside the period charged nothing.
    let amounts: Vec<String> = w
        .platform
        .payments()
        .iter()
        .map(|p| p.amount_planned.as_ref().unwrap().as_str().to_string())
        .collect();
    assert_eq!(amounts, ["20.00", "20.00"]);
    assert_eq!(w.platform.state(|p| p.orders.len()), 3);
}

#[test]
fn an_expiring_payment_method_is_announced_once_per_method() {
    let mut w = World::new("2026-12-01T12:00:00Z");
    w.settings(ShopSettings {
        expiring_payment_notice_days: Some(30),
        ..ShopSettings::default()
    });
    let s = w.create(json!({
        "order_rrule": "DTSTART;TZID=America/New_York:20270104T090000\nRRULE:FREQ=MONTHLY",
        "payment_details": {"gateway_name": "test", "gateway_payment_id": "tok_success",
                            "expires_at": "2027-01"}
    }));
    assert_eq!(
        s.payment_method_expires_at,
        crate::subscriptions::resources::PaymentExpiry::parse("2027-01")
    );
    // It expires at 2027-02-01T00:00Z: announced from 2027-01-02T00:00Z.
    w.clock.set("2027-01-01T23:59:59Z");
    assert_eq!(w.tick().expiring, 0);
    w.clock.set("2027-01-02T00:00:00Z");
    let sent = w.messages().len();
    let run = w.tick();
    assert_eq!(run.expiring, 1);
    assert!(
        w.topics_since(sent)
            .contains(&"subscription_expiring_payment".to_string())
    );
    w.clock.advance(3600);
    assert_eq!(w.tick().expiring, 0, "once per method");
    // A new method that expires soon too is announced again.
    let change = parse_payment_method_change(&json!({
        "payment_method_token": "tok_2", "payment_gateway_public_id": "test",
        "expires_at": "2027-01"
    }))
    .unwrap();
    w.db.write(|tx| {
        take_subscription_action(
            tx,
            &w.shop,
            s.id,
            ActionRequest::ChangePaymentMethod(change),
            api(),
            w.clock.now(),
        )
    })
    .unwrap();
    assert_eq!(w.tick().expiring, 1);
    assert_eq!(w.tick().expiring, 0);
}

#[test]
fn an_attempt_whose_job_is_gone_gets_one_again() {
    let w = World::new("2026-03-01T12:00:00Z");
    let s = w.create(json!({}));
    w.clock.set("2026-03-02T14:00:00Z");
    w.tick();
    // An operator cancels the attempt's job.
    let job = w.db.with_state(|state| state.jobs[0].job.id);
    w.db.write(|tx| Ok(tx.cancel_jobs(&[job], w.clock.now())?))
        .unwrap();
    assert!(w.place_due().is_empty());
    w.clock.advance(STALLED_AFTER_SECONDS - 1);
    assert_eq!(w.tick().resumed, 0);
    w.clock.advance(2);
    assert_eq!(w.tick().resumed, 1);
    assert!(matches!(w.place_due()[..], [Placement::Placed { .. }]));
    assert_eq!(w.get(s.id).orders_processed, 1);
}

#[test]
fn a_shop_without_an_orders_destination_fails_the_order() {
    let w = World::new("2026-03-01T12:00:00Z");
    let s = w.create(json!({}));
    w.db.with_state(|state| state.destinations.clear());
    w.clock.set("2026-03-02T14:00:00Z");
    w.tick();
    w.place_due();
    let failed = w.get(s.id);
    assert_eq!(
        failed.last_failure_code.as_deref(),
        Some("no_orders_destination")
    );
    assert_eq!(failed.current_retries, 1);
    assert!(w.platform.state(|p| p.create_order_calls.is_empty()));
}

#[test]
fn the_due_report_says_why() {
    let mut w = World::new("2026-02-20T12:00:00Z");
    w.settings(ShopSettings {
        order_retry_interval_seconds: Some(3_600),
        ..ShopSettings::default()
    });
    let scheduled = w.create(json!({}));
    w.clock.set("2026-03-01T12:00:00Z");
    let declining = w.create(json!({
        "payment_details": {"gateway_name": "test", "gateway_payment_id": "tok_decline"}
    }));
    w.clock.set("2026-03-02T14:00:00Z");
    w.tick();
    w.place_due();
    // Both were due: the scheduled one started and was placed; the other waits for a retry.
    let report =
        w.db.read(|tx| due_report(tx, &w.shop, w.clock.now(), 10))
            .unwrap();
    assert_eq!(report.len(), 1);
    assert_eq!(report[0].subscription_id, declining.id);
    assert_eq!(
        report[0].reason,
        DueReason::WaitingRetry {
            attempt: 2,
            retry_at: at("2026-03-02T15:00:00Z"),
            failure_code: Some("payment_declined".into()),
        }
    );
    assert_eq!(
        report[0].local_order_time.as_deref(),
        Some("2026-03-02 09:00 America/New_York")
    );
    // Looking ahead to the next week: the placed one is due again, the other's retry too.
    let ahead =
        w.db.read(|tx| due_report(tx, &w.shop, at("2026-03-09T13:00:00Z"), 10))
            .unwrap();
    let reasons: Vec<(SubscriptionId, DueReason)> = ahead
        .into_iter()
        .map(|e| (e.subscription_id, e.reason))
        .collect();
    assert_eq!(
        reasons,
        [
            (declining.id, DueReason::Due { attempt: 2 }),
            (scheduled.id, DueReason::Due { attempt: 1 }),
        ]
    );
    w.clock.set("2026-03-02T15:00:00Z");
    w.tick();
    let placing =
        w.db.read(|tx| due_report(tx, &w.shop, w.clock.now(), 10))
            .unwrap();
    assert!(matches!(
        placing[0].reason,
        DueReason::Placing { attempt: 2, .. }
    ));
}

// --- pause until a date ---------------------------------------------------------------------

fn pause_until(w: &World, id: SubscriptionId, day: &str) -> Result<Subscription, DomainError> {
    let pause = crate::subscriptions::pausing::parse_pause(&json!({ "resume_on": day }))?;
    w.db.write(|tx| {
        take_subscription_action(
            tx,
            &w.shop,
            id,
            ActionRequest::Pause(pause),
            api(),
            w.clock.now(),
        )
    })
}

fn act_now(w: &World, id: SubscriptionId, request: ActionRequest) -> Subscription {
    w.db.write(|tx| take_subscription_action(tx, &w.shop, id, request, api(), w.clock.now()))
        .unwrap()
}

fn reasons_of(w: &World, id: SubscriptionId) -> Vec<String> {
    w.db.with_state(|state| {
        state
            .status_logs
            .iter()
            .filter(|(_, log)| log.subscription_id == id)
            .map(|(_, log)| log.reason.clone())
            .collect()
    })
}

#[test]
fn a_pause_until_a_date_ends_once_that_day_begins_in_the_shops_zone() {
    // 22:00 on 1 March in New York, already 2 March in UTC.
    let w = World::new("2026-03-02T03:00:00Z");
    let s = w.create(json!({"subscription_status": "active"}));
    // Today in the shop's zone is refused, even though it is yesterday in UTC.
    match pause_until(&w, s.id, "2026-03-01") {
        Err(DomainError::Invalid(problems)) => {
            assert_eq!(
                (problems[0].field.as_str(), problems[0].code),
                ("resume_on", "out_of_range")
            );
        }
        other => panic!("expected 422, got {other:?}"),
    }
    assert_eq!(w.get(s.id).subscription_status, SubscriptionStatus::Active);
    // Tomorrow in the shop's zone is taken, though it is today in UTC.
    let paused = pause_until(&w, s.id, "2026-03-02").unwrap();
    assert_eq!(
        paused.resume_on.map(|d| d.to_string()).as_deref(),
        Some("2026-03-02")
    );
    act_now(&w, s.id, ActionRequest::Resume);

    let paused = pause_until(&w, s.id, "2026-03-10").unwrap();
    assert_eq!(paused.subscription_status, SubscriptionStatus::Paused);
    let sent = w.messages().len();
    // New York is on summer time from 8 March: 10 March begins at 04:00Z.
    w.clock.set("2026-03-10T03:59:59Z");
    let run = w.tick();
    assert_eq!((run.auto_resumed, run.begun), (0, 0));
    assert_eq!(w.get(s.id).subscription_status, SubscriptionStatus::Paused);

    w.clock.set("2026-03-10T04:00:00Z");
    // `mercer subscriptions due` and the console say it comes back.
    let report =
        w.db.read(|tx| due_report(tx, &w.shop, w.clock.now(), 10))
            .unwrap();
    assert_eq!(report[0].subscription_id, s.id);
    assert_eq!(
        report[0].reason.describe(),
        "resumes: paused until 2026-03-10 (began 2026-03-10T04:00:00Z); it becomes active again"
    );
    assert_eq!(w.tick().auto_resumed, 1);
    let resumed = w.get(s.id);
    assert_eq!(resumed.subscription_status, SubscriptionStatus::Active);
    assert_eq!(
        resumed.resume_on, None,
        "the date is dropped with the pause"
    );
    // As Resume has it: the next order date still to come.
    assert_eq!(
        resumed.next_order_datetime,
        Some(at("2026-03-16T13:00:00Z"))
    );
    let log = resumed.latest_status_log.unwrap();
    assert_eq!(log.reason, "resumed");
    assert_eq!(log.metadata.user, Actor::system());
    assert_eq!(
        w.topics_since(sent),
        [
            "subscription_resumed",
            "subscription_frequency_updated",
            "subscription_updated"
        ]
    );

    // Exactly once: later runs find nothing to resume.
    w.clock.set("2026-03-10T05:00:00Z");
    assert_eq!(w.tick().auto_resumed, 0);
    assert_eq!(w.topics_since(sent).len(), 3);
    let resumes = reasons_of(&w, s.id)
        .into_iter()
        .filter(|reason| reason == "resumed")
        .count();
    assert_eq!(resumes, 2, "the manual resume and the automatic one");
}

#[test]
fn a_manual_resume_or_cancel_drops_the_date() {
    let w = World::new("2026-03-01T12:00:00Z");
    let s = w.create(json!({"subscription_status": "active"}));
    pause_until(&w, s.id, "2026-03-10").unwrap();
    let resumed = act_now(&w, s.id, ActionRequest::Resume);
    assert_eq!(resumed.resume_on, None);
    pause_until(&w, s.id, "2026-03-20").unwrap();
    let cancelled = act_now(&w, s.id, ActionRequest::Cancel(CancelRequest::default()));
    assert_eq!(cancelled.resume_on, None);
    w.clock.set("2026-03-21T12:00:00Z");
    let sent = w.messages().len();
    assert_eq!(w.tick().auto_resumed, 0);
    assert_eq!(
        w.get(s.id).subscription_status,
        SubscriptionStatus::Inactive
    );
    assert!(w.topics_since(sent).is_empty());
    // A status change through Update Subscription drops it too.
    let reactivated = act_now(&w, s.id, ActionRequest::Reactivate);
    assert_eq!(reactivated.subscription_status, SubscriptionStatus::Active);
    pause_until(&w, s.id, "2026-03-30").unwrap();
    let update = crate::subscriptions::input::parse_subscription_update(
        &json!({"subscription": {"subscription_status": "active"}}),
        &w.shop,
    )
    .unwrap();
    let updated =
        w.db.write(|tx| update_subscription(tx, &w.shop, s.id, update, api(), w.clock.now()))
            .unwrap();
    assert_eq!(updated.resume_on, None);
}

#[test]
fn a_resume_the_rule_refuses_leaves_the_subscription_paused_without_its_date() {
    let w = World::new("2026-03-01T12:00:00Z");
    let s = w.create(json!({
        "subscription_status": "active",
        "order_rrule": "DTSTART;TZID=America/New_York:20260302T090000\nRRULE:FREQ=WEEKLY;COUNT=2"
    }));
    pause_until(&w, s.id, "2026-03-10").unwrap();
    w.clock.set("2026-03-10T12:00:00Z");
    let sent = w.messages().len();
    assert_eq!(w.tick().auto_resumed, 0);
    let after = w.get(s.id);
    assert_eq!(after.subscription_status, SubscriptionStatus::Paused);
    assert_eq!(after.resume_on, None, "not tried again at every run");
    assert!(w.topics_since(sent).is_empty());
    assert_eq!(
        w.db.read(|tx| Ok(tx.due_resumptions(None, w.clock.now(), 10)?))
            .unwrap(),
        []
    );
}

// --- dunning policy -------------------------------------------------------------------------

fn set_policy(w: &World, intervals: &[i64], at_max_retries: &str) {
    let policy = crate::subscriptions::dunning::parse_dunning(&json!({"dunning": {
        "retry_intervals_s": intervals, "at_max_retries": at_max_retries
    }}))
    .unwrap();
    w.db.write(|tx| {
        crate::subscriptions::dunning::set_dunning_policy(tx, &w.shop, policy, w.clock.now())
    })
    .unwrap();
}

/// A declining subscription whose first order (2 March, 09:00 in New York) has failed once;
/// the clock at that failure.
fn failed_once(w: &World) -> Subscription {
    let s = w.create(json!({
        "payment_details": {"gateway_name": "test", "gateway_payment_id": "tok_decline"}
    }));
    w.clock.set("2026-03-02T14:00:00Z");
    assert_eq!(w.tick().begun, 1);
    assert!(matches!(
        w.place_due()[..],
        [Placement::Failed {
            attempt: 1,
            ended: false
        }]
    ));
    w.get(s.id)
}

/// Runs the scheduler at `time` and places what is due.
fn retry_at(w: &World, time: &str) -> Vec<Placement> {
    w.clock.set(time);
    w.tick();
    w.place_due()
}

/// The entries `reason (actor)` of the subscription's status log, oldest first.
fn log_of(w: &World, id: SubscriptionId) -> Vec<String> {
    w.db.with_state(|state| {
        state
            .status_logs
            .iter()
            .filter(|(_, log)| log.subscription_id == id)
            .map(|(_, log)| {
                format!(
                    "{} {} {}",
                    log.reason,
                    log.subscription_status,
                    serde_json::to_value(log.metadata.user.kind).unwrap()
                )
            })
            .collect()
    })
}

#[test]
fn the_retries_wait_each_interval_of_the_policy_in_turn_then_the_subscription_is_cancelled() {
    let mut w = World::new("2026-03-01T12:00:00Z");
    // Old settings that would allow three retries an hour apart: the policy overrides them.
    w.settings(ShopSettings {
        order_retry_interval_seconds: Some(3_600),
        ..ShopSettings::default()
    });
    set_policy(&w, &[60, 600], "cancel");
    let s = failed_once(&w);
    assert_eq!(
        s.next_processing_datetime,
        Some(at("2026-03-02T14:01:00Z")),
        "the first wait"
    );
    // `mercer subscriptions due` says which retry comes, of how many, and what follows.
    let report =
        w.db.read(|tx| due_report(tx, &w.shop, w.clock.now(), 10))
            .unwrap();
    assert_eq!(
        report[0].describe(),
        "waiting: retry 1 at 2026-03-02T14:01:00Z after payment_declined (retry 1 of 2; after \
         the last, the subscription is cancelled)"
    );
    assert!(
        retry_at(&w, "2026-03-02T14:00:59Z").is_empty(),
        "not before"
    );
    assert!(matches!(
        retry_at(&w, "2026-03-02T14:01:00Z")[..],
        [Placement::Failed {
            attempt: 2,
            ended: false
        }]
    ));
    let second = w.get(s.id);
    assert_eq!(second.current_retries, 2);
    assert_eq!(
        second.next_processing_datetime,
        Some(at("2026-03-02T14:11:00Z")),
        "the second wait"
    );
    assert!(retry_at(&w, "2026-03-02T14:10:59Z").is_empty());
    let sent = w.messages().len();
    assert!(matches!(
        retry_at(&w, "2026-03-02T14:11:00Z")[..],
        [Placement::Failed {
            attempt: 3,
            ended: true
        }]
    ));
    let ended = w.get(s.id);
    assert_eq!(ended.subscription_status, SubscriptionStatus::Inactive);
    assert_eq!(ended.next_processing_datetime, None);
    assert_eq!(ended.current_retries, 3);
    assert_eq!(
        log_of(&w, s.id)[2..],
        [
            "order_processing processing \"system\"",
            "order_failed active \"system\"",
            "order_processing processing \"system\"",
            "order_failed active \"system\"",
            "order_processing processing \"system\"",
            "max_retries_reached inactive \"system\""
        ]
    );
    assert_eq!(
        w.topics_since(sent),
        [
            "subscription_order_transaction_failed",
            "subscription_payment_failed",
            "subscription_order_max_retries_reached",
            "subscription_updated"
        ]
    );
    // Nothing more is tried.
    assert!(retry_at(&w, "2026-03-09T13:00:00Z").is_empty());
}

#[test]
fn at_max_retries_pause_pauses_the_subscription_by_the_system() {
    let w = World::new("2026-03-01T12:00:00Z");
    set_policy(&w, &[60], "pause");
    let s = failed_once(&w);
    let sent = w.messages().len();
    assert!(matches!(
        retry_at(&w, "2026-03-02T14:01:00Z")[..],
        [Placement::Failed {
            attempt: 2,
            ended: true
        }]
    ));
    let paused = w.get(s.id);
    assert_eq!(paused.subscription_status, SubscriptionStatus::Paused);
    assert_eq!(paused.current_retries, 0, "a resume starts afresh");
    assert_eq!(paused.next_processing_datetime, None);
    assert_eq!(
        paused.last_failure_code.as_deref(),
        Some("payment_declined")
    );
    let latest = paused.latest_status_log.unwrap();
    assert_eq!(latest.reason, "paused");
    assert_eq!(latest.metadata.user.kind, ActorType::System);
    assert_eq!(
        log_of(&w, s.id)[4..],
        [
            "order_processing processing \"system\"",
            "order_failed active \"system\"",
            "paused paused \"system\""
        ]
    );
    assert_eq!(
        w.topics_since(sent),
        [
            "subscription_order_transaction_failed",
            "subscription_payment_failed",
            "subscription_order_max_retries_reached",
            "subscription_paused",
            "subscription_updated"
        ]
    );
    let messages = w.messages();
    let (_, reached) = messages
        .iter()
        .find(|(topic, _)| topic == "subscription_order_max_retries_reached")
        .unwrap();
    assert_eq!(reached["data"]["subscription_status"], "paused");
    assert_eq!(reached["order"]["attempt"], 2);
    // Paused: no order is placed, at the next date either.
    assert!(retry_at(&w, "2026-03-09T13:00:00Z").is_empty());
    assert_eq!(w.get(s.id).subscription_status, SubscriptionStatus::Paused);
    // Resumed, it starts afresh at its next date.
    let resumed = act_now(&w, s.id, ActionRequest::Resume);
    assert_eq!(
        resumed.next_order_datetime,
        Some(at("2026-03-16T13:00:00Z"))
    );
    assert_eq!(resumed.current_retries, 0);
}

#[test]
fn at_max_retries_skip_order_gives_the_order_up_and_schedules_the_next() {
    let w = World::new("2026-03-01T12:00:00Z");
    set_policy(&w, &[60, 60], "skip_order");
    let s = failed_once(&w);
    retry_at(&w, "2026-03-02T14:01:00Z");
    let sent = w.messages().len();
    assert!(matches!(
        retry_at(&w, "2026-03-02T14:02:00Z")[..],
        [Placement::Failed {
            attempt: 3,
            ended: true
        }]
    ));
    let skipped = w.get(s.id);
    assert_eq!(skipped.subscription_status, SubscriptionStatus::Active);
    assert_eq!(skipped.current_retries, 0);
    assert_eq!(skipped.next_processing_datetime, None);
    assert_eq!(
        skipped.next_order_datetime,
        Some(at("2026-03-09T13:00:00Z")),
        "the rule's next date"
    );
    assert_eq!(skipped.next_payment_datetime, skipped.next_order_datetime);
    assert_eq!(skipped.orders_processed, 0);
    assert_eq!(
        log_of(&w, s.id)[6..],
        [
            "order_processing processing \"system\"",
            "order_failed active \"system\"",
            "order_skipped active \"system\""
        ]
    );
    assert_eq!(
        w.topics_since(sent),
        [
            "subscription_order_transaction_failed",
            "subscription_payment_failed",
            "subscription_order_max_retries_reached",
            "subscription_skipped",
            "subscription_updated"
        ]
    );
    // The next date is an order of its own: attempt 1, with a full set of retries.
    let sent = w.messages().len();
    assert!(matches!(
        retry_at(&w, "2026-03-09T13:00:00Z")[..],
        [Placement::Failed {
            attempt: 1,
            ended: false
        }]
    ));
    assert_eq!(w.topics_since(sent)[0], "subscription_upcoming_order");
    assert_eq!(w.get(s.id).current_retries, 1);
}

#[test]
fn skip_order_on_the_rules_last_date_completes_the_subscription() {
    let w = World::new("2026-03-01T12:00:00Z");
    set_policy(&w, &[], "skip_order");
    let s = w.create(json!({
        // Its first date is past: 2 March is its last.
        "order_rrule": "DTSTART;TZID=America/New_York:20260223T090000\nRRULE:FREQ=WEEKLY;COUNT=2",
        "payment_details": {"gateway_name": "test", "gateway_payment_id": "tok_decline"}
    }));
    let sent = w.messages().len();
    assert!(matches!(
        retry_at(&w, "2026-03-02T14:00:00Z")[..],
        [Placement::Failed {
            attempt: 1,
            ended: true
        }]
    ));
    let ended = w.get(s.id);
    assert_eq!(ended.subscription_status, SubscriptionStatus::Inactive);
    assert_eq!(ended.next_order_datetime, None);
    assert_eq!(ended.latest_status_log.unwrap().reason, "completed");
    assert_eq!(
        w.topics_since(sent),
        [
            "subscription_upcoming_order",
            "subscription_order_transaction_failed",
            "subscription_payment_failed",
            "subscription_order_max_retries_reached",
            "subscription_skipped",
            "subscription_cancelled",
            "subscription_updated"
        ]
    );
}

#[test]
fn a_shop_without_a_policy_follows_its_retry_settings() {
    let mut w = World::new("2026-03-01T12:00:00Z");
    w.settings(ShopSettings {
        order_retry_interval_seconds: Some(120),
        order_max_retries: Some(1),
        ..ShopSettings::default()
    });
    let s = failed_once(&w);
    assert_eq!(s.next_processing_datetime, Some(at("2026-03-02T14:02:00Z")));
    assert!(matches!(
        retry_at(&w, "2026-03-02T14:02:00Z")[..],
        [Placement::Failed {
            attempt: 2,
            ended: true
        }]
    ));
    assert_eq!(
        w.get(s.id).subscription_status,
        SubscriptionStatus::Inactive
    );
    assert_eq!(
        w.get(s.id).latest_status_log.unwrap().reason,
        "max_retries_reached"
    );
}

// --- the outcome's transaction: the order, the outcome and the job's end, committed together --

/// A job runner's control as the runner gives it: which run of its job this is, and the job's
/// completion in the outcome's transaction (which fails when `failing`, as a commit would).
struct Held {
    job: crate::kernel::ids::JobId,
    attempt: i64,
    failing: bool,
}

impl JobControl for Held {
    fn should_stop(&self) -> bool {
        false
    }

    fn attempt(&self) -> Option<i64> {
        Some(self.attempt)
    }

    fn complete_in(
        &self,
        tx: &mut dyn crate::kernel::jobs::JobRepository,
        now: Timestamp,
    ) -> crate::kernel::error::StoreResult<()> {
        if self.failing {
            return Err(StorageError::other("the outcome's commit failed"));
        }
        assert!(tx.complete_job(self.job, "held", None, now)?);
        Ok(())
    }
}

impl World {
    /// Claims the one due order job as worker `held`, as a runner would.
    fn claim_order_job(&self) -> (crate::kernel::jobs::Job, OrderJob) {
        let now = self.clock.now();
        let mut jobs = self
            .db
            .write(|tx| {
                Ok(tx.claim_jobs(&[OrderJob::KIND], "held", now, now.plus_seconds(30), 1)?)
            })
            .unwrap();
        let job = jobs.pop().expect("an order job is due");
        let payload = job.payload().unwrap();
        (job, payload)
    }

    fn place_held(&self, payload: OrderJob, control: &Held) -> Result<Placement, JobFailure> {
        place_order(
            &self.db,
            &self.platform,
            &self.clock,
            &AsSubscribed,
            payload,
            control,
        )
    }

    fn job_exists(&self, id: crate::kernel::ids::JobId) -> bool {
        self.db.read(|tx| Ok(tx.job(id)?)).unwrap().is_some()
    }
}

#[test]
fn a_first_run_writes_the_order_its_outcome_and_its_jobs_end_in_one_transaction() {
    let w = World::new("2026-03-01T12:00:00Z");
    let s = w.create(json!({}));
    w.clock.set("2026-03-02T14:00:00Z");
    w.tick();
    let (job, payload) = w.claim_order_job();
    let placed = w.place_held(
        payload,
        &Held {
            job: job.id,
            attempt: 1,
            failing: false,
        },
    );
    assert!(matches!(placed, Ok(Placement::Placed { attempt: 1, .. })));
    assert!(
        !w.job_exists(job.id),
        "the outcome's transaction ended the job"
    );
    let attempt = w.attempts()[0].clone();
    assert_eq!(attempt.status, OrderAttemptStatus::Placed);
    assert_eq!(attempt.platform_order_id.as_deref(), Some("ord-1"));
    assert_eq!(attempt.platform_payment_id.as_deref(), Some("pay-1"));
    assert_eq!(w.get(s.id).orders_processed, 1);
    w.platform.state(|p| {
        assert_eq!(
            (
                p.create_order_calls.len(),
                p.get_order_calls,
                p.payment_calls
            ),
            (1, 0, 1),
            "a first run looks for no earlier payment"
        );
    });
}

/// The outcome's transaction fails after Create Order and Create Payment went through (a crash
/// before its commit): nothing of it is left, not the order id, not the job's end, so the job
/// runs again; that run, not the first, finds the order by its key and the payment on it.
#[test]
fn a_first_run_lost_before_its_outcome_is_placed_by_the_next_run_without_a_second_payment() {
    let w = World::new("2026-03-01T12:00:00Z");
    let s = w.create(json!({}));
    w.clock.set("2026-03-02T14:00:00Z");
    w.tick();
    let (job, payload) = w.claim_order_job();
    let sent = w.messages().len();
    let failing = Held {
        job: job.id,
        attempt: 1,
        failing: true,
    };
    assert!(w.place_held(payload, &failing).is_err());
    let attempt = w.attempts()[0].clone();
    assert_eq!(attempt.status, OrderAttemptStatus::Placing);
    assert_eq!(
        attempt.platform_order_id, None,
        "nothing written before the outcome"
    );
    assert!(
        w.job_exists(job.id),
        "the job's end was rolled back with the outcome"
    );
    assert_eq!(
        w.get(s.id).subscription_status,
        SubscriptionStatus::Processing
    );
    assert_eq!(w.messages().len(), sent, "no webhook of the lost outcome");

    let next = Held {
        job: job.id,
        attempt: 2,
        failing: false,
    };
    assert!(matches!(
        w.place_held(payload, &next),
        Ok(Placement::Placed { attempt: 1, .. })
    ));
    w.platform.state(|p| {
        assert_eq!(p.orders.len(), 1, "the key's first order answered again");
        assert_eq!(p.create_order_calls.len(), 2);
        assert_eq!(
            p.get_order_calls, 1,
            "the second run looked for the payment"
        );
        assert_eq!(p.payment_calls, 1, "and found it: nothing charged twice");
    });
    assert_eq!(
        w.attempts()[0].platform_payment_id.as_deref(),
        Some("pay-1")
    );
    assert!(!w.job_exists(job.id));
}

/// A job given again to an attempt whose job was gone may follow runs that paid: even its
/// first run looks for their payment.
#[test]
fn a_resumed_attempts_first_run_looks_for_an_earlier_payment() {
    let w = World::new("2026-03-01T12:00:00Z");
    w.create(json!({}));
    w.clock.set("2026-03-02T14:00:00Z");
    w.tick();
    let (job, payload) = w.claim_order_job();
    let failing = Held {
        job: job.id,
        attempt: 1,
        failing: true,
    };
    assert!(w.place_held(payload, &failing).is_err());
    let resumed = OrderJob {
        resumed: true,
        ..payload
    };
    let first = Held {
        job: job.id,
        attempt: 1,
        failing: false,
    };
    assert!(matches!(
        w.place_held(resumed, &first),
        Ok(Placement::Placed { .. })
    ));
    w.platform
        .state(|p| assert_eq!((p.get_order_calls, p.payment_calls), (1, 1)));
}

/// Create Payment's answer lost on a first run: the failure's transaction stores the order id
/// Create Order answered, so the retry uses that order and finds the charge.
#[test]
fn a_first_runs_failed_payment_stores_its_order_with_the_failure() {
    let mut w = World::new("2026-03-01T12:00:00Z");
    w.settings(ShopSettings {
        order_retry_interval_seconds: Some(60),
        ..ShopSettings::default()
    });
    let s = w.create(json!({}));
    w.platform.state(|p| p.lost_payment_answers = 1);
    w.clock.set("2026-03-02T14:00:00Z");
    w.tick();
    let (job, payload) = w.claim_order_job();
    let first = Held {
        job: job.id,
        attempt: 1,
        failing: false,
    };
    assert!(matches!(
        w.place_held(payload, &first),
        Ok(Placement::Failed { attempt: 1, .. })
    ));
    let failed = w.attempts()[0].clone();
    assert_eq!(failed.status, OrderAttemptStatus::Failed);
    assert_eq!(failed.platform_order_id.as_deref(), Some("ord-1"));
    assert!(!w.job_exists(job.id));
    w.clock.advance(60);
    w.tick();
    assert!(matches!(
        w.place_due()[..],
        [Placement::Placed { attempt: 2, .. }]
    ));
    w.platform.state(|p| {
        assert_eq!(p.create_order_calls.len(), 1, "the stored order was used");
        assert_eq!(p.payment_calls, 1, "the retry found the charge");
    });
    assert_eq!(w.get(s.id).orders_processed, 1);
}
