//! Mercer's real webhook requests, accepted by independent verifiers: npm `http-signature` for
//! the draft-cavage `Signature`, PyPI `standardwebhooks` for the Standard Webhooks headers, and
//! Python's `hmac` for the `x-svc-signature` of subscription webhooks.

use mercer_domain::kernel::ids::ShopId;
use std::time::Duration;

use mercer_domain::Timestamp;
use mercer_domain::access::credentials::Secret;
use mercer_domain::kernel::ids::{MessageId, WebhookId};
use mercer_domain::ports::Database;
use mercer_domain::webhooks::{MessageStatus, WebhookEndpoint, WebhookKind, WebhookMessage};
use mercer_tests::verifiers::{Verifier, http_signature, standard_webhooks, x_svc_signature};
use mercer_tests::{Backend, MercerServer, TestDatabase, backend_tests, wait_until};
use mercer_webhooks::dispatcher::OutgoingWebhook;
use mercer_webhooks::{DispatcherConfig, Sender, build_request};
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

/// Sends `request` to `verifier` with the dispatcher's own sender; its status and answer.
fn send_to(verifier: &Verifier, mut request: OutgoingWebhook) -> (Option<u16>, String) {
    request.url = verifier.url.clone();
    let sender = Sender::new(&DispatcherConfig {
        address_guard: mercer_outbound::PrivateAddressGuard::ALLOW_PRIVATE,
        ..DispatcherConfig::default()
    });
    let outcome = sender.send(&request, Timestamp::now());
    (outcome.status, outcome.response.unwrap_or_default())
}

/// No end-to-end test delivers a subscription webhook yet (the subscription API is not built),
/// so the request is the one the dispatcher would send: `build_request` for a subscription
/// endpoint, sent by its `Sender`.
#[test]
fn an_independent_hmac_verifies_x_svc_signature() {
    const SUBSCRIPTION_SECRET: &str = "subscription-secret-checked-by-others";
    let verified = (Some(200), "verified".to_string());
    let verifier = x_svc_signature(SUBSCRIPTION_SECRET);

    // A fixed body and secret, signed by mercer_signing.
    let body = br#"{"id":42,"status":"active"}"#.to_vec();
    let signed = |signature: String, body: Vec<u8>| OutgoingWebhook {
        url: String::new(),
        headers: vec![
            ("Content-Type", "application/json".to_string()),
            ("x-svc-signature", signature),
        ],
        body,
    };
    let signature = mercer_signing::svc_signature(SUBSCRIPTION_SECRET, &body);
    assert_eq!(
        send_to(&verifier, signed(signature.clone(), body.clone())),
        verified,
        "x-svc-signature of a fixed body"
    );
    // The verifier refuses what does not match: another secret, another body.
    assert_eq!(
        send_to(
            &x_svc_signature("some-other-secret"),
            signed(signature.clone(), body)
        )
        .0,
        Some(401)
    );
    assert_eq!(
        send_to(&verifier, signed(signature, b"{\"id\":43}".to_vec())).0,
        Some(401)
    );

    // A whole subscription delivery as the dispatcher builds it: x-svc-signature and the
    // Standard Webhooks headers, over the same secret.
    let created = Timestamp::now();
    let endpoint = WebhookEndpoint {
        id: WebhookId(1),
        public_id: "1".into(),
        shop_id: ShopId(1),
        kind: WebhookKind::Subscription,
        topic: "subscription_created".into(),
        callback_url: verifier.url.clone(),
        secret: Some(Secret::new(SUBSCRIPTION_SECRET)),
        disabled_at: None,
        disabled_reason: None,
        failing_since: None,
        created_at: created,
        updated_at: created,
        rate_limit_per_s: None,
    };
    let message = WebhookMessage {
        id: MessageId(1),
        message_id: "msg_0123456789abcdef0123456789abcdef".into(),
        shop_id: ShopId(1),
        endpoint_id: WebhookId(1),
        topic: "subscription_created".into(),
        payload: json!({"subscription": {"id": 7, "status": "active"}}).to_string(),
        status: MessageStatus::Pending,
        attempts: 0,
        next_attempt_at: created,
        created_at: created,
        delivered_at: None,
        request_id: None,
        trace_parent: None,
        purged_at: None,
    };
    let delivery = || {
        build_request(
            &endpoint,
            &message,
            &Secret::new(SUBSCRIPTION_SECRET),
            Timestamp::now(),
        )
    };
    assert_eq!(
        send_to(&verifier, delivery()),
        verified,
        "x-svc-signature of a subscription delivery"
    );
    assert_eq!(
        send_to(&standard_webhooks(SUBSCRIPTION_SECRET), delivery()),
        verified,
        "the webhook-* headers of a subscription delivery"
    );
}

/// The draft-cavage signature covers the body through `Digest`: npm `http-signature` (with the
/// digest checked against the body) accepts a checkout delivery as the dispatcher builds it, and
/// refuses the same headers with another body, or with the body's own new digest.
#[test]
fn an_independent_verifier_refuses_a_checkout_delivery_whose_body_changed() {
    let created = Timestamp::now();
    let verifier = http_signature(SECRET);
    let endpoint = WebhookEndpoint {
        id: WebhookId(1),
        public_id: "1".into(),
        shop_id: ShopId(1),
        kind: WebhookKind::Checkout,
        topic: "order/created".into(),
        callback_url: format!("{}?shop=demo", verifier.url),
        secret: Some(Secret::new(SECRET)),
        disabled_at: None,
        disabled_reason: None,
        failing_since: None,
        created_at: created,
        updated_at: created,
        rate_limit_per_s: None,
    };
    let message = WebhookMessage {
        id: MessageId(1),
        message_id: "msg_0123456789abcdef0123456789abcdef".into(),
        shop_id: ShopId(1),
        endpoint_id: WebhookId(1),
        topic: "order/created".into(),
        payload: json!({"order": {"public_order_id": "o-1", "total": 1500}}).to_string(),
        status: MessageStatus::Pending,
        attempts: 0,
        next_attempt_at: created,
        created_at: created,
        delivered_at: None,
        request_id: None,
        trace_parent: None,
        purged_at: None,
    };
    let delivery = || build_request(&endpoint, &message, &Secret::new(SECRET), Timestamp::now());
    // Sent to the endpoint's URL as built (the signature covers its `?shop=demo`).
    let sent = |mut request: OutgoingWebhook| {
        let sender = Sender::new(&DispatcherConfig {
            address_guard: mercer_outbound::PrivateAddressGuard::ALLOW_PRIVATE,
            ..DispatcherConfig::default()
        });
        request.url = endpoint.callback_url.clone();
        let outcome = sender.send(&request, Timestamp::now());
        (outcome.status, outcome.response.unwrap_or_default())
    };
    assert_eq!(
        sent(delivery()),
        (Some(200), "verified".to_string()),
        "a checkout delivery as built"
    );
    let mut changed = delivery();
    changed.body = json!({"order": {"public_order_id": "o-1", "total": 1}})
        .to_string()
        .into_bytes();
    let (status, text) = sent(changed);
    assert_eq!(status, Some(401), "{text}");
    assert!(text.contains("Digest"), "{text}");
    let mut redigested = delivery();
    redigested.body = b"{\"order\":{}}".to_vec();
    let digest = mercer_signing::cavage::digest(&redigested.body);
    for (name, value) in &mut redigested.headers {
        if name.eq_ignore_ascii_case("Digest") {
            *value = digest.clone();
        }
    }
    let (status, text) = sent(redigested);
    assert_eq!(status, Some(401), "{text}");
    assert_eq!(text, "signature does not verify");
}

backend_tests!(independent_verifiers_accept_mercers_requests);
