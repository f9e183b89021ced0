//! Cancellation reasons and pause until a date, end to end against the real `mercer` binary on
//! SQLite and PostgreSQL (docs/subscriptions.md): the shop's reasons set and checked, a cancel
//! with a reason and a comment kept on its status log entry and sent in
//! `subscription_cancelled`; a subscription paused until a date resumed by the scheduler on
//! that day in the shop's zone (the binary restarted with its clock there), once, by `system`,
//! with one `subscription_resumed`.

use std::time::Duration;

use mercer_domain::Timestamp;
use mercer_domain::access::shop::ShopIdentifier;
use mercer_domain::kernel::ids::SubscriptionId;
use mercer_domain::ports::Database;
use mercer_tests::receiver::Receiver;
use mercer_tests::{Backend, TestDatabase, backend_tests, wait_until};
use serde_json::{Value, json};

use crate::scheduler::start;
use crate::subscriptions::{Api, TOPICS, id_of, ok, problems, running_rule, seed_body};

/// A webhook subscription of `api`'s shop for `topic`, at the receiver's `/topic/{topic}`.
fn subscribe(api: &Api<'_>, receiver: &Receiver, topic: &str) {
    let id = TOPICS.iter().position(|t| *t == topic).unwrap() + 1;
    let created = api.send(
        "POST",
        "/webhooks/subscriptions",
        &json!({"webhook_subscription": {
            "callback_url": format!("{}/topic/{topic}", receiver.url),
            "webhook_topic_id": id,
            "shared_secret": format!("secret-of-{topic}"),
        }}),
    );
    assert_eq!(created.status, 201, "{}", created.text);
}

/// The payloads received for `topic`, once `count` of them came (waits up to 30 s).
fn payloads(receiver: &Receiver, topic: &str, count: usize) -> Vec<Value> {
    let target = format!("/topic/{topic}");
    let read = || -> Vec<Value> {
        receiver
            .received()
            .iter()
            .filter(|r| r.target == target)
            .map(|r| serde_json::from_slice(&r.body).unwrap())
            .collect()
    };
    wait_until(Duration::from_secs(30), || read().len() >= count);
    read()
}

fn cancel_reasons_are_set_checked_and_kept_with_the_cancellation(backend: Backend) {
    let server = start(TestDatabase::create_migrated(backend), &[]);
    let api = Api::demo(&server);
    let receiver = Receiver::start();
    subscribe(&api, &receiver, "subscription_cancelled");
    let reasons = "/settings/cancellation_reasons";
    assert_eq!(
        ok(api.get(reasons)),
        json!({"cancellation_reasons": []}),
        "a new shop has none"
    );

    // Every problem on its path, and nothing set.
    let refused = api.send(
        "PUT",
        reasons,
        &json!({"cancellation_reasons": [
            {"code": "moving", "label": "I am moving"},
            {"code": "Too Expensive", "label": "x"},
            {"code": "moving", "label": ""}]}),
    );
    assert_eq!(
        problems(&refused),
        [
            (
                "cancellation_reasons[1].code".to_string(),
                "invalid_value".to_string()
            ),
            (
                "cancellation_reasons[2].label".to_string(),
                "required".to_string()
            ),
            (
                "cancellation_reasons[2].code".to_string(),
                "duplicate".to_string()
            ),
        ]
    );
    let too_many: Vec<Value> = (0..51)
        .map(|n| json!({"code": format!("r{n}"), "label": "A reason"}))
        .collect();
    assert_eq!(
        problems(&api.send("PUT", reasons, &json!({"cancellation_reasons": too_many}))),
        [("cancellation_reasons".to_string(), "too_many".to_string())]
    );
    assert_eq!(ok(api.get(reasons)), json!({"cancellation_reasons": []}));

    let list = json!({"cancellation_reasons": [
        {"code": "too_expensive", "label": "It costs too much"},
        {"code": "moving", "label": "I am moving"}]});
    assert_eq!(ok(api.send("PUT", reasons, &list)), list);
    assert_eq!(ok(api.get(reasons)), list);

    let first = id_of(&api.create(&seed_body("first@example.test", &running_rule())));
    let second = id_of(&api.create(&seed_body("second@example.test", &running_rule())));
    let cancel = |id: i64| api.path(&format!("/subscriptions/{id}/cancel"));

    // An unknown reason, a comment too long: 422 on the field, and nothing changes.
    assert_eq!(
        problems(&api.send(
            "POST",
            &format!("/subscriptions/{first}/cancel"),
            &json!({"reason": "bored"})
        )),
        [("reason".to_string(), "invalid_value".to_string())]
    );
    assert_eq!(
        problems(&api.send(
            "POST",
            &format!("/subscriptions/{first}/cancel"),
            &json!({"reason": "moving", "comment": "x".repeat(1001)})
        )),
        [("comment".to_string(), "too_long".to_string())]
    );
    assert_eq!(api.subscription(first)["subscription_status"], "active");

    // No body at all, as Cancel took before: cancelled, without a reason.
    let bare = server.post(&cancel(second)).bearer(&api.token).call();
    let bare = ok(bare)["subscription"].clone();
    assert_eq!(bare["subscription_status"], "inactive");
    let metadata = &bare["latest_status_log"]["metadata"];
    assert_eq!(metadata["user"]["type"], "api");
    assert!(
        metadata.get("cancellation").is_none(),
        "no cancellation without a reason or a comment: {metadata}"
    );
    // A body that is not JSON is still refused.
    let text = server
        .post(&cancel(first))
        .bearer(&api.token)
        .header("Content-Type", "text/plain")
        .send_bytes(Some(b"moving".to_vec()));
    assert_eq!(text.status, 415, "{}", text.text);

    let cancelled = ok(api.send(
        "POST",
        &format!("/subscriptions/{first}/cancel"),
        &json!({"reason": "moving", "comment": "Off to Lisbon for a year"}),
    ))["subscription"]
        .clone();
    assert_eq!(cancelled["subscription_status"], "inactive");
    let log = &cancelled["latest_status_log"];
    assert_eq!(log["reason"], "cancelled");
    assert_eq!(
        log["metadata"]["cancellation"],
        json!({"reason": "moving", "comment": "Off to Lisbon for a year"})
    );
    // Kept: read back, and in the stored status log.
    assert_eq!(api.subscription(first)["latest_status_log"], *log);

    let sent = payloads(&receiver, "subscription_cancelled", 2);
    let of = |id: i64| {
        sent.iter()
            .find(|p| p["data"]["id"] == id)
            .unwrap_or_else(|| panic!("no subscription_cancelled for {id}: {sent:?}"))
    };
    assert_eq!(
        of(first)["cancellation"],
        json!({"reason": "moving", "comment": "Off to Lisbon for a year"})
    );
    assert_eq!(
        of(first)["data"]["latest_status_log"]["metadata"]["cancellation"]["reason"],
        "moving"
    );
    assert_eq!(
        of(second)["cancellation"],
        json!({"reason": null, "comment": null})
    );
    assert_eq!(sent.len(), 2, "one message per cancel: {sent:?}");
}

/// A subscription paused until 4 March 2026 in New York comes back when that day begins there
/// (05:00Z): the binary is restarted with its clock just before, and its scheduler resumes it
/// once.
fn a_pause_until_a_date_is_resumed_by_the_scheduler_on_that_day_once(backend: Backend) {
    let server = start(
        TestDatabase::create_migrated(backend),
        &["--clock-start", "2026-03-02T10:00:00Z"],
    );
    let api = Api::demo(&server);
    let receiver = Receiver::start();
    let updated = server.cli(&[
        "shop",
        "update",
        "--shop",
        &api.shop,
        "--timezone",
        "America/New_York",
    ]);
    assert!(updated.success, "{}", updated.stderr);
    subscribe(&api, &receiver, "subscription_resumed");
    let mut body = seed_body("paused@example.test", "");
    body["subscription"]["order_rrule"] =
        json!("DTSTART;TZID=America/New_York:20260302T090000\nRRULE:FREQ=WEEKLY");
    body["subscription"]["subscription_status"] = json!("active");
    let sub = api.create(&body);
    let id = id_of(&sub);
    assert_eq!(sub["next_order_datetime"], "2026-03-02T14:00:00Z");
    assert_eq!(sub["resume_on"], Value::Null);

    let pause = |day: &str| {
        api.send(
            "POST",
            &format!("/subscriptions/{id}/pause"),
            &json!({ "resume_on": day }),
        )
    };
    // 05:00 on 2 March in New York: today is refused, a day that is not a date too.
    assert_eq!(
        problems(&pause("2026-03-02")),
        [("resume_on".to_string(), "out_of_range".to_string())]
    );
    assert_eq!(
        problems(&pause("4 March")),
        [("resume_on".to_string(), "invalid_date".to_string())]
    );
    let paused = ok(pause("2026-03-04"))["subscription"].clone();
    assert_eq!(paused["subscription_status"], "paused");
    assert_eq!(paused["resume_on"], "2026-03-04");
    assert_eq!(api.subscription(id)["resume_on"], "2026-03-04");

    let due = server.cli(&[
        "subscriptions",
        "due",
        "--shop",
        &api.shop,
        "--at",
        "2026-03-04T05:00:00Z",
    ]);
    assert!(
        due.success && due.stdout.contains("resumes: paused until 2026-03-04"),
        "{} {}",
        due.stdout,
        due.stderr
    );
    // Not before the day begins in New York.
    std::thread::sleep(Duration::from_millis(600));
    assert_eq!(api.subscription(id)["subscription_status"], "paused");

    let (shop, token) = (api.shop.clone(), api.token.clone());
    drop(api);
    let server = start(
        server.into_database(),
        &["--clock-start", "2026-03-04T04:59:58Z"],
    );
    let api = Api {
        server: &server,
        shop,
        token,
    };
    let resumed = wait_until(Duration::from_secs(30), || {
        api.subscription(id)["subscription_status"] == "active"
    });
    assert!(resumed, "not resumed; the log:\n{}", server.log());
    let after = api.subscription(id);
    assert_eq!(after["resume_on"], Value::Null);
    // As Resume: the order of 2 March is past, the next is 9 March 09:00 in New York.
    assert_eq!(after["next_order_datetime"], "2026-03-09T13:00:00Z");
    let log = &after["latest_status_log"];
    assert_eq!(log["reason"], "resumed");
    assert_eq!(
        log["metadata"]["user"],
        json!({"type": "system", "id": 0, "name": "Mercer"})
    );
    let changed = Timestamp::parse_rfc3339(after["status_changed_at"].as_str().unwrap()).unwrap();
    assert!(
        changed >= Timestamp::parse_rfc3339("2026-03-04T05:00:00Z").unwrap(),
        "resumed at {changed}, before the day began"
    );

    // Once: later runs of the scheduler (every 200 ms) find nothing more to do.
    std::thread::sleep(Duration::from_secs(2));
    let store = server.database().open_store();
    let shop = ShopIdentifier::parse(&api.shop).unwrap();
    let logs = store
        .read(|tx| {
            let shop = tx.shop_by_identifier(&shop)?.unwrap();
            Ok(tx.status_logs_of_subscription(shop.id, SubscriptionId(id), 20)?)
        })
        .unwrap();
    let reasons: Vec<&str> = logs.iter().rev().map(|l| l.reason.as_str()).collect();
    assert_eq!(reasons, ["created", "paused", "resumed"]);
    let sent = payloads(&receiver, "subscription_resumed", 1);
    std::thread::sleep(Duration::from_secs(1));
    let sent_later = payloads(&receiver, "subscription_resumed", 1);
    assert_eq!((sent.len(), sent_later.len()), (1, 1), "{sent_later:?}");
    assert_eq!(sent[0]["data"]["id"], id);
    assert_eq!(sent[0]["data"]["subscription_status"], "active");
    assert_eq!(
        sent[0]["data"]["latest_status_log"]["metadata"]["user"]["type"],
        "system"
    );
}

backend_tests!(
    cancel_reasons_are_set_checked_and_kept_with_the_cancellation,
    a_pause_until_a_date_is_resumed_by_the_scheduler_on_that_day_once,
);
