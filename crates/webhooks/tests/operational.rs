//! `endpoint_disabled` (subscription endpoints) and `webhook/disabled` (checkout webhooks): when
//! the dispatcher disables an endpoint, the shop's other live endpoints of the same kind
//! registered for that topic get one signed message naming it; the disabled endpoint, even if
//! registered for the topic itself, gets none. Driven by `dispatch_batch` with real loopback
//! receivers on both databases; a 410 answer disables an endpoint at once.

#![allow(clippy::unwrap_used)] // test code: a panic is a failed assertion

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mercer_domain::Timestamp;
use mercer_domain::access::credentials::Secret;
use mercer_domain::access::secrets::{SecretKind, SharedSecret};
use mercer_domain::access::shop::{Shop, ShopInput, create_shop};
use mercer_domain::kernel::time::SystemClock;
use mercer_domain::ports::Database;
use mercer_domain::webhooks::{
    MessageStatus, NewWebhookEndpoint, RetryPolicy, WebhookEndpoint, WebhookKind,
    enqueue_for_endpoint,
};
use mercer_signing::{cavage, standard_webhooks, svc_signature};
use mercer_store::testing::TestDatabase;
use mercer_store::{Backend, Store, backend_tests};
use mercer_webhooks::{DispatcherConfig, Sender, dispatch_batch};
use serde_json::{Value, json};

/// One request a receiver got: its path, headers (names lowercase) and body.
#[derive(Debug, Clone)]
struct Received {
    path: String,
    headers: HashMap<String, String>,
    body: Vec<u8>,
}

impl Received {
    fn header(&self, name: &str) -> &str {
        self.headers.get(name).map(String::as_str).unwrap_or("")
    }
}

/// A loopback receiver answering every request with `status`; keeps what it got.
struct Receiver {
    url: String,
    received: Arc<Mutex<Vec<Received>>>,
}

impl Receiver {
    fn start(status: u16, path: &str) -> Receiver {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}{path}", listener.local_addr().unwrap());
        let received = Arc::new(Mutex::new(Vec::new()));
        let keeping = received.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().map_while(Result::ok) {
                let mut reader = BufReader::new(&stream);
                let mut request_line = String::new();
                let _ = reader.read_line(&mut request_line);
                let path = request_line
                    .split_whitespace()
                    .nth(1)
                    .unwrap_or("")
                    .to_string();
                let (mut line, mut headers) = (String::new(), HashMap::new());
                while reader.read_line(&mut line).is_ok_and(|n| n > 2) {
                    if let Some((name, value)) = line.split_once(':') {
                        headers.insert(name.trim().to_lowercase(), value.trim().to_string());
                    }
                    line.clear();
                }
                let length = headers
                    .get("content-length")
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(0);
                let mut body = vec![0; length];
                let _ = reader.read_exact(&mut body);
                keeping.lock().unwrap().push(Received {
                    path,
                    headers,
                    body,
                });
                let _ = (&stream).write_all(
                    format!(
                        "HTTP/1.1 {status} Status\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                    )
                    .as_bytes(),
                );
            }
        });
        Receiver { url, received }
    }

    fn received(&self) -> Vec<Received> {
        self.received.lock().unwrap().clone()
    }
}

fn config() -> DispatcherConfig {
    DispatcherConfig {
        address_guard: mercer_outbound::PrivateAddressGuard::ALLOW_PRIVATE,
        timeout: Duration::from_secs(5),
        policy: RetryPolicy {
            jitter: 0.0,
            ..RetryPolicy::default()
        },
        ..DispatcherConfig::default()
    }
}

const CHECKOUT_SECRET: &str = "integration-secret";

fn shop(store: &Store) -> Shop {
    let now = Timestamp::now();
    let shop = store
        .write(|tx| {
            create_shop(
                tx,
                ShopInput {
                    shop_domain: "a.shop.test".into(),
                    ..ShopInput::default()
                },
                now,
            )
        })
        .unwrap();
    store
        .write(|tx| {
            Ok(tx.save_shared_secret(&SharedSecret {
                shop_id: shop.id,
                kind: SecretKind::CheckoutIntegration,
                current: Secret::new(CHECKOUT_SECRET),
                previous: None,
                previous_valid_until: None,
                created_at: now,
                updated_at: now,
            })?)
        })
        .unwrap();
    shop
}

fn endpoint(
    store: &Store,
    shop: &Shop,
    kind: WebhookKind,
    topic: &str,
    url: &str,
) -> WebhookEndpoint {
    let new = NewWebhookEndpoint {
        shop_id: shop.id,
        kind,
        topic: topic.into(),
        callback_url: url.into(),
        secret: (kind == WebhookKind::Subscription).then(|| Secret::new(format!("secret-{topic}"))),
        created_at: Timestamp::now(),
    };
    store
        .write(|tx| Ok(tx.insert_webhook_endpoint(&new)?))
        .unwrap()
}

/// Runs batches until one claims nothing.
fn dispatch_all(store: &Store, sender: &Sender, config: &DispatcherConfig) {
    for _ in 0..20 {
        if dispatch_batch(store, sender, config, &SystemClock)
            .unwrap()
            .claimed
            == 0
        {
            return;
        }
    }
    panic!("the queue did not empty");
}

/// Checks the request's signatures the way receivers of `kind` would.
fn assert_signed(kind: WebhookKind, listener: &WebhookEndpoint, request: &Received) {
    let message_id = request.header("webhook-id");
    let timestamp: i64 = request.header("webhook-timestamp").parse().unwrap();
    let key = match kind {
        WebhookKind::Subscription => listener.secret.as_ref().unwrap().expose().to_string(),
        WebhookKind::Checkout => CHECKOUT_SECRET.to_string(),
    };
    assert!(
        standard_webhooks::verify(
            key.as_bytes(),
            message_id,
            timestamp,
            &request.body,
            request.header("webhook-signature")
        ),
        "Standard Webhooks signature"
    );
    match kind {
        WebhookKind::Subscription => assert_eq!(
            request.header("x-svc-signature"),
            svc_signature(&key, &request.body)
        ),
        WebhookKind::Checkout => {
            let signed = cavage::SignedRequest {
                method: "POST",
                path_and_query: &request.path,
                date: request.header("date"),
                digest: Some(request.header("digest")),
                body: &request.body,
            };
            assert!(
                cavage::verify(CHECKOUT_SECRET, &signed, request.header("signature")),
                "draft-cavage signature"
            );
        }
    }
}

fn a_disabled_endpoint_is_announced_to_the_shops_other_listeners(
    backend: Backend,
    kind: WebhookKind,
) {
    let (operational, ordinary) = match kind {
        WebhookKind::Subscription => ("endpoint_disabled", "subscription_created"),
        WebhookKind::Checkout => ("webhook/disabled", "order/created"),
    };
    let (_db, store) = TestDatabase::migrated(backend);
    let shop = shop(&store);
    let gone = Receiver::start(410, "/gone");
    let listening = Receiver::start(200, "/ops?shop=1");
    let failing = endpoint(&store, &shop, kind, ordinary, &gone.url);
    // The failing endpoint's own registration for the operational topic, at the same receiver:
    // disabled with it only later, it must not hear of its twin through the topic.
    let listener = endpoint(&store, &shop, kind, operational, &listening.url);
    let other_kind = match kind {
        WebhookKind::Subscription => WebhookKind::Checkout,
        WebhookKind::Checkout => WebhookKind::Subscription,
    };
    let other_listening = Receiver::start(200, "/other");
    let other_topic = match other_kind {
        WebhookKind::Subscription => "endpoint_disabled",
        WebhookKind::Checkout => "webhook/disabled",
    };
    endpoint(&store, &shop, other_kind, other_topic, &other_listening.url);
    // Another shop's listener hears nothing either.
    let stranger = Receiver::start(200, "/stranger");
    let other_shop = store
        .write(|tx| {
            create_shop(
                tx,
                ShopInput {
                    shop_domain: "b.shop.test".into(),
                    ..ShopInput::default()
                },
                Timestamp::now(),
            )
        })
        .unwrap();
    endpoint(&store, &other_shop, kind, operational, &stranger.url);

    store
        .write(|tx| enqueue_for_endpoint(tx, &failing, &json!({"n": 1}), Timestamp::now()))
        .unwrap();
    let (config, sender) = (config(), Sender::new(&config()));
    dispatch_all(&store, &sender, &config);

    let disabled = store
        .read(|tx| Ok(tx.webhook_endpoints_by_ids(&[failing.id])?))
        .unwrap()
        .remove(0)
        .0;
    let disabled_at = disabled.disabled_at.expect("the 410 disabled the endpoint");
    assert_eq!(gone.received().len(), 1);
    let got = listening.received();
    assert_eq!(got.len(), 1, "exactly one announcement: {got:?}");
    assert!(
        other_listening.received().is_empty(),
        "not to the other kind"
    );
    assert!(stranger.received().is_empty(), "not to another shop");

    let request = &got[0];
    assert_eq!(request.header("x-svc-topic"), operational);
    assert_signed(kind, &listener, request);
    let body: Value = serde_json::from_slice(&request.body).unwrap();
    let data = match kind {
        WebhookKind::Subscription => {
            assert_eq!(body["topic"], "endpoint_disabled");
            assert_eq!(body["shop_identifier"], shop.identifier.as_str());
            body["data"].clone()
        }
        WebhookKind::Checkout => body.clone(),
    };
    let failures_since = disabled.failing_since.unwrap().to_rfc3339();
    assert_eq!(
        data,
        json!({
            "endpoint_id": failing.public_id,
            "topic": ordinary,
            "url": gone.url,
            "failures_since": failures_since,
            "last_error": "HTTP 410",
        }),
    );
    // It is a message like any other: in the listener's log, delivered.
    let message = store
        .read(|tx| Ok(tx.webhook_message(request.header("webhook-id"))?))
        .unwrap()
        .unwrap();
    assert_eq!(
        (message.endpoint_id, message.status, message.topic.as_str()),
        (listener.id, MessageStatus::Delivered, operational)
    );
    assert!(message.created_at >= disabled_at);
}

fn a_disabled_subscription_endpoint_is_announced(backend: Backend) {
    a_disabled_endpoint_is_announced_to_the_shops_other_listeners(
        backend,
        WebhookKind::Subscription,
    );
}

fn a_disabled_checkout_webhook_is_announced(backend: Backend) {
    a_disabled_endpoint_is_announced_to_the_shops_other_listeners(backend, WebhookKind::Checkout);
}

/// An endpoint registered for the operational topic that is itself disabled gets no message
/// about itself, and with no other listener nothing is enqueued.
fn the_disabled_endpoint_is_not_told_of_itself(backend: Backend) {
    let (_db, store) = TestDatabase::migrated(backend);
    let shop = shop(&store);
    let gone = Receiver::start(410, "/gone");
    let itself = endpoint(
        &store,
        &shop,
        WebhookKind::Subscription,
        "endpoint_disabled",
        &gone.url,
    );
    store
        .write(|tx| enqueue_for_endpoint(tx, &itself, &json!({"n": 1}), Timestamp::now()))
        .unwrap();
    let (config, sender) = (config(), Sender::new(&config()));
    dispatch_all(&store, &sender, &config);
    let (endpoint, _) = store
        .read(|tx| Ok(tx.webhook_endpoints_by_ids(&[itself.id])?))
        .unwrap()
        .remove(0);
    assert!(endpoint.disabled_at.is_some());
    assert_eq!(gone.received().len(), 1, "only the message that got 410");
    let messages = store
        .read(|tx| Ok(tx.webhook_messages_of_endpoint(itself.id, 10)?))
        .unwrap();
    assert_eq!(messages.len(), 1);
}

backend_tests!(
    a_disabled_subscription_endpoint_is_announced,
    a_disabled_checkout_webhook_is_announced,
    the_disabled_endpoint_is_not_told_of_itself,
);
