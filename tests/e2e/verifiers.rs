//! Mercer's real webhook requests, accepted by independent verifiers: npm `http-signature` for
//! the draft-cavage `Signature`, PyPI `standardwebhooks` for the Standard Webhooks headers.

use std::time::Duration;

use mercer_domain::ports::Database;
use mercer_domain::webhooks::MessageStatus;
use mercer_tests::verifiers::{http_signature, standard_webhooks};
use mercer_tests::{Backend, MercerServer, TestDatabase, backend_tests, wait_until};
use serde_json::json;

const SECRET: &str = "integration-secret-checked-by-others";

/// Sends a test delivery to `url` and returns the statuses and answers of its attempts.
fn deliver(
    server: &MercerServer,
    shop: &str,
    token: &str,
    topic: i64,
    url: &str,
) -> Vec<(Option<u16>, String)> {
    let created = server
        .post(&format!("/checkout/shop/{shop}/webhooks"))
        .bearer(token)
        .json(&json!({ "webhook_topic_id": topic, "callback_url": url }));
    assert_eq!(created.status, 201, "{}", created.text);
    let id = created.json()["data"]["id"].as_str().unwrap().to_string();
    let sent = server
        .post(&format!("/checkout/shop/{shop}/webhooks/{id}/test"))
        .bearer(token)
        .call();
    let message_id = sent.json()["data"]["message_id"]
        .as_str()
        .unwrap()
        .to_string();
    let store = server.database().open_store();
    let ended = wait_until(Duration::from_secs(20), || {
        store
            .read(|tx| Ok(tx.webhook_message(&message_id)?))
            .unwrap()
            .is_some_and(|m| m.status != MessageStatus::Pending)
    });
    assert!(ended, "the delivery ended");
    let message = store
        .read(|tx| Ok(tx.webhook_message(&message_id)?))
        .unwrap()
        .unwrap();
    store
        .read(|tx| Ok(tx.webhook_attempts(message.id)?))
        .unwrap()
        .into_iter()
        .map(|attempt| {
            (
                attempt.outcome.status,
                attempt.outcome.response.unwrap_or_default(),
            )
        })
        .collect()
}

fn independent_verifiers_accept_mercers_requests(backend: Backend) {
    let server = MercerServer::start_with(
        TestDatabase::create(backend),
        &["--allow-private-targets", "--webhook-retry-schedule", "0s"],
    );
    let demo = server.demo().clone();
    let configured = server
        .post(&format!("/checkout/shop/{}/integration/config", demo.shop))
        .bearer(&demo.token)
        .json(&json!({ "shared_secret": SECRET }));
    assert_eq!(configured.status, 200);

    let cavage = http_signature(SECRET);
    let attempts = deliver(
        &server,
        &demo.shop,
        &demo.token,
        1,
        &format!("{}?shop=demo", cavage.url),
    );
    assert_eq!(
        attempts,
        [(Some(200), "verified".to_string())],
        "http-signature verifies the Signature header"
    );
    let standard = standard_webhooks(SECRET);
    let attempts = deliver(&server, &demo.shop, &demo.token, 2, &standard.url);
    assert_eq!(
        attempts,
        [(Some(200), "verified".to_string())],
        "standardwebhooks verifies the webhook-* headers"
    );

    // And they refuse what is not signed with their secret: the verifiers really verify.
    let wrong_cavage = http_signature("some-other-secret");
    let attempts = deliver(&server, &demo.shop, &demo.token, 3, &wrong_cavage.url);
    assert_eq!(attempts[0].0, Some(401), "{attempts:?}");
    let wrong_standard = standard_webhooks("some-other-secret");
    let attempts = deliver(&server, &demo.shop, &demo.token, 4, &wrong_standard.url);
    assert_eq!(attempts[0].0, Some(401), "{attempts:?}");
}

backend_tests!(independent_verifiers_accept_mercers_requests);
