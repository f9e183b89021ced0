//! Subscription webhook registration end to end: List Webhook
//! Topics, create / list / get / update / delete, the write-only shared secret, 422s with their
//! field paths, shop scoping, scopes, and one delivery that an independent receiver verifies by
//! its `x-svc-signature`.

use std::time::Duration;

use mercer_domain::access::shop::ShopIdentifier;
use mercer_domain::ports::Database;
use mercer_domain::webhooks::{MessageStatus, WebhookKind, enqueue_for_topic};
use mercer_domain::{DomainError, Timestamp};
use mercer_tests::verifiers::x_svc_signature;
use mercer_tests::{Answer, Backend, MercerServer, TestDatabase, backend_tests, wait_until};
use serde_json::{Value, json};

const SECRET: &str = "subscription-webhook-secret";
/// Loopback only (nothing listens on port 9): the servers of these tests allow private targets,
/// except where a test checks the address guard.
const CALLBACK: &str = "http://127.0.0.1:9/subscriptions";
const ALLOW_PRIVATE: &[&str] = &["--allow-private-targets"];
const SEED_TOPICS: [&str; 21] = [
    "customer_created",
    "customer_updated",
    "subscription_cancelled",
    "subscription_created",
    "subscription_credit_card_updated",
    "subscription_expiring_payment",
    "subscription_frequency_updated",
    "subscription_order_created",
    "subscription_order_max_retries_reached",
    "subscription_order_transaction_failed",
    "subscription_payment_failed",
    "subscription_paused",
    "subscription_payment_method_updated",
    "subscription_quantity_updated",
    "subscription_reactivated",
    "subscription_resumed",
    "subscription_shipping_address_updated",
    "subscription_skipped",
    "subscription_upcoming_order",
    "subscription_updated",
    "endpoint_disabled",
];

fn base(shop: &str) -> String {
    format!("/subscriptions/v1/shops/{shop}/webhooks")
}

fn subscriptions(shop: &str) -> String {
    format!("{}/subscriptions", base(shop))
}

fn body(topic: Value, url: &str, secret: &str) -> Value {
    json!({ "webhook_subscription": {
        "callback_url": url, "webhook_topic_id": topic, "shared_secret": secret
    } })
}

/// The field path of each 422 entry.
fn fields(answer: &Answer) -> Vec<String> {
    answer
        .assert_error(422, "validation.failed")
        .iter()
        .map(|entry| entry["field"].as_str().unwrap_or_default().to_string())
        .collect()
}

fn another_shop(server: &MercerServer, scope: &str) -> (String, String) {
    let shop = server
        .cli(&["shop", "create", "--domain", "second.subscriptions.test"])
        .values()[0]
        .clone();
    let token = server
        .cli(&["token", "create", "--shop", &shop, "--scope", scope])
        .value();
    (shop, token)
}

fn topics_are_listed_in_the_seed_order(backend: Backend) {
    let server = MercerServer::in_process(backend);
    let demo = server.demo().clone();
    let answer = server
        .get(&format!("{}/topics", base(&demo.shop)))
        .bearer(&demo.token)
        .call();
    assert_eq!(answer.status, 200, "{}", answer.text);
    let listed = answer.json()["webhook_topics"].clone();
    // Each with the JSON Schema of its payload: the catalogue's, which the test receiver
    // checks every delivery against.
    let expected: Vec<Value> = SEED_TOPICS
        .iter()
        .enumerate()
        .map(|(index, name)| {
            let topic = mercer_domain::subscriptions::topics::Topic::parse(name).unwrap();
            let schema = mercer_domain::subscriptions::topics::payload_schema(topic);
            assert_eq!(
                Some(&schema),
                mercer_tests::receiver::topic_schemas().get(name)
            );
            json!({ "id": index + 1, "name": name, "schema": schema })
        })
        .collect();
    assert_eq!(listed, Value::Array(expected));
}

fn webhook_subscriptions_are_created_read_updated_and_deleted(backend: Backend) {
    let server = MercerServer::in_process_with(backend, ALLOW_PRIVATE);
    let demo = server.demo().clone();
    let created = server
        .post(&subscriptions(&demo.shop))
        .bearer(&demo.token)
        .header("Svc-API-Version-Date", "2022-05-01")
        .json(&body(json!(12), CALLBACK, SECRET));
    assert_eq!(created.status, 201, "{}", created.text);
    assert!(!created.text.contains(SECRET), "{}", created.text);
    let resource = created.json()["webhook_subscription"].clone();
    assert_eq!(resource["webhook_topic_id"], 12);
    assert_eq!(resource["webhook_topic_name"], "subscription_paused");
    assert_eq!(resource["callback_url"], CALLBACK);
    assert!(resource.get("shared_secret").is_none());
    let id = resource["id"].as_str().unwrap().to_string();
    assert_eq!(id.len(), 32);

    let second = server
        .post(&subscriptions(&demo.shop))
        .bearer(&demo.token)
        .json(&body(json!(4), "http://127.0.0.1:9/created", SECRET));
    assert_eq!(second.status, 201, "{}", second.text);

    let listed = server
        .get(&subscriptions(&demo.shop))
        .bearer(&demo.token)
        .call();
    assert_eq!(listed.status, 200, "{}", listed.text);
    assert!(!listed.text.contains(SECRET));
    let names: Vec<&str> = listed.json()["webhook_subscriptions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|entry| entry["webhook_topic_name"].as_str().unwrap())
        .map(|name| match name {
            "subscription_paused" => "paused",
            _ => "other",
        })
        .collect();
    assert_eq!(names, ["paused", "other"]);

    let one = format!("{}/{id}", subscriptions(&demo.shop));
    let got = server.get(&one).bearer(&demo.token).call();
    assert_eq!(got.status, 200, "{}", got.text);
    assert_eq!(got.json()["webhook_subscription"], resource);
    assert!(!got.text.contains(SECRET));

    let patched =
        server
            .request("PATCH", &one)
            .bearer(&demo.token)
            .json(&json!({ "webhook_subscription": {
            "callback_url": "http://127.0.0.1:9/moved", "webhook_topic_id": 12
        } }));
    assert_eq!(patched.status, 200, "{}", patched.text);
    let moved = patched.json()["webhook_subscription"].clone();
    assert_eq!(moved["callback_url"], "http://127.0.0.1:9/moved");
    assert_eq!(moved["id"], id.as_str());
    assert_eq!(moved["webhook_topic_id"], 12);
    assert!(!patched.text.contains(SECRET));
    let again = server.get(&one).bearer(&demo.token).call().json();
    assert_eq!(
        again["webhook_subscription"]["callback_url"],
        "http://127.0.0.1:9/moved"
    );
    // The topic and the secret change too; the secret stays write-only.
    let retopic =
        server
            .request("PATCH", &one)
            .bearer(&demo.token)
            .json(&json!({ "webhook_subscription": {
            "webhook_topic_id": 5, "shared_secret": "a-rotated-secret"
        } }));
    assert_eq!(retopic.status, 200, "{}", retopic.text);
    assert_eq!(
        retopic.json()["webhook_subscription"]["webhook_topic_id"],
        5
    );
    assert!(!retopic.text.contains("a-rotated-secret"));
    let again = server.get(&one).bearer(&demo.token).call().json();
    assert_eq!(again["webhook_subscription"]["webhook_topic_id"], 5);
    assert_eq!(
        again["webhook_subscription"]["callback_url"],
        "http://127.0.0.1:9/moved"
    );

    let deleted = server.request("DELETE", &one).bearer(&demo.token).call();
    assert_eq!(deleted.status, 204, "{}", deleted.text);
    server
        .get(&one)
        .bearer(&demo.token)
        .call()
        .assert_error(404, "resource.not_found");
    server
        .request("DELETE", &one)
        .bearer(&demo.token)
        .call()
        .assert_error(404, "resource.not_found");
    let left = server
        .get(&subscriptions(&demo.shop))
        .bearer(&demo.token)
        .call()
        .json();
    assert_eq!(left["webhook_subscriptions"].as_array().unwrap().len(), 1);
}

fn invalid_bodies_are_422_on_their_paths(backend: Backend) {
    let server = MercerServer::in_process_with(backend, ALLOW_PRIVATE);
    let demo = server.demo().clone();
    let post = |body: Value| {
        server
            .post(&subscriptions(&demo.shop))
            .bearer(&demo.token)
            .json(&body)
    };
    let path = |name: &str| format!("webhook_subscription.{name}");
    assert_eq!(
        fields(&post(json!({}))),
        ["webhook_subscription".to_string()]
    );
    assert_eq!(
        fields(&post(json!({ "webhook_subscription": {} }))),
        [
            path("callback_url"),
            path("webhook_topic_id"),
            path("shared_secret")
        ]
    );
    for topic in [json!(0), json!(22), json!(-1)] {
        let answer = post(body(topic.clone(), CALLBACK, SECRET));
        assert_eq!(fields(&answer), [path("webhook_topic_id")], "{topic}");
        assert_eq!(answer.errors()[0]["sub_type"], "invalid_value");
    }
    // A topic by its name is not the documented field: the id is an integer.
    assert_eq!(
        fields(&post(body(json!("subscription_paused"), CALLBACK, SECRET))),
        [path("webhook_topic_id")]
    );
    for secret in ["short", "", &"s".repeat(256)] {
        let answer = post(body(json!(1), CALLBACK, secret));
        assert_eq!(fields(&answer), [path("shared_secret")], "{secret:?}");
    }
    assert!(post(body(json!(1), CALLBACK, &"s".repeat(255))).status == 201);
    assert!(post(body(json!(1), CALLBACK, "12345678")).status == 201);
    for url in ["ftp://127.0.0.1:9/a", "not a url"] {
        assert_eq!(
            fields(&post(body(json!(1), url, SECRET))),
            [path("callback_url")],
            "{url}"
        );
    }
    // The address guard, on a server that keeps it: every one is refused, nothing is stored.
    let guarded = MercerServer::in_process(backend);
    let guarded_demo = guarded.demo().clone();
    for url in [
        "http://127.0.0.1:9/hook",
        "http://10.0.0.7/hook",
        "http://169.254.169.254/latest",
    ] {
        let answer = guarded
            .post(&subscriptions(&guarded_demo.shop))
            .bearer(&guarded_demo.token)
            .json(&body(json!(1), url, SECRET));
        assert_eq!(fields(&answer), [path("callback_url")], "{url}");
        assert_eq!(
            answer.errors()[0]["sub_type"],
            "address_not_allowed",
            "{url}"
        );
    }

    let created = post(body(json!(4), CALLBACK, SECRET)).json()["webhook_subscription"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let patch = |body: Value| {
        server
            .request("PATCH", &format!("{}/{created}", subscriptions(&demo.shop)))
            .bearer(&demo.token)
            .json(&body)
    };
    let answer = patch(json!({ "webhook_subscription": {
        "callback_url": "ftp://127.0.0.1:9/hook", "webhook_topic_id": 22, "shared_secret": "short"
    } }));
    assert_eq!(
        fields(&answer),
        [
            path("callback_url"),
            path("webhook_topic_id"),
            path("shared_secret")
        ]
    );
    assert!(!answer.text.contains("short\""));
    assert_eq!(
        fields(&patch(
            json!({ "webhook_subscription": { "webhook_topic_id": 99 } })
        )),
        [path("webhook_topic_id")]
    );
    let unchanged = server
        .get(&format!("{}/{created}", subscriptions(&demo.shop)))
        .bearer(&demo.token)
        .call()
        .json();
    assert_eq!(unchanged["webhook_subscription"]["callback_url"], CALLBACK);
}

fn another_shops_webhook_subscription_is_404(backend: Backend) {
    let server = MercerServer::in_process_with(backend, ALLOW_PRIVATE);
    let demo = server.demo().clone();
    let (other, other_token) = another_shop(&server, "all");
    let theirs = server
        .post(&subscriptions(&other))
        .bearer(&other_token)
        .json(&body(json!(1), CALLBACK, SECRET));
    assert_eq!(theirs.status, 201, "{}", theirs.text);
    let id = theirs.json()["webhook_subscription"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let ours = format!("{}/{id}", subscriptions(&demo.shop));
    for method in ["GET", "DELETE"] {
        server
            .request(method, &ours)
            .bearer(&demo.token)
            .call()
            .assert_error(404, "resource.not_found");
    }
    server
        .request("PATCH", &ours)
        .bearer(&demo.token)
        .json(&json!({ "webhook_subscription": { "callback_url": CALLBACK } }))
        .assert_error(404, "resource.not_found");
    let listed = server
        .get(&subscriptions(&demo.shop))
        .bearer(&demo.token)
        .call()
        .json();
    assert_eq!(listed["webhook_subscriptions"], json!([]));
    // Still there for its own shop.
    let kept = server
        .get(&format!("{}/{id}", subscriptions(&other)))
        .bearer(&other_token)
        .call();
    assert_eq!(kept.status, 200, "{}", kept.text);
    // A checkout webhook's id is not a webhook subscription's.
    let config = server
        .post(&format!("/checkout/shop/{other}/integration/config"))
        .bearer(&other_token)
        .json(&json!({ "shared_secret": "integration-secret-of-the-shop" }));
    assert_eq!(config.status, 200, "{}", config.text);
    let checkout = server
        .post(&format!("/checkout/shop/{other}/webhooks"))
        .bearer(&other_token)
        .json(&json!({ "webhook_topic_id": 1, "callback_url": CALLBACK }));
    assert_eq!(checkout.status, 201, "{}", checkout.text);
    let checkout_id = checkout.json()["data"]["id"].as_str().unwrap().to_string();
    server
        .get(&format!("{}/{checkout_id}", subscriptions(&other)))
        .bearer(&other_token)
        .call()
        .assert_error(404, "resource.not_found");
}

fn reads_need_read_subscriptions_and_writes_write_subscriptions(backend: Backend) {
    let server = MercerServer::in_process_with(backend, ALLOW_PRIVATE);
    let demo = server.demo().clone();
    let (_, reader) = {
        let token = server
            .cli(&[
                "token",
                "create",
                "--shop",
                &demo.shop,
                "--scope",
                "read_subscriptions",
            ])
            .value();
        (demo.shop.clone(), token)
    };
    let writer = server
        .cli(&[
            "token",
            "create",
            "--shop",
            &demo.shop,
            "--scope",
            "write_subscriptions",
        ])
        .value();
    let forbidden = |answer: Answer| {
        let entries = answer.assert_error(403, "auth.forbidden");
        assert_eq!(entries[0]["sub_type"], "missing_scope");
    };
    forbidden(
        server
            .post(&subscriptions(&demo.shop))
            .bearer(&reader)
            .json(&body(json!(1), CALLBACK, SECRET)),
    );
    let created = server
        .post(&subscriptions(&demo.shop))
        .bearer(&writer)
        .json(&body(json!(1), CALLBACK, SECRET));
    assert_eq!(created.status, 201, "{}", created.text);
    let id = created.json()["webhook_subscription"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let one = format!("{}/{id}", subscriptions(&demo.shop));
    for path in [
        format!("{}/topics", base(&demo.shop)),
        subscriptions(&demo.shop),
        one.clone(),
    ] {
        forbidden(server.get(&path).bearer(&writer).call());
        assert_eq!(server.get(&path).bearer(&reader).call().status, 200);
    }
    forbidden(server.request("DELETE", &one).bearer(&reader).call());
    forbidden(
        server
            .request("PATCH", &one)
            .bearer(&reader)
            .json(&json!({ "webhook_subscription": { "callback_url": CALLBACK } })),
    );
    assert_eq!(
        server.request("DELETE", &one).bearer(&writer).call().status,
        204
    );
}

/// A message of a subscription topic, enqueued through the domain as the subscription use cases
/// will, reaches the registered callback signed with `x-svc-signature` over the shop's shared
/// secret: the callback is Python's `hmac` recomputing it, and it answers `verified` only then.
fn a_delivery_carries_an_x_svc_signature_the_receiver_verifies(backend: Backend) {
    let verifier = x_svc_signature(SECRET);
    let server =
        MercerServer::start_with(TestDatabase::create(backend), &["--allow-private-targets"]);
    let demo = server.demo().clone();
    let created = server
        .post(&subscriptions(&demo.shop))
        .bearer(&demo.token)
        .json(&body(json!(12), &verifier.url, SECRET));
    assert_eq!(created.status, 201, "{}", created.text);
    let public_id = created.json()["webhook_subscription"]["id"]
        .as_str()
        .unwrap()
        .to_string();

    let store = server.database().open_store();
    let identifier = ShopIdentifier::parse(&demo.shop).unwrap();
    let endpoint_id = store
        .write(move |tx| {
            let shop = tx
                .shop_by_identifier(&identifier)?
                .ok_or(DomainError::not_found("shop"))?;
            let endpoint = tx
                .webhook_endpoint(shop.id, &public_id)?
                .ok_or(DomainError::not_found("webhook_subscription"))?;
            let payload = json!({ "subscription": { "id": 1, "subscription_status": "paused" } });
            let queued = enqueue_for_topic(
                tx,
                shop.id,
                WebhookKind::Subscription,
                "subscription_paused",
                &payload,
                None,
                Timestamp::now(),
            )?;
            assert_eq!(queued.len(), 1);
            Ok(endpoint.id)
        })
        .unwrap();
    let messages = || {
        store
            .read(move |tx| Ok(tx.webhook_messages_of_endpoint(endpoint_id, 10)?))
            .unwrap()
    };
    let delivered = wait_until(Duration::from_secs(10), || {
        messages()
            .first()
            .is_some_and(|message| message.status == MessageStatus::Delivered)
    });
    assert!(delivered, "not delivered: {:?}", messages());
    let message = messages()[0].clone();
    assert_eq!(message.topic, "subscription_paused");
    let attempts = store
        .read(move |tx| Ok(tx.webhook_attempts(message.id)?))
        .unwrap();
    let last = attempts.last().unwrap();
    assert_eq!(last.outcome.status, Some(200), "{attempts:?}");
    assert_eq!(last.outcome.response.as_deref(), Some("verified"));
}

/// A Customer Saved event from the platform that renames a customer with a subscription sends
/// `customer_updated` (the customer's name; email or phone changed), with the new
/// name; one that renames a customer without any sends nothing.
fn customer_updated_follows_the_platforms_changes(backend: Backend) {
    let receiver = mercer_tests::receiver::Receiver::start();
    let server =
        MercerServer::start_with(TestDatabase::create(backend), &["--allow-private-targets"]);
    let demo = server.demo().clone();
    let created = server
        .post(&subscriptions(&demo.shop))
        .bearer(&demo.token)
        .json(&body(json!(2), &receiver.url, SECRET));
    assert_eq!(created.status, 201, "{}", created.text);
    let saved = |customer: Value| {
        let answer = server
            .post(&format!(
                "/customers/v1/shops/{}/platforms/custom/webhooks/customers/saved",
                demo.shop
            ))
            .bearer(&demo.token)
            .json(&json!({"data": {"customer": customer}}));
        assert_eq!(answer.status, 202, "{}", answer.text);
    };
    for (id, email) in [
        ("cus-ada", "ada@example.test"),
        ("cus-bob", "bob@example.test"),
    ] {
        saved(
            json!({"platform_id": id, "email": email, "first_name": "First",
            "platform_updated_at": "2026-11-01T00:00:00Z"}),
        );
    }
    let known = format!("/customers/v2/shops/{}/customers/pid/cus-ada", demo.shop);
    assert!(wait_until(Duration::from_secs(10), || server
        .get(&known)
        .bearer(&demo.token)
        .call()
        .status
        == 200));
    let subscription = server
        .post(&format!("/subscriptions/v1/shops/{}/subscriptions", demo.shop))
        .bearer(&demo.token)
        .json(&json!({"customer": {"email": "ada@example.test"},
            "subscription": {"order_rrule": "DTSTART:20300107T090000Z\nRRULE:FREQ=WEEKLY",
                "line_items": [{"platform_product_id": "p", "platform_variant_id": "v",
                                "quantity": 1, "price": 100}],
                "shipping_address": {"street1": "1 Main St", "city": "Ottawa", "country_code": "CA"}}}));
    assert_eq!(subscription.status, 200, "{}", subscription.text);

    for id in ["cus-bob", "cus-ada"] {
        saved(json!({"platform_id": id, "first_name": "Augusta",
            "platform_updated_at": "2026-11-02T00:00:00Z"}));
    }
    assert!(
        wait_until(Duration::from_secs(15), || !receiver.received().is_empty()),
        "customer_updated is sent: {}",
        server.log()
    );
    std::thread::sleep(Duration::from_secs(1));
    let received = receiver.received();
    assert_eq!(received.len(), 1, "only the subscriber's change");
    let payload: Value = serde_json::from_slice(&received[0].body).unwrap();
    let text = payload.to_string();
    assert!(text.contains("customer_updated"), "{text}");
    assert!(
        text.contains("\"first_name\":\"Augusta\"") && text.contains("ada@example.test"),
        "{text}"
    );
}

backend_tests!(
    customer_updated_follows_the_platforms_changes,
    topics_are_listed_in_the_seed_order,
    webhook_subscriptions_are_created_read_updated_and_deleted,
    invalid_bodies_are_422_on_their_paths,
    another_shops_webhook_subscription_is_404,
    reads_need_read_subscriptions_and_writes_write_subscriptions,
    a_delivery_carries_an_x_svc_signature_the_receiver_verifies,
);
