//! Per-endpoint throttling end to end: `rate_limit_per_s` on both kinds of webhook (checked,
//! read tolerantly, set and cleared, shown), the console's limit and backlog, and deliveries
//! to a throttled receiver from two processes on one PostgreSQL database (one on SQLite),
//! timed where they arrive.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mercer_tests::receiver::Receiver;
use mercer_tests::{Answer, Backend, MercerServer, TestDatabase, wait_until};
use serde_json::{Value, json};

use crate::console::{session, staff};
use crate::oauth::PASSWORD;
use crate::webhooks::shop;

const ALLOW_PRIVATE: &[&str] = &["--allow-private-targets"];
const CALLBACK: &str = "http://127.0.0.1:9/throttled";

/// The field path and sub-type of each 422 entry.
fn problems(answer: &Answer) -> Vec<(String, String)> {
    answer
        .assert_error(422, "validation.failed")
        .iter()
        .map(|entry| {
            (
                entry["field"].as_str().unwrap_or_default().to_string(),
                entry["sub_type"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

/// Values that are no `rate_limit_per_s`, with the sub-type each is refused with.
fn refused_values() -> Vec<(Value, &'static str)> {
    vec![
        (json!(0), "out_of_range"),
        (json!(-1), "out_of_range"),
        (json!(10_001), "out_of_range"),
        (json!("0"), "out_of_range"),
        (json!(2.5), "invalid_type"),
        (json!("twenty"), "invalid_type"),
        (json!(true), "invalid_type"),
        (json!([20]), "invalid_type"),
    ]
}

#[test]
fn subscription_webhooks_take_a_rate_limit() {
    let server = MercerServer::in_process_with(Backend::Sqlite, ALLOW_PRIVATE);
    let demo = server.demo().clone();
    let path = format!(
        "/subscriptions/v1/shops/{}/webhooks/subscriptions",
        demo.shop
    );
    let create = |rate: Option<Value>| {
        let mut fields = json!({
            "callback_url": CALLBACK, "webhook_topic_id": 1,
            "shared_secret": "a-long-shared-secret"
        });
        if let Some(rate) = rate {
            fields["rate_limit_per_s"] = rate;
        }
        server
            .post(&path)
            .bearer(&demo.token)
            .json(&json!({ "webhook_subscription": fields }))
    };
    let field = "webhook_subscription.rate_limit_per_s".to_string();
    for (value, sub_type) in refused_values() {
        assert_eq!(
            problems(&create(Some(value.clone()))),
            [(field.clone(), sub_type.to_string())],
            "{value}"
        );
    }
    for (value, shown) in [
        (None, Value::Null),
        (Some(Value::Null), Value::Null),
        (Some(json!(1)), json!(1)),
        (Some(json!(10_000)), json!(10_000)),
        (Some(json!(" 20 ")), json!(20)),
    ] {
        let created = create(value.clone());
        assert_eq!(created.status, 201, "{value:?}: {}", created.text);
        assert_eq!(
            created.json()["webhook_subscription"]["rate_limit_per_s"],
            shown,
            "{value:?}"
        );
    }
    let id = create(Some(json!(20))).json()["webhook_subscription"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let update = |fields: Value| {
        server
            .request("PATCH", &format!("{path}/{id}"))
            .bearer(&demo.token)
            .json(&json!({ "webhook_subscription": fields }))
    };
    let shown = |answer: Answer| {
        assert_eq!(answer.status, 200, "{}", answer.text);
        answer.json()["webhook_subscription"]["rate_limit_per_s"].clone()
    };
    assert_eq!(shown(update(json!({ "rate_limit_per_s": "5" }))), json!(5));
    assert_eq!(
        shown(update(
            json!({ "callback_url": "http://127.0.0.1:9/other" })
        )),
        json!(5),
        "left out, it stays"
    );
    assert_eq!(
        problems(&update(
            json!({ "rate_limit_per_s": 0, "webhook_topic_id": 99 })
        )),
        [
            (
                "webhook_subscription.webhook_topic_id".to_string(),
                "invalid_value".to_string()
            ),
            (field.clone(), "out_of_range".to_string())
        ]
    );
    assert_eq!(
        shown(update(json!({ "rate_limit_per_s": null }))),
        Value::Null
    );
    let listed = server.get(&path).bearer(&demo.token).call();
    let limits: Vec<Value> = listed.json()["webhook_subscriptions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|entry| entry["rate_limit_per_s"].clone())
        .collect();
    assert_eq!(
        limits,
        [
            Value::Null,
            Value::Null,
            json!(1),
            json!(10_000),
            json!(20),
            Value::Null
        ]
    );
}

#[test]
fn checkout_webhooks_take_a_rate_limit_and_the_console_shows_it() {
    let server = MercerServer::in_process_with(Backend::Sqlite, ALLOW_PRIVATE);
    let shop = shop(&server);
    let path = format!("/checkout/shop/{}/webhooks", shop.id);
    let create = |rate: Value| {
        server.post(&path).bearer(&shop.token).json(&json!({
            "webhook_topic_id": 2, "callback_url": CALLBACK, "rate_limit_per_s": rate
        }))
    };
    for (value, sub_type) in refused_values() {
        assert_eq!(
            problems(&create(value.clone())),
            [("rate_limit_per_s".to_string(), sub_type.to_string())],
            "{value}"
        );
    }
    let created = create(json!("20"));
    assert_eq!(created.status, 201, "{}", created.text);
    let webhook = created.json()["data"].clone();
    assert_eq!(webhook["rate_limit_per_s"], 20);
    let unlimited = create(Value::Null);
    assert_eq!(unlimited.json()["data"]["rate_limit_per_s"], Value::Null);
    let id = webhook["id"].as_str().unwrap();
    let update = |body: Value| {
        server
            .request("PATCH", &format!("{path}/{id}"))
            .bearer(&shop.token)
            .json(&body)
    };
    let shown = |answer: Answer| {
        assert_eq!(answer.status, 200, "{}", answer.text);
        answer.json()["data"]["rate_limit_per_s"].clone()
    };
    assert_eq!(shown(update(json!({ "rate_limit_per_s": 7 }))), json!(7));
    assert_eq!(
        problems(&update(json!({}))),
        [("callback_url".to_string(), "required".to_string())],
        "a body with nothing to change is refused as before"
    );
    assert_eq!(
        problems(&update(json!({ "rate_limit_per_s": 10_001 }))),
        [("rate_limit_per_s".to_string(), "out_of_range".to_string())]
    );
    assert_eq!(
        shown(update(
            json!({ "callback_url": "http://127.0.0.1:9/moved" })
        )),
        json!(7)
    );
    assert_eq!(
        shown(update(json!({ "rate_limit_per_s": null }))),
        Value::Null
    );
    assert_eq!(shown(update(json!({ "rate_limit_per_s": 3 }))), json!(3));

    // Nothing listens at the callback: the test deliveries wait, and make the backlog.
    for _ in 0..2 {
        let sent = server
            .post(&format!("{path}/{id}/test"))
            .bearer(&shop.token)
            .call();
        assert_eq!(sent.status, 202, "{}", sent.text);
    }
    staff(&server, &shop.id, "ops@demo.test");
    let (cookie, _) = session(&server, &shop.id, "ops@demo.test");
    let _ = PASSWORD;
    let page = server
        .get("/console/webhooks")
        .header("Cookie", &cookie)
        .call();
    assert_eq!(page.status, 200, "{}", page.text);
    assert!(page.text.contains("<td>3/s</td>"), "{}", page.text);
    assert!(page.text.contains("<td>2 pending</td>"), "{}", page.text);
    assert!(
        page.text
            .contains("<td><span class=\"fine\">none</span></td>")
    );
}

/// Starts of deliveries as the receiver saw them arrive.
#[derive(Clone, Default)]
struct Arrivals(Arc<Mutex<Vec<Instant>>>);

impl Arrivals {
    fn receiver(&self) -> Receiver {
        let arrivals = self.0.clone();
        Receiver::answering(move |_| {
            arrivals.lock().unwrap().push(Instant::now());
            (200, "{}".to_string())
        })
    }

    fn count(&self) -> usize {
        self.0.lock().unwrap().len()
    }

    /// The gaps between one arrival and the next.
    fn gaps(&self) -> Vec<Duration> {
        let mut times = self.0.lock().unwrap().clone();
        times.sort();
        times.windows(2).map(|pair| pair[1] - pair[0]).collect()
    }

    /// (the rate of starts, from the first to the last, per second; the least gap between two)
    fn measured(&self) -> (f64, Duration) {
        let mut times = self.0.lock().unwrap().clone();
        times.sort();
        let span = times[times.len() - 1] - times[0];
        let rate = (times.len() - 1) as f64 / span.as_secs_f64();
        let least = times
            .windows(2)
            .map(|pair| pair[1] - pair[0])
            .min()
            .unwrap();
        (rate, least)
    }
}

/// 120 test deliveries to a checkout webhook limited to 20/s, enqueued through `servers` in
/// turn (every one of them delivers too): the starts keep to the limit.
fn deliveries_keep_to_the_limit(servers: &[&MercerServer]) {
    const MESSAGES: usize = 120;
    const RATE: f64 = 20.0;
    let shop = shop(servers[0]);
    let arrivals = Arrivals::default();
    let receiver = arrivals.receiver();
    let path = format!("/checkout/shop/{}/webhooks", shop.id);
    let created = servers[0].post(&path).bearer(&shop.token).json(&json!({
        "webhook_topic_id": 2, "callback_url": receiver.url, "rate_limit_per_s": 20
    }));
    assert_eq!(created.status, 201, "{}", created.text);
    let id = created.json()["data"]["id"].as_str().unwrap().to_string();
    for n in 0..MESSAGES {
        let sent = servers[n % servers.len()]
            .post(&format!("{path}/{id}/test"))
            .bearer(&shop.token)
            .call();
        assert_eq!(sent.status, 202, "{}", sent.text);
    }
    assert!(
        wait_until(Duration::from_secs(30), || arrivals.count() >= MESSAGES),
        "{} of {MESSAGES} delivered",
        arrivals.count()
    );
    // Nothing more comes: each message was delivered once.
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(arrivals.count(), MESSAGES);
    let (rate, least) = arrivals.measured();
    // The starts as the processes recorded them (the attempts' times, microseconds of the one
    // clock both share on this machine).
    let recorded: Vec<i64> = servers[0]
        .database()
        .texts("SELECT CAST(attempted_at AS TEXT) AS t FROM webhook_attempts ORDER BY attempted_at")
        .iter()
        .map(|text| text.parse().unwrap())
        .collect();
    assert_eq!(recorded.len(), MESSAGES, "one attempt each");
    let least_recorded = recorded
        .windows(2)
        .map(|pair| pair[1] - pair[0])
        .min()
        .unwrap();
    let recorded_rate =
        (MESSAGES - 1) as f64 / ((recorded[MESSAGES - 1] - recorded[0]) as f64 / 1e6);
    eprintln!(
        "{} process(es): {rate:.2} deliveries/s arrived, least gap {:.1} ms; recorded starts \
         {recorded_rate:.2}/s, least gap {:.1} ms",
        servers.len(),
        least.as_secs_f64() * 1000.0,
        least_recorded as f64 / 1000.0
    );
    // Never faster than the limit. Slower only by the dispatcher's lag on a busy machine: a
    // slot it wakes late for is not made up, the next comes an interval after it (CI, running
    // the suite's tests side by side on two cores, measured 17.5-17.9/s).
    assert!(
        (RATE * 0.75..=RATE * 1.1).contains(&rate),
        "{rate:.2}/s against a limit of {RATE}/s"
    );
    assert!(
        least_recorded >= 50_000,
        "two deliveries started {least_recorded} µs apart"
    );
    // Where they arrive, a gap is shorter than between the starts by however much later the
    // earlier request was read than the next: threads waiting for a core on the way. That is
    // well under 10 ms on a machine with cores to spare; on a busy one (CI runs the suite's
    // tests side by side on two) a few requests wait longer (CI saw 39.8 ms against a 50 ms
    // interval while the recorded starts kept to it). Deliveries sent in bursts would arrive
    // next to each other, so the gaps but the shortest 2% are held to half the interval.
    let mut gaps = arrivals.gaps();
    gaps.sort();
    let tolerated = gaps[gaps.len() * 2 / 100];
    assert!(
        tolerated >= Duration::from_millis(25),
        "deliveries arrived {tolerated:?} apart (least {least:?})"
    );
    // The deliveries log one attempt each: waiting for a turn is no attempt.
    let log = servers[0]
        .get(&format!("{path}/{id}/deliveries?limit=250"))
        .bearer(&shop.token)
        .call();
    assert_eq!(log.status, 200, "{}", log.text);
    let lines = log.json()["data"].as_array().unwrap().clone();
    assert_eq!(lines.len(), MESSAGES);
    for line in &lines {
        assert_eq!(line["attempts"], 1, "{line}");
    }
}

#[test]
fn two_processes_on_one_postgres_keep_to_a_webhooks_rate_limit() {
    let args = ["--allow-private-targets", "--webhook-workers", "3"];
    let first = MercerServer::start_with(TestDatabase::create(Backend::Postgres), &args);
    let second = MercerServer::start_with(TestDatabase::attach(first.database()), &args);
    deliveries_keep_to_the_limit(&[&first, &second]);
}

#[test]
fn one_process_on_sqlite_keeps_to_a_webhooks_rate_limit() {
    let args = ["--allow-private-targets", "--webhook-workers", "3"];
    let server = MercerServer::start_with(TestDatabase::create(Backend::Sqlite), &args);
    deliveries_keep_to_the_limit(&[&server]);
}
