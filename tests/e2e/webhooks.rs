//! The webhook engine end to end: checkout webhooks registered over HTTP,
//! test deliveries to real local receivers, retries, disabling, crashes, and two processes.

use std::time::Duration;

use mercer_domain::access::shop::ShopIdentifier;
use mercer_domain::ports::Database;
use mercer_domain::webhooks::{
    DeliveryAttempt, MessageStatus, NewWebhookEndpoint, WebhookKind, WebhookMessage,
};
use mercer_domain::{DomainError, Timestamp};
use mercer_tests::receiver::{Receiver, Reply};
use mercer_tests::verifiers::{Verifier, http_signature, replay, standard_webhooks};
use mercer_tests::{Backend, MercerServer, TestDatabase, backend_tests, wait_until};
use serde_json::{Value, json};

const SECRET: &str = "integration-secret-for-webhooks";
/// Fast retries, so tests of retrying take milliseconds.
const FAST: &[&str] = &[
    "--allow-private-targets",
    "--webhook-retry-schedule",
    "0s,100ms,100ms,100ms,100ms,100ms",
];

pub(crate) struct Shop {
    pub(crate) id: String,
    pub(crate) token: String,
}

pub(crate) fn shop(server: &MercerServer) -> Shop {
    let demo = server.demo().clone();
    let configured = server
        .post(&format!("/checkout/shop/{}/integration/config", demo.shop))
        .bearer(&demo.token)
        .json(&json!({ "shared_secret": SECRET }));
    assert_eq!(configured.status, 200, "{}", configured.text);
    Shop {
        id: demo.shop,
        token: demo.token,
    }
}

fn webhooks_path(shop: &Shop) -> String {
    format!("/checkout/shop/{}/webhooks", shop.id)
}

pub(crate) fn create(server: &MercerServer, shop: &Shop, topic: i64, url: &str) -> Value {
    let answer = server
        .post(&webhooks_path(shop))
        .bearer(&shop.token)
        .json(&json!({ "webhook_topic_id": topic, "callback_url": url }));
    assert_eq!(answer.status, 201, "{}", answer.text);
    answer.json()["data"].clone()
}

pub(crate) fn send_test(server: &MercerServer, shop: &Shop, id: &str) -> String {
    let answer = server
        .post(&format!("{}/{id}/test", webhooks_path(shop)))
        .bearer(&shop.token)
        .call();
    assert_eq!(answer.status, 202, "{}", answer.text);
    answer.json()["data"]["message_id"]
        .as_str()
        .unwrap()
        .to_string()
}

/// Waits (up to `timeout`) for the message to be delivered, and gives it back with its attempts.
fn delivered(
    store: &mercer_store::Store,
    message_id: &str,
    timeout: Duration,
) -> (WebhookMessage, Vec<DeliveryAttempt>) {
    let read = || {
        store
            .read(|tx| Ok(tx.webhook_message(message_id)?))
            .unwrap()
    };
    let done = wait_until(timeout, || {
        read().is_some_and(|m| m.status == MessageStatus::Delivered)
    });
    assert!(done, "message {message_id} not delivered in {timeout:?}");
    let message = read().unwrap();
    let attempts = store
        .read(|tx| Ok(tx.webhook_attempts(message.id)?))
        .unwrap();
    (message, attempts)
}

/// Webhooks are registered at loopback addresses only (nothing listens on port 9): this server
/// allows private targets; the guard is checked on a second one that keeps it.
fn checkout_webhooks_are_registered_and_checked(backend: Backend) {
    let server = MercerServer::start_with(
        TestDatabase::create_migrated(backend),
        &["--allow-private-targets"],
    );
    let demo = server.demo().clone();
    let early = Shop {
        id: demo.shop.clone(),
        token: demo.token.clone(),
    };
    server
        .post(&webhooks_path(&early))
        .bearer(&early.token)
        .json(&json!({ "webhook_topic_id": 1, "callback_url": "https://hooks.example.test/a" }))
        .assert_error(422, "integration.not_configured");
    let shop = shop(&server);
    let topics = server
        .get(&format!("{}/topics", webhooks_path(&shop)))
        .bearer(&shop.token)
        .call()
        .json();
    // Each with the JSON Schema of its payload: the catalogue's, which the test receiver
    // checks every delivery against.
    let expected: Vec<Value> = mercer_domain::checkout::payloads::Topic::ALL
        .into_iter()
        .map(|topic| {
            let schema = mercer_domain::checkout::payloads::payload_schema(topic);
            let served = mercer_tests::receiver::topic_schemas().get(topic.as_str());
            assert_eq!(Some(&schema), served);
            json!({ "webhook_topic_id": topic.id(), "webhook_topic_name": topic.as_str(),
                    "schema": schema })
        })
        .collect();
    assert_eq!(topics["data"], Value::Array(expected));
    assert_eq!(topics["data"][0]["webhook_topic_name"], "order/processed");
    assert_eq!(topics["data"][6]["webhook_topic_name"], "webhook/disabled");

    let post = |body: Value| {
        server
            .post(&webhooks_path(&shop))
            .bearer(&shop.token)
            .json(&body)
    };
    let field = |answer: mercer_tests::Answer| {
        answer.assert_error(422, "validation.failed")[0]["field"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert_eq!(
        field(post(
            json!({ "webhook_topic_id": 9, "callback_url": "https://hooks.example.test/a" })
        )),
        "webhook_topic_id"
    );
    assert_eq!(
        field(post(
            json!({ "webhook_topic_id": 1, "callback_url": "ftp://hooks.example.test/a" })
        )),
        "callback_url"
    );
    assert_eq!(
        field(post(json!({ "webhook_topic_id": 1 }))),
        "callback_url"
    );
    let guarded = MercerServer::in_process(backend);
    let guarded_shop = self::shop(&guarded);
    for private in [
        "http://127.0.0.1:9/hook",
        "http://localhost/hook",
        "http://10.0.0.7/hook",
        "http://169.254.169.254/latest",
        "http://[::1]/hook",
    ] {
        let entries = guarded
            .post(&webhooks_path(&guarded_shop))
            .bearer(&guarded_shop.token)
            .json(&json!({ "webhook_topic_id": 1, "callback_url": private }))
            .assert_error(422, "validation.failed");
        assert_eq!(entries[0]["sub_type"], "address_not_allowed", "{private}");
    }
    // PATCH is guarded as creation is: a webhook put in place at loopback behind the guard's
    // back (straight into its database) cannot be moved to a private address.
    let identifier = ShopIdentifier::parse(&guarded_shop.id).unwrap();
    let public_id = guarded
        .database()
        .open_store()
        .write(move |tx| {
            let shop = tx
                .shop_by_identifier(&identifier)?
                .ok_or(DomainError::not_found("shop"))?;
            let endpoint = tx.insert_webhook_endpoint(&NewWebhookEndpoint {
                shop_id: shop.id,
                kind: WebhookKind::Checkout,
                topic: "order/created".into(),
                callback_url: "http://127.0.0.1:9/hook".into(),
                secret: None,
                created_at: Timestamp::now(),
            })?;
            Ok(endpoint.public_id)
        })
        .unwrap();
    for private in ["http://10.0.0.7/hook", "http://[::1]/hook"] {
        let entries = guarded
            .request(
                "PATCH",
                &format!("{}/{public_id}", webhooks_path(&guarded_shop)),
            )
            .bearer(&guarded_shop.token)
            .json(&json!({ "callback_url": private }))
            .assert_error(422, "validation.failed");
        assert_eq!(entries[0]["field"], "callback_url", "{private}");
        assert_eq!(entries[0]["sub_type"], "address_not_allowed", "{private}");
    }

    let created = create(&server, &shop, 2, "http://127.0.0.1:9/orders");
    assert_eq!(created["webhook_topic_name"], "order/created");
    assert_eq!(created["id"].as_str().unwrap().len(), 32);
    for key in [
        "id",
        "webhook_topic_id",
        "webhook_topic_name",
        "callback_url",
        "created_at",
        "updated_at",
    ] {
        assert!(created.get(key).is_some(), "{key}");
    }
    let id = created["id"].as_str().unwrap();
    let listed = server
        .get(&webhooks_path(&shop))
        .bearer(&shop.token)
        .call()
        .json();
    assert_eq!(listed["data"].as_array().unwrap().len(), 1);
    let path = format!("{}/{id}", webhooks_path(&shop));
    let updated = server
        .request("PATCH", &path)
        .bearer(&shop.token)
        .json(&json!({ "callback_url": "http://127.0.0.1:9/v2" }));
    assert_eq!(
        updated.json()["data"]["callback_url"],
        "http://127.0.0.1:9/v2"
    );
    server
        .request("PATCH", &path)
        .bearer(&shop.token)
        .json(&json!({ "callback_url": "ftp://127.0.0.1:9/x" }))
        .assert_error(422, "validation.failed");
    assert_eq!(
        server
            .request("DELETE", &path)
            .bearer(&shop.token)
            .call()
            .status,
        204
    );
    server
        .request("DELETE", &path)
        .bearer(&shop.token)
        .call()
        .assert_error(404, "resource.not_found");
    assert!(
        server
            .get(&webhooks_path(&shop))
            .bearer(&shop.token)
            .call()
            .json()["data"]
            .as_array()
            .unwrap()
            .is_empty()
    );
}

fn a_receiver_that_fails_three_times_gets_the_same_message(backend: Backend) {
    let server = MercerServer::start_with(TestDatabase::create(backend), FAST);
    let shop = shop(&server);
    let receiver = Receiver::start();
    receiver.script(&[Reply::status(500), Reply::status(502), Reply::status(503)]);
    let webhook = create(
        &server,
        &shop,
        1,
        &format!("{}/hooks/checkout?source=mercer", receiver.url),
    );
    let message_id = send_test(&server, &shop, webhook["id"].as_str().unwrap());
    assert!(
        wait_until(Duration::from_secs(20), || receiver.received().len() >= 4),
        "{} requests",
        receiver.received().len()
    );
    let received = receiver.received();
    assert!(
        received
            .iter()
            .all(|r| r.header("webhook-id") == Some(message_id.as_str())),
        "one webhook-id on every attempt"
    );
    let last = received.last().unwrap();
    assert_eq!(last.target, "/hooks/checkout?source=mercer");
    assert_eq!(last.header("X-Svc-Topic"), Some("order/processed"));
    let body: Value = serde_json::from_slice(&last.body).unwrap();
    assert_eq!(body["test"], true);
    // Signatures, checked by others' code (npm http-signature, PyPI standardwebhooks) on the
    // very request the receiver got: Mercer's own verifiers would agree with its own mistakes.
    assert_eq!(
        replay(&http_signature(SECRET), last),
        (200, "verified".to_string()),
        "the Signature header"
    );
    assert_eq!(
        replay(&standard_webhooks(SECRET), last),
        (200, "verified".to_string()),
        "the webhook-* headers"
    );

    let store = server.database().open_store();
    let (message, attempts) = delivered(&store, &message_id, Duration::from_secs(5));
    assert_eq!(message.attempts, 4);
    let statuses: Vec<Option<u16>> = attempts.iter().map(|a| a.outcome.status).collect();
    assert_eq!(statuses, [Some(500), Some(502), Some(503), Some(200)]);
    assert!(
        attempts
            .iter()
            .all(|a| a.outcome.response.as_deref() == Some("ok"))
    );
    assert!(
        attempts
            .windows(2)
            .all(|w| w[0].attempted_at < w[1].attempted_at)
    );
}

fn gone_410_disables_the_webhook(backend: Backend) {
    let server = MercerServer::start_with(TestDatabase::create(backend), FAST);
    let shop = shop(&server);
    let receiver = Receiver::start();
    receiver.otherwise(Reply::status(410));
    let webhook = create(&server, &shop, 5, &receiver.url);
    let id = webhook["id"].as_str().unwrap().to_string();
    send_test(&server, &shop, &id);
    let disabled = wait_until(Duration::from_secs(10), || {
        server
            .get(&webhooks_path(&shop))
            .bearer(&shop.token)
            .call()
            .json()["data"][0]["disabled_at"]
            .is_string()
    });
    assert!(disabled, "a 410 disables the webhook");
    assert_eq!(receiver.received().len(), 1, "no retry after a 410");
    let listed = server
        .get(&webhooks_path(&shop))
        .bearer(&shop.token)
        .call()
        .json();
    assert!(
        listed["data"][0]["disabled_reason"]
            .as_str()
            .unwrap()
            .contains("410")
    );
    server
        .post(&format!("{}/{id}/test", webhooks_path(&shop)))
        .bearer(&shop.token)
        .call()
        .assert_error(422, "webhook.disabled");
}

fn a_slow_receiver_times_out_and_is_retried(backend: Backend) {
    let mut args = FAST.to_vec();
    args.extend(["--webhook-timeout", "1"]);
    let server = MercerServer::start_with(TestDatabase::create(backend), &args);
    let shop = shop(&server);
    let receiver = Receiver::start();
    receiver.script(&[Reply {
        status: 200,
        delay: Duration::from_millis(2500),
        headers: &[],
    }]);
    let webhook = create(&server, &shop, 3, &receiver.url);
    let message_id = send_test(&server, &shop, webhook["id"].as_str().unwrap());
    let store = server.database().open_store();
    let (_, attempts) = delivered(&store, &message_id, Duration::from_secs(20));
    assert_eq!(attempts.len(), 2);
    assert_eq!(attempts[0].outcome.status, None);
    assert!(
        attempts[0]
            .outcome
            .error
            .as_deref()
            .unwrap_or_default()
            .contains("no answer within"),
        "{:?}",
        attempts[0]
    );
    assert!(attempts[0].outcome.latency < Duration::from_millis(2000));
    assert_eq!(attempts[1].outcome.status, Some(200));
}

fn private_callbacks_are_refused_when_sending_too(backend: Backend) {
    // Registered while the flag allowed it, then sent by a process without the flag.
    let first = MercerServer::start_with(TestDatabase::create(backend), FAST);
    let shop = shop(&first);
    let receiver = Receiver::start();
    let webhook = create(&first, &shop, 1, &receiver.url);
    let database = first.into_database();
    let strict = MercerServer::start_with(database, &["--webhook-retry-schedule", "0s,100ms"]);
    let message_id = send_test(&strict, &shop, webhook["id"].as_str().unwrap());
    let store = strict.database().open_store();
    let ended = wait_until(Duration::from_secs(10), || {
        store
            .read(|tx| Ok(tx.webhook_message(&message_id)?))
            .unwrap()
            .is_some_and(|m| m.status == MessageStatus::Failed)
    });
    assert!(ended);
    let message = store
        .read(|tx| Ok(tx.webhook_message(&message_id)?))
        .unwrap()
        .unwrap();
    let attempts = store
        .read(|tx| Ok(tx.webhook_attempts(message.id)?))
        .unwrap();
    assert!(
        attempts.iter().all(|a| a
            .outcome
            .error
            .as_deref()
            .unwrap_or_default()
            .contains("loopback")),
        "{attempts:?}"
    );
    assert!(
        receiver.received().is_empty(),
        "nothing reached the private address"
    );
}

fn a_killed_process_loses_no_message(backend: Backend) {
    let args = [
        "--allow-private-targets",
        "--webhook-retry-schedule",
        "0s,100ms",
        "--webhook-lease",
        "2",
        "--webhook-workers",
        "2",
    ];
    let server = MercerServer::start_with(TestDatabase::create(backend), &args);
    let shop = shop(&server);
    let receiver = Receiver::start();
    receiver.otherwise(Reply {
        status: 200,
        delay: Duration::from_millis(20),
        headers: &[],
    });
    let webhook = create(&server, &shop, 2, &receiver.url);
    let id = webhook["id"].as_str().unwrap().to_string();
    let sent: Vec<String> = (0..150).map(|_| send_test(&server, &shop, &id)).collect();
    // Kill it while it is delivering: some messages are claimed and not yet recorded.
    assert!(wait_until(Duration::from_secs(10), || receiver
        .received()
        .len()
        >= 20));
    server.signal("KILL");
    let database = server.into_database();
    let restarted = MercerServer::start_with(database, &args);
    let all_received = wait_until(Duration::from_secs(60), || {
        let got: std::collections::HashSet<String> = receiver
            .received()
            .iter()
            .filter_map(|r| r.header("webhook-id").map(str::to_string))
            .collect();
        sent.iter().all(|id| got.contains(id))
    });
    assert!(
        all_received,
        "every message enqueued before the crash is delivered after the restart"
    );
    let store = restarted.database().open_store();
    let delivered = wait_until(Duration::from_secs(10), || {
        sent.iter().all(|id| {
            store
                .read(|tx| Ok(tx.webhook_message(id)?))
                .unwrap()
                .is_some_and(|m| m.status == MessageStatus::Delivered)
        })
    });
    assert!(delivered);
}

/// A receiver's `Retry-After` decides when the next attempt comes: the schedule here would wait
/// 30 s (24 s at the least, with jitter), the receiver asks for 2 s.
fn a_receivers_retry_after_is_honoured(backend: Backend) {
    let args = [
        "--allow-private-targets",
        "--webhook-retry-schedule",
        "0s,30s,30s",
    ];
    let server = MercerServer::start_with(TestDatabase::create(backend), &args);
    let shop = shop(&server);
    let receiver = Receiver::start();
    receiver.script(&[Reply {
        headers: &[("Retry-After", "2")],
        ..Reply::status(503)
    }]);
    let webhook = create(&server, &shop, 2, &receiver.url);
    let message_id = send_test(&server, &shop, webhook["id"].as_str().unwrap());
    assert!(
        wait_until(Duration::from_secs(15), || receiver.received().len() >= 2),
        "the retry came when the receiver asked, not 30 s later: {} request(s)",
        receiver.received().len()
    );
    let store = server.database().open_store();
    let (_, attempts) = delivered(&store, &message_id, Duration::from_secs(5));
    assert_eq!(attempts.len(), 2, "{attempts:?}");
    assert_eq!(attempts[0].outcome.status, Some(503));
    assert_eq!(
        attempts[0].outcome.retry_after,
        Some(Duration::from_secs(2)),
        "the header is recorded with the attempt"
    );
    // Not sooner than asked either (the attempt times are the dispatcher's own clock).
    let gap = attempts[1].attempted_at.as_micros() - attempts[0].attempted_at.as_micros();
    assert!(
        (2_000_000..10_000_000).contains(&gap),
        "the second attempt came {gap} µs after the first"
    );
}

fn metrics_are_exposed(backend: Backend) {
    let server = MercerServer::start_with(TestDatabase::create(backend), FAST);
    let shop = shop(&server);
    let receiver = Receiver::start();
    let webhook = create(&server, &shop, 1, &receiver.url);
    send_test(&server, &shop, webhook["id"].as_str().unwrap());
    assert!(wait_until(Duration::from_secs(10), || !receiver
        .received()
        .is_empty()));
    let text = wait_until(Duration::from_secs(5), || {
        server
            .get("/metrics")
            .call()
            .text
            .contains("mercer_webhook_deliveries_total")
    });
    assert!(text);
    let metrics = server.get("/metrics").call();
    assert_eq!(metrics.status, 200);
    assert!(
        metrics
            .header("Content-Type")
            .unwrap()
            .starts_with("text/plain")
    );
    for needle in [
        "mercer_webhook_deliveries_total{outcome=\"delivered\"} 1",
        "mercer_webhook_queue_depth{state=\"due\"}",
        "mercer_webhook_queue_depth{state=\"delayed\"}",
        "mercer_webhook_endpoints_disabled 0",
        "mercer_webhook_attempt_seconds",
        "mercer_http_requests_total{method=\"POST\",route=\"/checkout/shop/{shop}/webhooks\",status=\"201\"} 1",
        "mercer_http_request_seconds",
    ] {
        assert!(
            metrics.text.contains(needle),
            "{needle} in:\n{}",
            metrics.text
        );
    }
}

fn the_delivery_log_resend_recover_and_enable(backend: Backend) {
    let server = MercerServer::start_with(
        TestDatabase::create(backend),
        &["--allow-private-targets", "--webhook-retry-schedule", "0s"],
    );
    let shop = shop(&server);
    let receiver = Receiver::start();
    let webhook = create(&server, &shop, 1, &receiver.url);
    let id = webhook["id"].as_str().unwrap().to_string();
    let base = format!("{}/{id}", webhooks_path(&shop));

    // One attempt only: a 500 fails the message for good.
    receiver.script(&[Reply::status(500)]);
    let failed = send_test(&server, &shop, &id);
    let store = server.database().open_store();
    let status_of = |message_id: &str| {
        store
            .read(|tx| Ok(tx.webhook_message(message_id)?))
            .unwrap()
            .map(|m| m.status)
    };
    assert!(wait_until(Duration::from_secs(10), || status_of(&failed)
        == Some(MessageStatus::Failed)));
    let log = server
        .get(&format!("{base}/deliveries"))
        .bearer(&shop.token)
        .call()
        .json();
    assert_eq!(log["data"][0]["message_id"], failed.as_str());
    assert_eq!(log["data"][0]["status"], "failed");
    assert_eq!(log["data"][0]["last_attempt"]["status"], 500);
    let answer = server
        .get(&format!("{base}/deliveries/{failed}"))
        .bearer(&shop.token)
        .call();
    // The list of attempts takes the count's place: one `attempts` key, not two.
    assert_eq!(
        answer.text.matches("\"attempts\":").count(),
        1,
        "{}",
        answer.text
    );
    let one = answer.json();
    assert_eq!(one["data"]["payload"]["test"], true);
    assert_eq!(one["data"]["attempts"].as_array().unwrap().len(), 1);
    assert_eq!(one["data"]["attempts"][0]["response"], "ok");
    server
        .get(&format!("{base}/deliveries/msg_unknown"))
        .bearer(&shop.token)
        .call()
        .assert_error(404, "resource.not_found");

    // Resend: the same webhook-id, one more attempt.
    let resent = server
        .post(&format!("{base}/deliveries/{failed}/resend"))
        .bearer(&shop.token)
        .call();
    assert_eq!(resent.status, 202, "{}", resent.text);
    assert!(wait_until(Duration::from_secs(10), || status_of(&failed)
        == Some(MessageStatus::Delivered)));
    let ids: Vec<String> = receiver
        .received()
        .iter()
        .filter_map(|r| r.header("webhook-id").map(str::to_string))
        .collect();
    assert_eq!(ids, [failed.clone(), failed.clone()]);

    // Recover: every failed message since a time goes again.
    receiver.script(&[Reply::status(503), Reply::status(503)]);
    let since = mercer_domain::Timestamp::now()
        .plus_seconds(-1)
        .to_rfc3339();
    let a = send_test(&server, &shop, &id);
    let b = send_test(&server, &shop, &id);
    assert!(wait_until(Duration::from_secs(10), || status_of(&a)
        == Some(MessageStatus::Failed)
        && status_of(&b) == Some(MessageStatus::Failed)));
    let recovered = server
        .post(&format!("{base}/recover"))
        .bearer(&shop.token)
        .json(&json!({ "since": since }));
    assert_eq!(recovered.status, 202, "{}", recovered.text);
    assert_eq!(recovered.json()["data"]["recovered"], 2);
    assert!(wait_until(Duration::from_secs(10), || status_of(&a)
        == Some(MessageStatus::Delivered)
        && status_of(&b) == Some(MessageStatus::Delivered)));
    let entries = server
        .post(&format!("{base}/recover"))
        .bearer(&shop.token)
        .json(&json!({ "since": "yesterday" }))
        .assert_error(422, "validation.failed");
    assert_eq!(entries[0]["field"], "since");

    // Enable: after a 410, the webhook gets messages again once enabled.
    receiver.script(&[Reply::status(410)]);
    let gone = send_test(&server, &shop, &id);
    assert!(wait_until(Duration::from_secs(10), || status_of(&gone)
        == Some(MessageStatus::Failed)));
    server
        .post(&format!("{base}/test"))
        .bearer(&shop.token)
        .call()
        .assert_error(422, "webhook.disabled");
    server
        .post(&format!("{base}/deliveries/{gone}/resend"))
        .bearer(&shop.token)
        .call()
        .assert_error(422, "webhook.disabled");
    let enabled = server
        .post(&format!("{base}/enable"))
        .bearer(&shop.token)
        .call();
    assert_eq!(enabled.status, 200);
    assert!(enabled.json()["data"]["disabled_at"].is_null());
    let after = send_test(&server, &shop, &id);
    assert!(wait_until(Duration::from_secs(10), || status_of(&after)
        == Some(MessageStatus::Delivered)));

    // Reading the log needs read_shop_settings; resending needs modify_shop_settings.
    let reader = server
        .cli(&[
            "token",
            "create",
            "--shop",
            &shop.id,
            "--scope",
            "read_shop_settings",
        ])
        .value();
    assert_eq!(
        server
            .get(&format!("{base}/deliveries"))
            .bearer(&reader)
            .call()
            .status,
        200
    );
    server
        .post(&format!("{base}/deliveries/{after}/resend"))
        .bearer(&reader)
        .call()
        .assert_error(403, "auth.forbidden");
}

fn a_new_integration_secret_signs_later_deliveries(backend: Backend) {
    let server = MercerServer::start_with(TestDatabase::create(backend), FAST);
    let shop = shop(&server);
    let receiver = Receiver::start();
    let webhook = create(&server, &shop, 1, &receiver.url);
    let id = webhook["id"].as_str().unwrap().to_string();
    send_test(&server, &shop, &id);
    assert!(wait_until(Duration::from_secs(10), || receiver
        .received()
        .len()
        == 1));
    let configured = server
        .post(&format!("/checkout/shop/{}/integration/config", shop.id))
        .bearer(&shop.token)
        .json(&json!({ "shared_secret": "the-next-secret" }));
    assert_eq!(configured.status, 200);
    send_test(&server, &shop, &id);
    assert!(wait_until(Duration::from_secs(10), || receiver
        .received()
        .len()
        == 2));
    // npm http-signature, one verifier per secret, judges which secret signed each request.
    let (old, next) = (http_signature(SECRET), http_signature("the-next-secret"));
    let signed_with = |request: &mercer_tests::receiver::Received, verifier: &Verifier| {
        replay(verifier, request).0 == 200
    };
    let received = receiver.received();
    assert!(signed_with(&received[0], &old) && !signed_with(&received[0], &next));
    assert!(signed_with(&received[1], &next) && !signed_with(&received[1], &old));
}

/// `--loopback-targets-only` (the schema fuzzer's setting): loopback callbacks are taken,
/// every other address and every host name but localhost refused at registration; the same
/// guard stands before connector destinations.
fn loopback_only_takes_loopback_targets_alone(backend: Backend) {
    let server = MercerServer::in_process_with(backend, &["--loopback-targets-only"]);
    let shop = shop(&server);
    for loopback in [
        "http://127.0.0.1:9/hook",
        "http://[::1]:9/hook",
        "http://localhost:9/hook",
    ] {
        create(&server, &shop, 2, loopback);
    }
    for elsewhere in [
        "http://10.0.0.7/hook",
        "https://93.184.216.34/hook",
        "https://hooks.example.com/hook",
    ] {
        let entries = server
            .post(&webhooks_path(&shop))
            .bearer(&shop.token)
            .json(&json!({ "webhook_topic_id": 1, "callback_url": elsewhere }))
            .assert_error(422, "validation.failed");
        assert_eq!(entries[0]["sub_type"], "address_not_allowed", "{elsewhere}");
    }
    let destination = server
        .post(&format!(
            "/integrations/v1/shops/{}/platform_connector_destinations",
            shop.id
        ))
        .bearer(&shop.token)
        .json(&json!({"data": {"destination": {"topic": "customers",
            "destination": "https://connector.example.com"}}}));
    let entries = destination.assert_error(422, "validation.failed");
    assert_eq!(
        entries[0]["sub_type"], "address_not_allowed",
        "{}",
        destination.text
    );
}

backend_tests!(
    loopback_only_takes_loopback_targets_alone,
    checkout_webhooks_are_registered_and_checked,
    the_delivery_log_resend_recover_and_enable,
    a_new_integration_secret_signs_later_deliveries,
    a_receiver_that_fails_three_times_gets_the_same_message,
    gone_410_disables_the_webhook,
    a_slow_receiver_times_out_and_is_retried,
    a_receivers_retry_after_is_honoured,
    private_callbacks_are_refused_when_sending_too,
    a_killed_process_loses_no_message,
    metrics_are_exposed,
);

#[test]
fn two_processes_on_one_postgres_deliver_each_message_once() {
    let args = ["--allow-private-targets", "--webhook-workers", "3"];
    let first = MercerServer::start_with(TestDatabase::create(Backend::Postgres), &args);
    let shop = shop(&first);
    let receiver = Receiver::start();
    let webhook = create(&first, &shop, 2, &receiver.url);
    let id = webhook["id"].as_str().unwrap().to_string();
    // The second process on the same database.
    let second_db = TestDatabase::attach(first.database());
    let second = MercerServer::start_with(second_db, &args);
    assert!(second.demo.is_none());
    let servers = [&first, &second];
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let (base, shop_id, token, id) = (
                servers[t % 2].base_url.clone(),
                shop.id.clone(),
                shop.token.clone(),
                id.clone(),
            );
            std::thread::spawn(move || {
                let agent: ureq::Agent = ureq::Agent::config_builder()
                    .http_status_as_error(false)
                    .build()
                    .into();
                (0..500)
                    .map(|_| {
                        let mut answer = agent
                            .post(&format!(
                                "{base}/checkout/shop/{shop_id}/webhooks/{id}/test"
                            ))
                            .header("Authorization", &format!("Bearer {token}"))
                            .send_empty()
                            .unwrap();
                        assert_eq!(answer.status().as_u16(), 202);
                        let body: Value =
                            serde_json::from_str(&answer.body_mut().read_to_string().unwrap())
                                .unwrap();
                        body["data"]["message_id"].as_str().unwrap().to_string()
                    })
                    .collect::<Vec<String>>()
            })
        })
        .collect();
    let sent: Vec<String> = threads
        .into_iter()
        .flat_map(|t| t.join().unwrap())
        .collect();
    assert_eq!(sent.len(), 2000);
    assert!(
        wait_until(Duration::from_secs(120), || receiver.received().len()
            >= 2000),
        "{} delivered",
        receiver.received().len()
    );
    std::thread::sleep(Duration::from_millis(500));
    let ids: Vec<String> = receiver
        .received()
        .iter()
        .filter_map(|r| r.header("webhook-id").map(str::to_string))
        .collect();
    let distinct: std::collections::HashSet<&String> = ids.iter().collect();
    assert_eq!(
        (ids.len(), distinct.len()),
        (2000, 2000),
        "each message delivered exactly once"
    );
    assert!(
        first.get("/healthz").call().status == 200 && second.get("/healthz").call().status == 200
    );
}
