//! The dunning policy end to end against the real `mercer` binary on SQLite and PostgreSQL
//! (docs/subscriptions.md, "Dunning policy"): Get and Set with their checks, the default the
//! shop's retry settings describe and how `mercer shop update` changes it; then three shops,
//! one per `at_max_retries`, each with a policy of two waits of a few seconds and a subscription
//! whose payments the platform simulator declines: the order is retried after each wait in
//! turn, and after the last the subscription is cancelled, paused, or moves on to its next date,
//! with its status log entries and webhooks, and the console's subscription page says so.

use std::time::Duration;

use mercer_domain::Timestamp;
use mercer_domain::access::shop::ShopIdentifier;
use mercer_domain::kernel::ids::SubscriptionId;
use mercer_domain::ports::Database;
use mercer_domain::subscriptions::repository::SubscriptionOrder;
use mercer_platform_sim::{DECLINED_TOKEN, RunningSimulator};
use mercer_tests::receiver::Receiver;
use mercer_tests::{Backend, MercerServer, TestDatabase, backend_tests, wait_until};
use serde_json::{Value, json};

use crate::console::{session, staff};
use crate::scheduler::{connect_orders, orders, start, subscription, wait_for};
use crate::subscriptions::{Api, TOPICS, id_of, ok, problems};

const DUNNING: &str = "/settings/dunning";

/// The topics each shop's receiver gets, at `/{outcome}/{topic}`.
const WATCHED: [&str; 5] = [
    "subscription_order_transaction_failed",
    "subscription_order_max_retries_reached",
    "subscription_cancelled",
    "subscription_paused",
    "subscription_skipped",
];

fn policy(intervals: Value, outcome: &str) -> Value {
    json!({"dunning": {"retry_intervals_s": intervals, "at_max_retries": outcome}})
}

/// Get, Set and their checks on the demo shop, and the retry settings of `mercer shop update`.
fn the_policy_is_read_checked_set_and_follows_the_retry_settings_until_set(backend: Backend) {
    let server = MercerServer::start(backend);
    let api = Api::demo(&server);
    assert_eq!(
        ok(api.get(DUNNING)),
        policy(json!([86400, 86400, 86400]), "cancel"),
        "a new shop's: its retry settings"
    );
    let update = |args: &[&str]| {
        let mut all = vec!["shop", "update", "--shop", api.shop.as_str()];
        all.extend_from_slice(args);
        let out = server.cli(&all);
        assert!(out.success, "{}", out.stderr);
        out.stderr
    };
    let said = update(&["--order-retry-interval", "60", "--order-max-retries", "2"]);
    assert!(
        said.contains("dunning policy, from the retry settings: 2 retries, after 60 s, 60 s"),
        "{said}"
    );
    // The API reads the shop's settings within 2 s of a change.
    let followed = wait_until(Duration::from_secs(5), || {
        ok(api.get(DUNNING)) == policy(json!([60, 60]), "cancel")
    });
    assert!(followed, "no policy set: the settings are the policy");

    // Every problem on its path, and nothing set.
    let refused = api.send(
        "PUT",
        DUNNING,
        &policy(json!([60, 0, "soon", 2_592_001, null]), "refund"),
    );
    assert_eq!(
        problems(&refused),
        [
            ("dunning.retry_intervals_s[1]".into(), "out_of_range".into()),
            ("dunning.retry_intervals_s[2]".into(), "invalid_type".into()),
            ("dunning.retry_intervals_s[3]".into(), "out_of_range".into()),
            ("dunning.retry_intervals_s[4]".into(), "invalid_type".into()),
            ("dunning.at_max_retries".into(), "invalid_value".into()),
        ]
    );
    assert_eq!(
        problems(&api.send("PUT", DUNNING, &json!({"dunning": {}}))),
        [
            ("dunning.retry_intervals_s".into(), "required".into()),
            ("dunning.at_max_retries".into(), "required".into()),
        ]
    );
    assert_eq!(
        problems(&api.send("PUT", DUNNING, &policy(json!(vec![60; 101]), "cancel"))),
        [(
            "dunning.retry_intervals_s".to_string(),
            "too_many".to_string()
        )]
    );
    assert_eq!(ok(api.get(DUNNING)), policy(json!([60, 60]), "cancel"));
    let not_json = server
        .request("PUT", &api.path(DUNNING))
        .bearer(&api.token)
        .header("Content-Type", "application/json")
        .send_bytes(Some(b"{\"dunning\":".to_vec()));
    assert_eq!(not_json.status, 400, "{}", not_json.text);

    // Numbers as text are read; the answer is the policy as stored.
    let set = ok(api.send(
        "PUT",
        DUNNING,
        &policy(json!([86400, "259200", 604800]), "skip_order"),
    ));
    let expected = policy(json!([86400, 259200, 604800]), "skip_order");
    assert_eq!(set, expected);
    assert_eq!(ok(api.get(DUNNING)), expected);
    // Another setting leaves a set policy as it is.
    update(&["--currency", "EUR"]);
    assert_eq!(ok(api.get(DUNNING)), expected);
    // The retry flags make a set policy uniform again, its outcome kept.
    let said = update(&["--order-max-retries", "1"]);
    assert!(
        said.contains("dunning policy, the shop's own: 1 retry, after 60 s; then the order"),
        "{said}"
    );
    assert_eq!(ok(api.get(DUNNING)), policy(json!([60]), "skip_order"));
    // No retry at all is a policy too.
    assert_eq!(
        ok(api.send("PUT", DUNNING, &policy(json!([]), "pause"))),
        policy(json!([]), "pause")
    );
}

/// One shop of the run: its API, the outcome its policy ends with, its declining subscription.
struct Dunned<'a> {
    api: Api<'a>,
    outcome: &'static str,
    intervals: [i64; 2],
    id: i64,
}

/// A shop (the demo shop first, then new ones) connected to the simulator, watched by the
/// receiver at `/{outcome}/{topic}`, with the policy `intervals` then `outcome`.
fn dunned_shop<'a>(
    server: &'a MercerServer,
    sim: &RunningSimulator,
    receiver: &Receiver,
    outcome: &'static str,
    intervals: [i64; 2],
) -> Dunned<'a> {
    let api = if outcome == "cancel" {
        Api::demo(server)
    } else {
        let created = server
            .cli(&[
                "shop",
                "create",
                "--domain",
                &format!("{}.dunning.test", outcome.replace('_', "-")),
            ])
            .values();
        let token = server
            .cli(&["token", "create", "--shop", &created[0], "--scope", "all"])
            .value();
        Api {
            server,
            shop: created[0].clone(),
            token,
        }
    };
    connect_orders(server, &api.shop, &api.token, sim);
    for topic in WATCHED {
        let id = TOPICS.iter().position(|t| *t == topic).unwrap() + 1;
        let created = api.send(
            "POST",
            "/webhooks/subscriptions",
            &json!({"webhook_subscription": {
                "callback_url": format!("{}/{outcome}/{topic}", receiver.url),
                "webhook_topic_id": id,
                "shared_secret": format!("secret-of-{topic}"),
            }}),
        );
        assert_eq!(created.status, 201, "{}", created.text);
    }
    let set = api.send("PUT", DUNNING, &policy(json!(intervals), outcome));
    assert_eq!(ok(set), policy(json!(intervals), outcome));
    Dunned {
        api,
        outcome,
        intervals,
        id: 0,
    }
}

/// The payloads received at `/{outcome}/{topic}` about subscription `id`.
fn payloads(receiver: &Receiver, outcome: &str, topic: &str, id: i64) -> Vec<Value> {
    let target = format!("/{outcome}/{topic}");
    receiver
        .received()
        .iter()
        .filter(|r| r.target == target)
        .map(|r| serde_json::from_slice::<Value>(&r.body).unwrap())
        .filter(|p| p["data"]["id"] == id)
        .collect()
}

/// The subscription's order attempts, oldest first, and its status log reasons with their
/// actors, oldest first, as stored.
fn stored(server: &MercerServer, shop: &str, id: i64) -> (Vec<SubscriptionOrder>, Vec<String>) {
    let store = server.database().open_store();
    let shop = ShopIdentifier::parse(shop).unwrap();
    store
        .read(|tx| {
            let shop = tx.shop_by_identifier(&shop)?.unwrap();
            let mut attempts = tx.orders_of_subscriptions(&[SubscriptionId(id)], 20)?;
            attempts.sort_by_key(|a| a.attempt);
            let logs = tx.status_logs_of_subscription(shop.id, SubscriptionId(id), 50)?;
            let logs = logs
                .iter()
                .rev()
                .map(|l| {
                    let actor = serde_json::to_value(&l.metadata.user).unwrap();
                    format!("{} by {}", l.reason, actor["type"].as_str().unwrap())
                })
                .collect();
            Ok((attempts, logs))
        })
        .unwrap()
}

fn micros(text: &Value) -> i64 {
    Timestamp::parse_rfc3339(text.as_str().unwrap())
        .unwrap()
        .as_micros()
}

/// Three shops, three outcomes, run at once: each declining subscription is tried three times
/// (its first attempt and a retry after each wait), then its shop's `at_max_retries` applies.
fn a_declined_order_walks_the_policy_then_is_cancelled_paused_or_skipped(backend: Backend) {
    let sim = RunningSimulator::start().unwrap();
    let receiver = Receiver::start();
    let server = start(TestDatabase::create_migrated(backend), &[]);
    // The cancelling shop waits 3 s first, so that `mercer subscriptions due` is asked while it
    // waits.
    let mut shops = vec![
        dunned_shop(&server, &sim, &receiver, "cancel", [3, 1]),
        dunned_shop(&server, &sim, &receiver, "pause", [1, 2]),
        dunned_shop(&server, &sim, &receiver, "skip_order", [2, 1]),
    ];
    let soon = Timestamp::now().plus_seconds(1).to_rfc3339();
    for shop in &mut shops {
        let body = subscription(
            &format!("{}@example.test", shop.outcome),
            json!({
                "subscription_status": "active",
                "next_order_datetime": soon,
                "payment_details": {"gateway_name": "test", "gateway_payment_id": DECLINED_TOKEN}
            }),
        );
        shop.id = id_of(&shop.api.create(&body));
    }

    let cancel = &shops[0];
    let waiting = wait_for(&cancel.api, cancel.id, 20, |s| s["current_retries"] == 1);
    assert_eq!(waiting["subscription_status"], "active");
    assert_eq!(waiting["last_failure_code"], "payment_declined");
    let due = server.cli(&["subscriptions", "due", "--shop", &cancel.api.shop]);
    assert!(
        due.stdout.contains("waiting: retry 1 at")
            && due
                .stdout
                .contains("(retry 1 of 2; after the last, the subscription is cancelled)"),
        "{}\n{}",
        due.stdout,
        due.stderr
    );

    let ended = [
        wait_for(&shops[0].api, shops[0].id, 30, |s| {
            s["subscription_status"] == "inactive"
        }),
        wait_for(&shops[1].api, shops[1].id, 30, |s| {
            s["subscription_status"] == "paused"
        }),
        wait_for(&shops[2].api, shops[2].id, 30, |s| {
            s["latest_status_log"]["reason"] == "order_skipped"
        }),
    ];
    for (shop, after) in shops.iter().zip(&ended) {
        let (attempts, logs) = stored(&server, &shop.api.shop, shop.id);
        // Three attempts of the one order, each retry due its wait after the failure before.
        assert_eq!(attempts.len(), 3, "{}: {attempts:?}", shop.outcome);
        for (retry, wait) in shop.intervals.iter().enumerate() {
            let (failed, next) = (&attempts[retry], &attempts[retry + 1]);
            assert_eq!(failed.status.as_str(), "failed");
            assert_eq!(
                next.due_at.as_micros() - failed.finished_at.unwrap().as_micros(),
                wait * 1_000_000,
                "{}: retry {}",
                shop.outcome,
                retry + 1
            );
        }
        let shop_orders = orders(&sim, &shop.api.shop);
        assert_eq!(shop_orders.len(), 1, "{}", shop.outcome);
        assert_eq!(shop_orders[0].payments.as_ref().unwrap().len(), 3);
        assert_eq!(after["last_failure_code"], "payment_declined");
        assert_eq!(after["next_processing_datetime"], Value::Null);
        let tail: Vec<&str> = logs[logs.len() - 2..].iter().map(String::as_str).collect();
        let expected_tail: [&str; 2] = match shop.outcome {
            "cancel" => [
                "order_processing by system",
                "max_retries_reached by system",
            ],
            "pause" => ["order_failed by system", "paused by system"],
            _ => ["order_failed by system", "order_skipped by system"],
        };
        assert_eq!(tail, expected_tail, "{}: {logs:?}", shop.outcome);
    }

    // What each outcome left.
    assert_eq!(ended[0]["current_retries"], 3);
    assert_eq!(ended[1]["current_retries"], 0, "a resume starts afresh");
    let skipped = &ended[2];
    assert_eq!(skipped["subscription_status"], "active");
    assert_eq!(skipped["current_retries"], 0);
    assert_eq!(skipped["orders_processed"], 0);
    let (failed_date, next_date) = (
        micros(&json!(soon)),
        micros(&skipped["next_order_datetime"]),
    );
    assert!(
        next_date > failed_date && next_date <= failed_date + 7 * 86_400_000_000,
        "the rule's next weekly date: {}",
        skipped["next_order_datetime"]
    );

    // Their webhooks: three failures each, one max_retries_reached saying what became of the
    // subscription, then the outcome's own topic (a cancel by retries has none but that one,
    // as before dunning policies: no `subscription_cancelled`).
    let own = [
        (
            "cancel",
            "subscription_order_max_retries_reached",
            "inactive",
        ),
        ("pause", "subscription_paused", "paused"),
        ("skip_order", "subscription_skipped", "active"),
    ];
    let outcome_topics = [
        "subscription_cancelled",
        "subscription_paused",
        "subscription_skipped",
    ];
    for (shop, (outcome, topic, status)) in shops.iter().zip(own) {
        let arrived = wait_until(Duration::from_secs(20), || {
            payloads(&receiver, outcome, topic, shop.id).len() == 1
        });
        assert!(arrived, "{outcome}: no {topic}");
        let failed = payloads(
            &receiver,
            outcome,
            "subscription_order_transaction_failed",
            shop.id,
        );
        assert_eq!(failed.len(), 3, "{outcome}");
        let reached = payloads(
            &receiver,
            outcome,
            "subscription_order_max_retries_reached",
            shop.id,
        );
        assert_eq!(reached.len(), 1, "{outcome}");
        assert_eq!(reached[0]["order"]["attempt"], 3);
        assert_eq!(reached[0]["data"]["subscription_status"], status);
        let sent = &payloads(&receiver, outcome, topic, shop.id)[0];
        assert_eq!(sent["data"]["subscription_status"], status, "{outcome}");
        assert_eq!(
            sent["data"]["latest_status_log"]["metadata"]["user"]["type"],
            "system"
        );
        // The other outcomes' topics are not sent.
        for other_topic in outcome_topics {
            if other_topic != topic {
                assert!(
                    payloads(&receiver, outcome, other_topic, shop.id).is_empty(),
                    "{outcome} sent {other_topic}"
                );
            }
        }
    }
    // The console's subscription page: where the order is in the policy, and the policy.
    for (shop, retries, policy) in [
        (
            &shops[0],
            "all 2 used",
            "2 retries, after 3 s, 1 s; then the subscription is cancelled",
        ),
        (
            &shops[2],
            "none (2 allowed)",
            "2 retries, after 2 s, 1 s; then the order is skipped and the next one scheduled",
        ),
    ] {
        let email = format!("ops@{}.test", shop.outcome.replace('_', "-"));
        staff(&server, &shop.api.shop, &email);
        let (cookie, _) = session(&server, &shop.api.shop, &email);
        let page = server
            .get(&format!("/console/subscriptions/{}", shop.id))
            .header("Cookie", &cookie)
            .call();
        assert_eq!(page.status, 200, "{}", page.text);
        assert!(
            page.text
                .contains(&format!("<span id=\"retries\">{retries}</span>")),
            "{}",
            page.text
        );
        assert!(page.text.contains(policy), "{}", page.text);
    }
}

backend_tests!(
    the_policy_is_read_checked_set_and_follows_the_retry_settings_until_set,
    a_declined_order_walks_the_policy_then_is_cancelled_paused_or_skipped,
);
