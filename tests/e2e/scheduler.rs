//! The subscription scheduler end to end (issue 14; docs/scheduler.md):
//! the real `mercer` binary places due orders through the platform simulator, on SQLite and on
//! PostgreSQL. Weekly orders on time three times in a row across a change to summer time (the
//! binary's clock started at those dates with `--clock-start`, restarted between them), a
//! skipped date, retries up to the shop's maximum, two processes on one PostgreSQL, SIGKILL in
//! the middle, a change refused while an order is placed, expiring payment methods; every
//! webhook the scheduler sends received and verified by independent verifiers.

use mercer_domain::kernel::ids::ShopId;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Duration;

use mercer_domain::Timestamp;
use mercer_domain::platform::resources::Order;
use mercer_domain::ports::Database;
use mercer_domain::subscriptions::repository::SubscriptionOrder;
use mercer_platform_sim::{DECLINED_TOKEN, Faults, RunningSimulator};
use mercer_tests::receiver::{Received, Receiver};
use mercer_tests::verifiers::{Verifier, replay, standard_webhooks, x_svc_signature};
use mercer_tests::{Backend, MercerServer, TestDatabase, backend_tests, wait_until};
use serde_json::{Value, json};

use crate::subscriptions::{Api, TOPICS, id_of, ok};

/// The scheduler runs every 200 ms; outgoing calls may reach loopback; a delivery that fails
/// on a loaded machine is tried again within seconds rather than after the default 5 minutes.
const ARGS: &[&str] = &[
    "--allow-private-targets",
    "--webhook-retry-schedule",
    "0s,1s,2s,4s,8s,16s",
    "--scheduler-interval-ms",
    "200",
    "--job-lease",
    "2",
];
const SHOP_ZONE: &str = "America/New_York";
/// The topics the scheduler sends.
const SCHEDULER_TOPICS: [&str; 8] = [
    "subscription_upcoming_order",
    "subscription_order_created",
    "subscription_order_transaction_failed",
    "subscription_payment_failed",
    "subscription_order_max_retries_reached",
    "subscription_expiring_payment",
    "subscription_cancelled",
    "subscription_updated",
];

fn at(text: &str) -> Timestamp {
    Timestamp::parse_rfc3339(text).unwrap()
}

/// [`ARGS`] and `extra`; an option `extra` gives replaces the one of [`ARGS`].
pub(crate) fn args_with(extra: &[&str]) -> Vec<String> {
    let mut args = Vec::new();
    let mut defaults = ARGS.iter().peekable();
    while let Some(arg) = defaults.next() {
        let value = defaults.next_if(|next| !next.starts_with("--"));
        if !extra.contains(arg) {
            args.push(arg.to_string());
            args.extend(value.map(|v| v.to_string()));
        }
    }
    args.extend(extra.iter().map(|arg| arg.to_string()));
    args
}

pub(crate) fn start(database: TestDatabase, extra: &[&str]) -> MercerServer {
    let args = args_with(extra);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    MercerServer::start_with(database, &args)
}

fn topic_secret(topic: &str) -> String {
    format!("secret-of-{topic}")
}

/// The demo shop, in New York, with its orders destination on the simulator and a webhook
/// subscription for each of the scheduler's topics at the receiver (`/topic/{name}`).
fn set_up<'a>(server: &'a MercerServer, sim: &RunningSimulator, receiver: &Receiver) -> Api<'a> {
    let api = Api::demo(server);
    server
        .cli(&[
            "shop",
            "update",
            "--shop",
            &api.shop,
            "--timezone",
            SHOP_ZONE,
        ])
        .value();
    connect_orders(server, &api.shop, &api.token, sim);
    for topic in SCHEDULER_TOPICS {
        let id = TOPICS.iter().position(|t| *t == topic).unwrap() + 1;
        let created = api.send(
            "POST",
            "/webhooks/subscriptions",
            &json!({"webhook_subscription": {
                "callback_url": format!("{}/topic/{topic}", receiver.url),
                "webhook_topic_id": id,
                "shared_secret": topic_secret(topic),
            }}),
        );
        assert_eq!(created.status, 201, "{}", created.text);
    }
    api
}

/// The simulator as `shop`'s orders destination (the shop's shared secret rotated and given
/// to it).
pub(crate) fn connect_orders(
    server: &MercerServer,
    shop: &str,
    token: &str,
    sim: &RunningSimulator,
) {
    let rotated = server
        .post(&format!(
            "/integrations/v1/shops/{shop}/shared_secret/rotate"
        ))
        .bearer(token)
        .call()
        .json();
    let secret = rotated["data"]["shared_secret"].as_str().unwrap();
    sim.simulator.add_shop(shop, secret, None);
    let destination = json!({"data": {"destination": {"shop_identifier": shop, "topic": "orders",
        "destination": sim.base_url, "version": "v1", "timeout_ms": 5000}}});
    let created = server
        .post(&format!(
            "/integrations/v1/shops/{shop}/platform_connector_destinations"
        ))
        .bearer(token)
        .json(&destination);
    assert_eq!(created.status, 200, "{}", created.text);
}

/// A subscription of `email` with `fields` over a weekly one (Mondays 09:00 in the shop's
/// zone), paid with `tok_success`.
pub(crate) fn subscription(email: &str, fields: Value) -> Value {
    let mut body = json!({
        "customer": {"email": email, "first_name": "Ada"},
        "subscription": {
            "order_rrule": "DTSTART;TZID=America/New_York:20260302T090000\nRRULE:FREQ=WEEKLY",
            "line_items": [{"platform_product_id": "coffee", "platform_variant_id": "1kg",
                            "quantity": 2, "price": 1250}],
            "shipping_address": {"street1": "1 Main St", "city": "New York", "country_code": "US"},
            "payment_details": {"gateway_name": "test", "gateway_payment_id": "tok_success"}
        }
    });
    for (name, value) in fields.as_object().unwrap() {
        body["subscription"][name] = value.clone();
    }
    body
}

/// Waits until subscription `id` satisfies `done`; the subscription then.
pub(crate) fn wait_for(
    api: &Api<'_>,
    id: i64,
    seconds: u64,
    done: impl Fn(&Value) -> bool,
) -> Value {
    let mut last = Value::Null;
    let held = wait_until(Duration::from_secs(seconds), || {
        last = api.subscription(id);
        done(&last)
    });
    assert!(
        held,
        "subscription {id} is now {last}\n{}",
        api.server.log()
    );
    last
}

/// The simulator's orders of the shop.
pub(crate) fn orders(sim: &RunningSimulator, shop: &str) -> Vec<Order> {
    sim.simulator
        .lock()
        .shops
        .get(shop)
        .map(|data| data.orders.values().cloned().collect())
        .unwrap_or_default()
}

/// Create Order's Idempotency-Keys, as the simulator received them.
fn order_keys(sim: &RunningSimulator) -> Vec<String> {
    sim.simulator
        .lock()
        .requests
        .iter()
        .filter(|r| r.method == "POST" && r.path.ends_with("/orders"))
        .filter_map(|r| r.idempotency_key.clone())
        .collect()
}

/// Every request the receiver got, checked by the independent verifiers with its topic's
/// secret (x-svc-signature by Python's hmac, the Standard Webhooks headers by PyPI's
/// standardwebhooks); the requests by topic.
fn verified(receiver: &Receiver) -> BTreeMap<String, Vec<Received>> {
    verified_of(receiver, |_| true)
}

/// [`verified`] for the requests of the topics `keep` names.
fn verified_of(
    receiver: &Receiver,
    keep: impl Fn(&str) -> bool,
) -> BTreeMap<String, Vec<Received>> {
    let mut verifiers: HashMap<String, (Verifier, Verifier)> = HashMap::new();
    let mut by_topic: BTreeMap<String, Vec<Received>> = BTreeMap::new();
    for request in receiver.received() {
        let topic = request
            .target
            .strip_prefix("/topic/")
            .unwrap_or_else(|| panic!("{}", request.target))
            .to_string();
        if !keep(&topic) {
            continue;
        }
        assert_eq!(request.header("X-Svc-Topic"), Some(topic.as_str()));
        let (svc, standard) = verifiers.entry(topic.clone()).or_insert_with(|| {
            (
                x_svc_signature(&topic_secret(&topic)),
                standard_webhooks(&topic_secret(&topic)),
            )
        });
        assert_eq!(
            replay(svc, &request),
            (200, "verified".to_string()),
            "{topic}: x-svc-signature"
        );
        assert_eq!(
            replay(standard, &request),
            (200, "verified".to_string()),
            "{topic}: Standard Webhooks"
        );
        by_topic.entry(topic).or_default().push(request);
    }
    by_topic
}

fn body(request: &Received) -> Value {
    serde_json::from_slice(&request.body).unwrap()
}

/// The deliveries of `topic` about subscription `id`, one per message (`webhook-id`).
fn deliveries<'a>(
    by_topic: &'a BTreeMap<String, Vec<Received>>,
    topic: &str,
    id: i64,
) -> Vec<&'a Received> {
    let mut seen = BTreeSet::new();
    by_topic
        .get(topic)
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .filter(|r| body(r)["data"]["id"] == id)
        .filter(|r| seen.insert(r.header("webhook-id").unwrap_or_default().to_string()))
        .collect()
}

/// The server's log lines about deliveries and errors, to tell why a queue did not drain.
fn webhook_log(server: &MercerServer) -> String {
    server
        .log()
        .lines()
        .filter(|line| {
            line.contains("mercer::webhooks") || line.contains("ERROR") || line.contains("WARN")
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn metric(server: &MercerServer, name: &str) -> f64 {
    let text = server.get("/metrics").call().text;
    text.lines()
        .find_map(|line| line.strip_prefix(name)?.trim().parse().ok())
        .unwrap_or(0.0)
}

/// A weekly subscription placed on time three times in a row across the change to summer
/// time (US clocks go forward on 8 March 2026: 09:00 in New York is 14:00Z before, 13:00Z
/// after), and a second one whose 9 March order was skipped. The binary is started with its
/// clock a few seconds before each order date, and restarted between them.
fn weekly_orders_are_placed_on_time_across_summer_time_and_skipped_dates_are_not(backend: Backend) {
    let sim = RunningSimulator::start().unwrap();
    let receiver = Receiver::start();
    let server = start(
        TestDatabase::create(backend),
        &["--clock-start", "2026-03-02T13:59:50Z"],
    );
    let api = set_up(&server, &sim, &receiver);
    let weekly = api.create(&subscription("weekly@example.test", json!({})));
    let skipping = api.create(&subscription("skipping@example.test", json!({})));
    let (a, b) = (id_of(&weekly), id_of(&skipping));
    assert_eq!(weekly["subscription_status"], "scheduled");
    assert_eq!(weekly["next_order_datetime"], "2026-03-02T14:00:00Z");
    let due = server.cli(&[
        "subscriptions",
        "due",
        "--shop",
        &api.shop,
        "--at",
        "2026-03-02T14:00:00Z",
    ]);
    assert!(due.success, "{}", due.stderr);
    assert!(
        due.stdout.contains("2026-03-02 09:00 America/New_York")
            && due.stdout.contains("starts: scheduled"),
        "{}",
        due.stdout
    );

    let (shop, token) = (api.shop.clone(), api.token.clone());
    drop(api);
    let mut server = Some(server);
    let mut database = None;
    for (step, (clock_start, order_date, next)) in [
        (
            "2026-03-02T13:59:50Z",
            "2026-03-02T14:00:00Z",
            "2026-03-09T13:00:00Z",
        ),
        (
            "2026-03-09T12:59:55Z",
            "2026-03-09T13:00:00Z",
            "2026-03-16T13:00:00Z",
        ),
        (
            "2026-03-16T12:59:55Z",
            "2026-03-16T13:00:00Z",
            "2026-03-23T13:00:00Z",
        ),
    ]
    .into_iter()
    .enumerate()
    {
        let running = match server.take() {
            Some(first) => first,
            None => start(database.take().unwrap(), &["--clock-start", clock_start]),
        };
        let api = Api {
            server: &running,
            shop: shop.clone(),
            token: token.clone(),
        };
        let placed = wait_for(&api, a, 30, |s| s["orders_processed"] == step + 1);
        assert_eq!(placed["subscription_status"], "active");
        assert_eq!(placed["last_order_datetime"], order_date);
        assert_eq!(placed["next_order_datetime"], next, "after {order_date}");
        // On time: not before the order date, within a few seconds of it.
        let processed = at(placed["last_processed_datetime"].as_str().unwrap());
        assert!(
            processed >= at(order_date) && processed < at(order_date).plus_seconds(5),
            "placed at {processed} for {order_date}"
        );
        if step == 0 {
            wait_for(&api, b, 30, |s| s["orders_processed"] == 1);
            let skipped = ok(api.send(
                "POST",
                &format!("/subscriptions/{b}/skip"),
                &json!({"order_datetime": "2026-03-09T14:00:00Z"}),
            ))["subscription"]
                .clone();
            assert_eq!(skipped["next_order_datetime"], "2026-03-16T13:00:00Z");
            let due = running.cli(&[
                "subscriptions",
                "due",
                "--shop",
                &api.shop,
                "--at",
                "2026-03-09T13:00:00Z",
            ]);
            assert!(due.stdout.contains(&format!("\n{a:<12}")), "{}", due.stdout);
            assert!(
                !due.stdout.contains(&format!("\n{b:<12}")),
                "the skipped date is not due: {}",
                due.stdout
            );
        }
        if step == 1 {
            // The skipped subscription ordered nothing on its skipped date.
            std::thread::sleep(Duration::from_secs(2));
            let skipped = api.subscription(b);
            assert_eq!(skipped["orders_processed"], 1);
            assert_eq!(skipped["next_order_datetime"], "2026-03-16T13:00:00Z");
        }
        if step == 2 {
            let b_done = wait_for(&api, b, 30, |s| s["orders_processed"] == 2);
            assert_eq!(b_done["last_order_datetime"], "2026-03-16T13:00:00Z");
            assert_eq!(
                metric(
                    &running,
                    "mercer_subscription_orders_total{outcome=\"placed\"}"
                ),
                2.0
            );
            assert!(metric(&running, "mercer_subscription_order_lag_seconds_count") >= 2.0);
        }
        // Let every delivery go out before the process stops: no message pending, whether
        // due or in flight (times in March 2026 are all past on the system's clock).
        let store = running.database().open_store();
        let drained = wait_until(Duration::from_secs(30), || {
            store
                .read(|tx| Ok(tx.webhook_queue_depth(Timestamp::now())?))
                .is_ok_and(|depth| depth == (0, 0))
        });
        assert!(
            drained,
            "deliveries still pending after {order_date}; the server's webhook log:\n{}",
            webhook_log(&running)
        );
        drop(api);
        database = Some(running.into_database());
    }

    let keys = order_keys(&sim);
    let expected: BTreeSet<String> = [
        format!("{a}:2026-03-02T14:00:00Z"),
        format!("{a}:2026-03-09T13:00:00Z"),
        format!("{a}:2026-03-16T13:00:00Z"),
        format!("{b}:2026-03-02T14:00:00Z"),
        format!("{b}:2026-03-16T13:00:00Z"),
    ]
    .into_iter()
    .collect();
    assert_eq!(
        keys.iter().cloned().collect::<BTreeSet<_>>(),
        expected,
        "one order per date; B's 9 March skipped"
    );
    assert_eq!(keys.len(), 5, "each Create Order once");
    let placed = orders(&sim, &shop);
    assert_eq!(placed.len(), 5);
    for order in &placed {
        assert_eq!(order.total.as_ref().unwrap().as_str(), "25.00");
        assert_eq!(order.payments.as_ref().unwrap().len(), 1, "paid once");
    }

    let by_topic = verified(&receiver);
    for id in [a, b] {
        let created = deliveries(&by_topic, "subscription_order_created", id);
        let dates: Vec<Value> = created
            .iter()
            .map(|r| body(r)["order"]["order_datetime"].clone())
            .collect();
        let expected: Vec<&str> = if id == a {
            vec![
                "2026-03-02T14:00:00Z",
                "2026-03-09T13:00:00Z",
                "2026-03-16T13:00:00Z",
            ]
        } else {
            vec!["2026-03-02T14:00:00Z", "2026-03-16T13:00:00Z"]
        };
        assert_eq!(dates, expected, "subscription {id}");
        assert_eq!(
            deliveries(&by_topic, "subscription_upcoming_order", id).len(),
            expected.len()
        );
        for request in created {
            let payload = body(request);
            assert_eq!(payload["order"]["status"], "placed");
            assert!(payload["order"]["platform_order_id"].is_string());
            assert_eq!(payload["order"]["total"], 2500);
            assert_eq!(payload["shop_identifier"], shop.as_str());
        }
    }
}

/// A declined payment retried after the shop's interval up to its maximum, then the
/// subscription ends; a connector failure retried into a success resets the count; a rule
/// whose last date is placed ends the subscription. The `subscriptions due` command and
/// `/metrics` say so.
fn failed_orders_are_retried_up_to_the_maximum_and_ended_rules_end_subscriptions(backend: Backend) {
    let sim = RunningSimulator::start().unwrap();
    let receiver = Receiver::start();
    let server = start(TestDatabase::create(backend), &[]);
    let api = set_up(&server, &sim, &receiver);
    server
        .cli(&[
            "shop",
            "update",
            "--shop",
            &api.shop,
            "--order-retry-interval",
            "2",
            "--order-max-retries",
            "2",
        ])
        .value();
    let soon = Timestamp::now().plus_seconds(2).to_rfc3339();
    let declining = api.create(&subscription(
        "declined@example.test",
        json!({
            "subscription_status": "active",
            "next_order_datetime": soon,
            "payment_details": {"gateway_name": "test", "gateway_payment_id": DECLINED_TOKEN}
        }),
    ));
    let id = id_of(&declining);
    let failed = wait_for(&api, id, 20, |s| s["current_retries"] == 1);
    assert_eq!(failed["last_failure_code"], "payment_declined");
    assert_eq!(failed["subscription_status"], "active");
    assert!(failed["next_processing_datetime"].is_string());
    let due = server.cli(&["subscriptions", "due", "--shop", &api.shop]);
    assert!(
        due.stdout.contains("waiting: retry 1 at") && due.stdout.contains("payment_declined"),
        "{}",
        due.stdout
    );
    let ended = wait_for(&api, id, 30, |s| s["subscription_status"] == "inactive");
    assert_eq!(ended["current_retries"], 3);
    assert_eq!(ended["orders_processed"], 0);
    assert_eq!(ended["latest_status_log"]["reason"], "max_retries_reached");
    assert_eq!(
        ended["latest_status_log"]["metadata"]["user"]["type"],
        "system"
    );
    let shop_orders = orders(&sim, &api.shop);
    assert_eq!(
        shop_orders.len(),
        1,
        "one order of that date, however tried"
    );
    assert_eq!(shop_orders[0].payments.as_ref().unwrap().len(), 3);
    assert_eq!(
        order_keys(&sim).len(),
        1,
        "retries pay for the order the first attempt created"
    );

    // A connector failure, then a success: the count starts again.
    sim.simulator.lock().faults = Faults {
        status: Some(503),
        times: Some(1),
        ..Faults::default()
    };
    let soon = Timestamp::now().plus_seconds(1).to_rfc3339();
    let flaky = id_of(&api.create(&subscription(
        "flaky@example.test",
        json!({"subscription_status": "active", "next_order_datetime": soon}),
    )));
    let placed = wait_for(&api, flaky, 20, |s| s["orders_processed"] == 1);
    assert_eq!(placed["current_retries"], 0);
    assert_eq!(placed["last_failure_code"], "connector_failed");

    // Daily, twice, in UTC: the second and last date 3 s from now.
    let start =
        Timestamp::from_micros((Timestamp::now().as_micros() / 1_000_000 - 86_400 + 3) * 1_000_000);
    let rule = format!(
        "DTSTART;TZID=UTC:{}\nRRULE:FREQ=DAILY;COUNT=2",
        &start.to_rfc3339_seconds().replace(['-', ':'], "")[..15]
    );
    let last = id_of(&api.create(&subscription(
        "last@example.test",
        json!({"order_rrule": rule}),
    )));
    let ended_rule = wait_for(&api, last, 20, |s| s["subscription_status"] == "inactive");
    assert_eq!(ended_rule["orders_processed"], 1);
    assert_eq!(ended_rule["next_order_datetime"], Value::Null);
    assert_eq!(ended_rule["latest_status_log"]["reason"], "completed");

    assert!(wait_until(Duration::from_secs(10), || {
        metric(
            &server,
            "mercer_subscription_orders_total{outcome=\"retries_exhausted\"}",
        ) == 1.0
    }));
    assert_eq!(
        metric(
            &server,
            "mercer_subscription_orders_total{outcome=\"failed\"}"
        ),
        3.0
    );
    assert_eq!(
        metric(
            &server,
            "mercer_subscription_orders_total{outcome=\"placed\"}"
        ),
        2.0
    );
    assert_eq!(
        metric(&server, "mercer_subscription_order_retries_total"),
        3.0
    );
    assert!(
        server
            .get("/metrics")
            .call()
            .text
            .contains("mercer_subscription_orders_pending{state=\"due\"} 0")
    );

    assert!(wait_until(Duration::from_secs(20), || {
        receiver
            .received()
            .iter()
            .filter(|r| r.target.ends_with("max_retries_reached"))
            .count()
            == 1
    }));
    std::thread::sleep(Duration::from_millis(500));
    let by_topic = verified(&receiver);
    let count = |topic| deliveries(&by_topic, topic, id).len();
    assert_eq!(
        count("subscription_upcoming_order"),
        1,
        "retries are not upcoming"
    );
    assert_eq!(count("subscription_order_transaction_failed"), 3);
    assert_eq!(
        count("subscription_payment_failed"),
        3,
        "its first transaction"
    );
    assert_eq!(count("subscription_order_max_retries_reached"), 1);
    assert_eq!(count("subscription_order_created"), 0);
    let exhausted = deliveries(&by_topic, "subscription_order_max_retries_reached", id)[0];
    let payload = body(exhausted);
    assert_eq!(payload["data"]["subscription_status"], "inactive");
    assert_eq!(payload["order"]["attempt"], 3);
    assert_eq!(payload["order"]["failure_code"], "payment_declined");
    let completed: Vec<&str> = ["subscription_order_created", "subscription_cancelled"]
        .into_iter()
        .filter(|topic| deliveries(&by_topic, topic, last).len() == 1)
        .collect();
    assert_eq!(
        completed,
        ["subscription_order_created", "subscription_cancelled"],
        "the last order, then the end"
    );
}

/// 60 orders due at once, placed slowly (the simulator answers after 40 ms), and the process
/// killed with SIGKILL in the middle: after a restart every order is placed once and paid
/// once, every subscription counts one order, and every `subscription_order_created` arrives.
fn a_sigkill_while_orders_are_placed_loses_none_and_doubles_none(backend: Backend) {
    const COUNT: usize = 60;
    let sim = RunningSimulator::start().unwrap();
    let receiver = Receiver::start();
    // Webhook messages the killed process had claimed come back after 5 s, not the default 60.
    let server = start(TestDatabase::create(backend), &["--webhook-lease", "5"]);
    let api = set_up(&server, &sim, &receiver);
    let ids: Vec<i64> = (0..COUNT)
        .map(|n| {
            id_of(&api.create(&subscription(
                &format!("kill{n}@example.test"),
                json!({"subscription_status": "active",
                       "next_order_datetime": "2030-01-07T14:00:00Z"}),
            )))
        })
        .collect();
    sim.simulator.lock().faults = Faults {
        delay_ms: Some(40),
        ..Faults::default()
    };
    // All due at once.
    server
        .database()
        .execute("UPDATE subscriptions SET next_order_datetime = 1000000");
    // Killed once a quarter is placed and an attempt's Create Order has reached the platform
    // but its outcome is not written: between Create Order and the end, where a crash could
    // double an order or its payment. (A first run writes the platform order id with the
    // outcome, so the platform's requests say which attempts are there.)
    let store = server.database().open_store();
    let past_create_order = || {
        let asked: BTreeSet<String> = order_keys(&sim).into_iter().collect();
        placing_attempts(&store)
            .into_iter()
            .filter(|attempt| asked.contains(&attempt.idempotency_key))
            .map(|attempt| attempt.idempotency_key)
            .collect::<Vec<String>>()
    };
    let mid_order = || !past_create_order().is_empty();
    assert!(
        wait_until(Duration::from_secs(30), || orders(&sim, &api.shop).len()
            >= COUNT / 4
            && mid_order()),
        "{}",
        server.log()
    );
    let (shop, token) = (api.shop.clone(), api.token.clone());
    drop(api);
    let database = server.into_database();
    let placed_before = orders(&sim, &shop).len();
    assert!(
        placed_before < COUNT,
        "killed in the middle: {placed_before}"
    );
    // What the kill interrupted: attempts whose Create Order reached the platform, their
    // outcome unwritten.
    let interrupted = past_create_order();
    assert!(
        !interrupted.is_empty(),
        "killed while an order was between Create Order and its outcome"
    );
    drop(store);

    let restarted = start(database, &["--webhook-lease", "5"]);
    let api = Api {
        server: &restarted,
        shop,
        token,
    };
    for id in &ids {
        wait_for(&api, *id, 60, |s| {
            s["orders_processed"] == 1 && s["subscription_status"] == "active"
        });
    }
    let keys = order_keys(&sim);
    let distinct: BTreeSet<&String> = keys.iter().collect();
    assert_eq!(distinct.len(), COUNT, "every order asked for");
    for key in &interrupted {
        assert!(
            keys.iter().filter(|k| *k == key).count() <= 2,
            "{key}: asked again once at most, with its key (the platform answers its first order)"
        );
    }
    let placed = orders(&sim, &api.shop);
    let mut figures = mercer_tests::chaos::Figures::new("sigkill while orders are placed", backend);
    figures
        .set("subscriptions_due", COUNT)
        .set("placed_before_the_kill", placed_before)
        .set("interrupted_mid_order", interrupted.len())
        .set("orders_placed", placed.len())
        .set("orders_doubled", placed.len().saturating_sub(COUNT))
        .set(
            "orders_paid_twice",
            placed
                .iter()
                .filter(|order| order.payments.as_ref().map_or(0, Vec::len) > 1)
                .count(),
        )
        .set("create_order_calls", keys.len());
    figures.report();
    assert_eq!(
        placed.len(),
        COUNT,
        "none doubled, whatever was asked twice"
    );
    for order in &placed {
        assert_eq!(
            order.payments.as_ref().map_or(0, Vec::len),
            1,
            "paid once: {:?}",
            order.custom_attributes
        );
    }
    assert!(wait_until(Duration::from_secs(30), || {
        let by_message: BTreeSet<String> = receiver
            .received()
            .iter()
            .filter(|r| r.target.ends_with("order_created"))
            .filter_map(|r| r.header("webhook-id").map(str::to_string))
            .collect();
        by_message.len() == COUNT
    }));
    // Anything sent twice would have arrived by now.
    std::thread::sleep(Duration::from_millis(500));
    assert_one_order_created_each(&verified(&receiver), &ids);
}

/// Attempts placing now, read from the database.
fn placing_attempts(store: &mercer_store::Store) -> Vec<SubscriptionOrder> {
    let everything_before = Timestamp::now().plus_seconds(86_400);
    store
        .read(|tx| Ok(tx.stalled_subscription_orders(everything_before, 10_000)?))
        .unwrap_or_default()
}

/// One `subscription_order_created` message for each subscription of `ids`, none for another.
fn assert_one_order_created_each(by_topic: &BTreeMap<String, Vec<Received>>, ids: &[i64]) {
    // Each body parsed once (a body per id per request was minutes in a debug build).
    let mut messages_of: HashMap<i64, BTreeSet<String>> = HashMap::new();
    for request in by_topic
        .get("subscription_order_created")
        .map(Vec::as_slice)
        .unwrap_or_default()
    {
        let id = body(request)["data"]["id"].as_i64().unwrap_or_default();
        let message = request.header("webhook-id").unwrap_or_default().to_string();
        messages_of.entry(id).or_default().insert(message);
    }
    for id in ids {
        assert_eq!(
            messages_of.get(id).map_or(0, BTreeSet::len),
            1,
            "subscription {id}: one subscription_order_created"
        );
    }
    let messages: BTreeSet<&String> = messages_of.values().flatten().collect();
    assert_eq!(messages.len(), ids.len());
}

/// A subscription whose order is being placed refuses changes (422) and takes them once the
/// order is placed: the order is placed once, the change is not lost.
fn a_change_while_its_order_is_placed_is_refused_then_taken(backend: Backend) {
    let sim = RunningSimulator::start().unwrap();
    let receiver = Receiver::start();
    let server = start(TestDatabase::create(backend), &[]);
    let api = set_up(&server, &sim, &receiver);
    sim.simulator.lock().faults = Faults {
        delay_ms: Some(1500),
        ..Faults::default()
    };
    let soon = Timestamp::now().plus_seconds(1).to_rfc3339();
    let id = id_of(&api.create(&subscription(
        "busy@example.test",
        json!({"subscription_status": "active", "next_order_datetime": soon}),
    )));
    wait_for(&api, id, 20, |s| s["subscription_status"] == "processing");
    api.send("POST", &format!("/subscriptions/{id}/cancel"), &json!({}))
        .assert_error(422, "subscription.invalid_transition");
    api.send(
        "PUT",
        &format!("/subscriptions/{id}"),
        &json!({"subscription": {"next_order_datetime": "2030-01-01T00:00:00Z"}}),
    )
    .assert_error(422, "subscription.invalid_transition");
    let placed = wait_for(&api, id, 20, |s| s["subscription_status"] == "active");
    assert_eq!(placed["orders_processed"], 1);
    let cancelled = ok(api.send("POST", &format!("/subscriptions/{id}/cancel"), &json!({})));
    assert_eq!(cancelled["subscription"]["subscription_status"], "inactive");
    assert_eq!(orders(&sim, &api.shop).len(), 1);
}

/// `payment_details.expires_at` and the payment method change's: the shop's notice days
/// before the method expires, `subscription_expiring_payment` once per method.
fn expiring_payment_methods_are_announced_once_per_method(backend: Backend) {
    let sim = RunningSimulator::start().unwrap();
    let receiver = Receiver::start();
    let server = start(TestDatabase::create(backend), &[]);
    let api = set_up(&server, &sim, &receiver);
    // A card good through next month: it expires within 62 days of now.
    let in_a_month = Timestamp::now().plus_seconds(31 * 86_400).to_rfc3339();
    let month = &in_a_month[..7];
    server
        .cli(&[
            "shop",
            "update",
            "--shop",
            &api.shop,
            "--expiring-payment-notice-days",
            "62",
        ])
        .value();
    let created = api.create(&subscription(
        "expiring@example.test",
        json!({
            "subscription_status": "active",
            "next_order_datetime": "2030-01-07T14:00:00Z",
            "payment_details": {"gateway_name": "test", "gateway_payment_id": "tok_success",
                                "expires_at": month}
        }),
    ));
    let id = id_of(&created);
    assert_eq!(created["payment_method_expires_at"], month);
    let announced = |count: usize| {
        wait_until(Duration::from_secs(15), || {
            receiver
                .received()
                .iter()
                .filter(|r| r.target.ends_with("expiring_payment"))
                .count()
                == count
        })
    };
    assert!(announced(1));
    std::thread::sleep(Duration::from_secs(1));
    assert!(announced(1), "once for this method");
    let changed = ok(api.send(
        "PUT",
        &format!("/subscriptions/{id}/payment_method"),
        &json!({"payment_method_token": "tok_other", "payment_gateway_public_id": "test",
                "expires_at": month}),
    ));
    assert_eq!(changed["subscription"]["payment_method_expires_at"], month);
    assert!(announced(2), "a new method is announced again");
    let by_topic = verified(&receiver);
    let sent = deliveries(&by_topic, "subscription_expiring_payment", id);
    assert_eq!(sent.len(), 2);
    assert_eq!(
        body(sent[1])["data"]["payment_method_expires_at"],
        month,
        "the payload names the expiry"
    );
    assert_eq!(body(sent[1])["data"]["payment_method_token"], "tok_other");
}

/// A subscription whose line item the catalogue knows, with a line item discount, the
/// subscription's percent discount, a shipping line and a discount code: the line item shows
/// the catalogue's details, and its scheduled order carries the discounts, the shipping line
/// and the code to Create Order.
fn a_scheduled_order_carries_the_discounts_the_shipping_line_and_the_code(backend: Backend) {
    let sim = RunningSimulator::start().unwrap();
    let server = start(
        TestDatabase::create(backend),
        &["--clock-start", "2030-01-07T08:59:57Z"],
    );
    let api = Api::demo(&server);
    connect_orders(&server, &api.shop, &api.token, &sim);
    let saved = server
        .post(&format!(
            "/products/v1/shops/{}/platforms/custom/webhooks/products/saved",
            api.shop
        ))
        .bearer(&api.token)
        .json(
            &json!({"data": {"product": {"platform_id": "coffee", "name": "Coffee",
            "platform_updated_at": "2026-11-01T00:00:00Z",
            "variants": [{"platform_id": "1kg", "name": "Coffee 1kg", "sku": "COF-1KG",
                          "price": "20.00", "grams": 1000}]}}}),
        );
    assert_eq!(saved.status, 202, "{}", saved.text);
    let store = server.database().open_store();
    assert!(wait_until(Duration::from_secs(10), || store
        .read(|tx| mercer_domain::platform::catalogue::variants(tx, ShopId(1), &["1kg"]))
        .is_ok_and(|found| found.len() == 1)));
    let made = api.create(&json!({
        "customer": {"email": "ada@example.test", "first_name": "Ada"},
        "subscription": {
            "order_rrule": "DTSTART:20300107T090000Z\nRRULE:FREQ=WEEKLY",
            "line_items": [{"platform_product_id": "coffee", "platform_variant_id": "1kg",
                            "quantity": 2, "price": 2000,
                            "discounts": [{"discount_type": "fixed_amount", "fixed_value": 200}]}],
            "shipping_lines": [{"name": "Standard", "code": "STD", "tag": "ground", "price": 500}],
            "percent_discount": 10,
            "discount_code": "WELCOME",
            "shipping_address": {"street1": "1 Main St", "city": "Ottawa", "country_code": "CA"},
            "payment_details": {"gateway_name": "test", "gateway_payment_id": "tok_success"}
        }
    }));
    let item = &made["line_items"][0];
    assert_eq!(
        (
            &item["title"],
            &item["sku"],
            &item["grams"],
            &item["discounted_price"]
        ),
        (
            &json!("Coffee 1kg"),
            &json!("COF-1KG"),
            &json!(1000),
            &json!(1800)
        ),
        "{item}"
    );
    assert_eq!(made["shipping_lines"][0]["code"], "STD");
    let placed = wait_until(Duration::from_secs(30), || {
        orders(&sim, &api.shop).len() == 1
    });
    assert!(placed, "{}", server.log());
    let order = serde_json::to_value(&orders(&sim, &api.shop)[0]).unwrap();
    let line = &order["line_items"][0];
    assert_eq!(
        [
            &line["price_per_item"],
            &line["discount_per_item"],
            &line["total"]
        ],
        ["20.00", "2.00", "36.00"],
        "{line}"
    );
    // 36.00 of items, 10 % off, and the shipping line.
    assert_eq!(
        [
            &order["subtotal"],
            &order["discount"],
            &order["shipping_subtotal"],
            &order["total"]
        ],
        ["36.00", "3.60", "5.00", "37.40"],
        "{order}"
    );
    assert_eq!(order["shipping_method"], "Standard");
    let attributes = &order["custom_attributes"];
    assert_eq!(attributes["discount_code"]["value"], "WELCOME");
    let shipping: Value =
        serde_json::from_str(attributes["shipping_lines"]["value"].as_str().unwrap()).unwrap();
    assert_eq!(shipping[0]["code"], "STD");
}

backend_tests!(
    a_scheduled_order_carries_the_discounts_the_shipping_line_and_the_code,
    weekly_orders_are_placed_on_time_across_summer_time_and_skipped_dates_are_not,
    failed_orders_are_retried_up_to_the_maximum_and_ended_rules_end_subscriptions,
    a_sigkill_while_orders_are_placed_loses_none_and_doubles_none,
    a_change_while_its_order_is_placed_is_refused_then_taken,
    expiring_payment_methods_are_announced_once_per_method,
);

/// Two `mercer serve` processes on one PostgreSQL database and 500 subscriptions due at once:
/// 500 orders, each with its own Idempotency-Key, each created once, both processes placing.
#[test]
fn two_processes_on_one_postgres_place_500_due_orders_once() {
    const COUNT: usize = 500;
    let sim = RunningSimulator::start().unwrap();
    let receiver = Receiver::start();
    // Nothing is killed here: leases as long as the default, so that a renewal late on a loaded
    // machine does not hand a job to the other process (which would repeat its Create Order).
    let args = ["--job-workers", "3", "--job-lease", "30"];
    let first = start(TestDatabase::create(Backend::Postgres), &args);
    let api = set_up(&first, &sim, &receiver);
    let ids: Vec<i64> = (0..COUNT)
        .map(|n| {
            id_of(&api.create(&subscription(
                &format!("two{n}@example.test"),
                json!({"subscription_status": "active",
                       "next_order_datetime": "2030-01-07T14:00:00Z"}),
            )))
        })
        .collect();
    let second = start(TestDatabase::attach(first.database()), &args);
    first
        .database()
        .execute("UPDATE subscriptions SET next_order_datetime = 1000000");
    let store = first.database().open_store();
    let all_placed = wait_until(Duration::from_secs(120), || {
        store
            .read(|tx| Ok(tx.scheduler_backlog(Timestamp::now())?))
            .map(|backlog| backlog.due + backlog.processing == 0)
            .unwrap_or(false)
            && orders(&sim, &api.shop).len() == COUNT
    });
    assert!(all_placed, "{}", first.log());
    let keys = order_keys(&sim);
    assert_eq!(keys.len(), COUNT, "each Create Order once");
    let distinct: BTreeSet<&String> = keys.iter().collect();
    assert_eq!(distinct.len(), COUNT, "each with its own Idempotency-Key");
    let expected: BTreeSet<String> = ids
        .iter()
        .map(|id| format!("{id}:1970-01-01T00:00:01Z"))
        .collect();
    assert_eq!(
        keys.iter().cloned().collect::<BTreeSet<_>>(),
        expected,
        "subscription id and order date"
    );
    for order in orders(&sim, &api.shop) {
        assert_eq!(order.payments.as_ref().map_or(0, Vec::len), 1);
    }
    let placed = |server: &MercerServer| {
        metric(
            server,
            "mercer_subscription_orders_total{outcome=\"placed\"}",
        )
    };
    let (by_first, by_second) = (placed(&first), placed(&second));
    assert_eq!(by_first + by_second, COUNT as f64);
    assert!(
        by_first > 0.0 && by_second > 0.0,
        "both processes placed orders: {by_first} and {by_second}"
    );
    let api = Api {
        server: &second,
        shop: api.shop.clone(),
        token: api.token.clone(),
    };
    let page = ok(api.get("/subscriptions?limit=250&filter=eq(orders_processed:1)"));
    assert_eq!(page["pagination"]["total"], COUNT);
    assert!(wait_until(Duration::from_secs(60), || {
        receiver
            .received()
            .iter()
            .filter(|r| r.target.ends_with("order_created"))
            .count()
            >= COUNT
    }));
    std::thread::sleep(Duration::from_millis(500));
    let created = verified_of(&receiver, |topic| topic == "subscription_order_created");
    assert_one_order_created_each(&created, &ids);
}
