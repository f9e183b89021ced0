//! Checkout settings end to end: API overrides kept over HTTP, the
//! override caller against a real local override server that verifies Mercer's signatures,
//! and the credential rules of every checkout settings route.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mercer_domain::DomainError;
use mercer_domain::access::shop::find_shop;
use mercer_domain::overrides::{
    self, OrderOverride, OverrideAnswer, OverrideTarget, OverrideType, ShippingLine,
};
use mercer_domain::ports::Database;
use mercer_outbound::PrivateAddressGuard;
use mercer_tests::receiver::{Received, Receiver};
use mercer_tests::verifiers::{Verifier, http_signature, replay};
use mercer_tests::{Answer, Backend, MercerServer, backend_tests};
use mercer_webhooks::HttpOverrideCaller;
use serde_json::{Value, json};

const UNKNOWN_SHOP: &str = "0123456789abcdef0123456789abcdef";
const SECRET: &str = "override-secret-1";

fn overrides_path(shop: &str) -> String {
    format!("/checkout/shop/{shop}/overrides")
}

fn is_seed_time(value: &Value) -> bool {
    // `YYYY-MM-DD HH:MM:SS`
    let text = value.as_str().unwrap_or_default();
    text.len() == 19
        && text.char_indices().all(|(i, c)| match i {
            4 | 7 => c == '-',
            10 => c == ' ',
            13 | 16 => c == ':',
            _ => c.is_ascii_digit(),
        })
}

fn field_of(answer: &Answer) -> Vec<String> {
    answer
        .assert_error(422, "validation.failed")
        .iter()
        .map(|entry| entry["field"].as_str().unwrap().to_string())
        .collect()
}

/// Overrides are registered at loopback addresses only (nothing listens on port 9): this
/// server allows private targets; the guard is checked on a second one that keeps it.
fn api_overrides_are_kept_and_checked(backend: Backend) {
    let server = MercerServer::start_with(
        mercer_tests::TestDatabase::create_migrated(backend),
        &["--allow-private-targets"],
    );
    let demo = server.demo().clone();
    let path = overrides_path(&demo.shop);
    let post = |body: Value| server.post(&path).bearer(&demo.token).json(&body);

    assert_eq!(
        field_of(&post(json!({}))),
        ["override_type", "url", "shared_secret"]
    );
    for (body, field) in [
        (
            json!({ "override_type": "refunds", "url": "http://127.0.0.1:9/", "shared_secret": SECRET }),
            "override_type",
        ),
        (
            json!({ "override_type": "tax", "url": "/relative", "shared_secret": SECRET }),
            "url",
        ),
        (
            json!({ "override_type": "tax", "url": "ftp://127.0.0.1:9/", "shared_secret": SECRET }),
            "url",
        ),
        (
            json!({ "override_type": "tax", "url": "http://127.0.0.1:9/", "shared_secret": "7-chars" }),
            "shared_secret",
        ),
        (
            json!({ "override_type": "tax", "url": "http://127.0.0.1:9/", "shared_secret": "x".repeat(256) }),
            "shared_secret",
        ),
        (
            json!({ "override_type": 5, "url": "http://127.0.0.1:9/", "shared_secret": SECRET }),
            "override_type",
        ),
    ] {
        assert_eq!(field_of(&post(body.clone())), [field], "{body}");
    }
    // Without --allow-private-targets, an override may not point into a private network.
    let guarded = MercerServer::in_process(backend);
    let guarded_demo = guarded.demo().clone();
    let private = guarded
        .post(&overrides_path(&guarded_demo.shop))
        .bearer(&guarded_demo.token)
        .json(
            &json!({ "override_type": "tax", "url": "http://127.0.0.1:9/tax", "shared_secret": SECRET }),
        );
    assert_eq!(
        private.assert_error(422, "validation.failed")[0]["sub_type"],
        "address_not_allowed"
    );

    let created = post(json!({
        "override_type": "shipping",
        "url": "http://127.0.0.1:9/shipping",
        "shared_secret": "x".repeat(255),
    }));
    assert_eq!(created.status, 200, "{}", created.text);
    assert!(!created.text.contains("xxxxxxxx"), "the secret came back");
    let created = created.json()["data"].clone();
    let id = created["id"].as_str().unwrap().to_string();
    assert_eq!(id.len(), 32);
    assert!(id.chars().all(|c| c.is_ascii_hexdigit()));
    assert_eq!(created["override_type"], "shipping");
    assert!(is_seed_time(&created["created_at"]), "{created}");
    assert!(is_seed_time(&created["updated_at"]), "{created}");
    assert!(created.get("shared_secret").is_none());

    let item = format!("{path}/{id}");
    let patch = |body: Value| {
        server
            .request("PATCH", &item)
            .bearer(&demo.token)
            .json(&body)
    };
    assert_eq!(
        field_of(&patch(json!({ "override_type": "gift_wrap" }))),
        ["override_type"]
    );
    assert_eq!(
        field_of(&patch(json!({ "shared_secret": "short" }))),
        ["shared_secret"]
    );
    assert_eq!(
        field_of(&patch(json!({ "url": "mailto:someone@example.test" }))),
        ["url"]
    );
    let updated = patch(json!({ "override_type": "tax", "shared_secret": "a-new-secret-42" }));
    assert_eq!(updated.status, 200, "{}", updated.text);
    assert!(!updated.text.contains("a-new-secret-42"));
    let updated = updated.json()["data"].clone();
    assert_eq!(updated["override_type"], "tax");
    assert_eq!(updated["id"], created["id"]);
    assert_eq!(updated["created_at"], created["created_at"]);

    // A shop may have several overrides of a type.
    let second = post(json!({
        "override_type": "tax",
        "url": "http://127.0.0.1:9/tax-2",
        "shared_secret": SECRET,
    }));
    assert_eq!(second.status, 200, "{}", second.text);
    let listed = server.get(&path).bearer(&demo.token).call();
    assert_eq!(listed.status, 200);
    assert!(!listed.text.contains(SECRET) && !listed.text.contains("a-new-secret-42"));
    let listed = listed.json()["data"].as_array().unwrap().clone();
    assert_eq!(listed.len(), 2);
    assert_eq!(listed[0]["id"], created["id"]);

    let deleted = server.request("DELETE", &item).bearer(&demo.token).call();
    assert_eq!(deleted.status, 200, "{}", deleted.text);
    assert_eq!(deleted.json(), json!({ "data": {} }));
    for method in ["DELETE", "PATCH"] {
        server
            .request(method, &item)
            .bearer(&demo.token)
            .json(&json!({ "url": "http://127.0.0.1:9/x" }))
            .assert_error(404, "resource.not_found");
    }
    for body in [json!({}), json!({ "url": 5, "override_type": "nope" })] {
        server
            .request("PATCH", &format!("{path}/not-an-id"))
            .bearer(&demo.token)
            .json(&body)
            .assert_error(404, "resource.not_found");
    }
    let left = server.get(&path).bearer(&demo.token).call().json();
    assert_eq!(left["data"].as_array().unwrap().len(), 1);
    let log = server.log();
    for secret in [SECRET, "a-new-secret-42"] {
        assert!(!log.contains(secret), "a secret reached the log");
    }
}

/// Every checkout settings route, with the scope it needs.
fn checkout_settings_routes(shop: &str) -> Vec<(&'static str, String, &'static str)> {
    let some = "0123456789abcdef0123456789abcdef";
    let base = format!("/checkout/shop/{shop}");
    vec![
        ("POST", format!("{base}/overrides"), "modify_shop_settings"),
        ("GET", format!("{base}/overrides"), "read_shop_settings"),
        (
            "PATCH",
            format!("{base}/overrides/{some}"),
            "modify_shop_settings",
        ),
        (
            "DELETE",
            format!("{base}/overrides/{some}"),
            "modify_shop_settings",
        ),
        (
            "POST",
            format!("{base}/integration/config"),
            "modify_shop_settings",
        ),
        (
            "GET",
            format!("{base}/webhooks/topics"),
            "modify_shop_settings",
        ),
        ("POST", format!("{base}/webhooks"), "modify_shop_settings"),
        ("GET", format!("{base}/webhooks"), "modify_shop_settings"),
        (
            "PATCH",
            format!("{base}/webhooks/{some}"),
            "modify_shop_settings",
        ),
        (
            "DELETE",
            format!("{base}/webhooks/{some}"),
            "modify_shop_settings",
        ),
        (
            "POST",
            format!("{base}/webhooks/{some}/test"),
            "modify_shop_settings",
        ),
        (
            "GET",
            format!("{base}/webhooks/{some}/deliveries"),
            "read_shop_settings",
        ),
        (
            "GET",
            format!("{base}/webhooks/{some}/deliveries/{some}"),
            "read_shop_settings",
        ),
        (
            "POST",
            format!("{base}/webhooks/{some}/deliveries/{some}/resend"),
            "modify_shop_settings",
        ),
        (
            "POST",
            format!("{base}/webhooks/{some}/recover"),
            "modify_shop_settings",
        ),
        (
            "POST",
            format!("{base}/webhooks/{some}/enable"),
            "modify_shop_settings",
        ),
    ]
}

fn checkout_settings_routes_check_credentials(backend: Backend) {
    let server = MercerServer::in_process(backend);
    let demo = server.demo().clone();
    let other_shop = server
        .cli(&["shop", "create", "--domain", "other.shop.test"])
        .values()[0]
        .clone();
    let other_token = server
        .cli(&["token", "create", "--shop", &other_shop, "--scope", "all"])
        .value();
    let token_with = |scope: &str| {
        server
            .cli(&["token", "create", "--shop", &demo.shop, "--scope", scope])
            .value()
    };
    let read_only = token_with("read_shop_settings");
    let modify_only = token_with("modify_shop_settings");
    let unrelated = token_with("read_orders write_orders");
    let body = json!({});
    for (method, path, scope) in checkout_settings_routes(&demo.shop) {
        let call = |token: Option<&str>| {
            let call = server.request(method, &path);
            let call = match token {
                Some(token) => call.bearer(token),
                None => call,
            };
            call.json(&body)
        };
        call(None).assert_error(401, "auth.unauthenticated");
        call(Some(
            "mct_0000000000000000000000000000000000000000000000000000000000000000",
        ))
        .assert_error(401, "auth.unauthenticated");
        let entries = call(Some(&unrelated)).assert_error(403, "auth.forbidden");
        assert_eq!(entries[0]["sub_type"], "missing_scope", "{method} {path}");
        let lacking = if scope == "read_shop_settings" {
            &modify_only
        } else {
            &read_only
        };
        let entries = call(Some(lacking)).assert_error(403, "auth.forbidden");
        assert!(
            entries[0]["message"].as_str().unwrap().contains(scope),
            "{method} {path}: {entries:?}"
        );
        let entries = call(Some(&other_token)).assert_error(403, "auth.forbidden");
        assert_eq!(entries[0]["sub_type"], "other_shop", "{method} {path}");
    }
    for (method, path, _) in checkout_settings_routes(UNKNOWN_SHOP) {
        server
            .request(method, &path)
            .bearer(&demo.token)
            .json(&body)
            .assert_error(404, "resource.not_found");
    }
}

/// What the local override server answers on each path, once the signature checks out.
fn override_answer(path: &str) -> (u16, Value) {
    match path {
        "/address_validate" => (
            200,
            json!({ "valid": false, "errors": [{ "field": "zip", "message": "unknown zip" }] }),
        ),
        "/shipping" => (
            200,
            json!({ "shipping_lines": [{ "id": "ground", "description": "Ground", "amount": 900 }] }),
        ),
        "/shipping-new" => (
            200,
            json!({ "shipping_lines": [{ "id": 2, "description": "Express", "amount": 2500 }] }),
        ),
        "/order-shipping" => (
            200,
            json!({ "shipping_lines": [{ "id": "o", "description": "For this order", "amount": 1 }] }),
        ),
        "/tax" => (
            200,
            json!({ "taxes": [{ "name": "VAT", "amount": 210, "rate": 0.21, "tag": "vat" }] }),
        ),
        "/discount" => (
            200,
            json!({ "valid": true, "discount": { "code": "TEN", "amount": 1000, "text": "10 off" } }),
        ),
        "/inventory" => (
            200,
            json!({ "items": [{ "line_item_key": "li-1", "available": true, "quantity": 4 }] }),
        ),
        "/broken" => (
            200,
            json!({ "shipping_lines": [{ "id": "x", "amount": "free" }] }),
        ),
        "/error" => (500, json!({ "error": "boom" })),
        _ => (404, json!({ "error": "no such override" })),
    }
}

/// Stops the verifier processes when the test ends (the receiver's handler may outlive it).
struct StopVerifiers(Arc<Mutex<HashMap<String, Verifier>>>);

impl Drop for StopVerifiers {
    fn drop(&mut self) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clear();
    }
}

/// An override server that checks signatures with an independent verifier (npm's
/// `http-signature`, one per secret): 401 unless the request's draft-cavage signature matches
/// its current secret.
fn override_server(secret: Arc<Mutex<String>>) -> (Receiver, StopVerifiers) {
    // The current secret's verifier is started now: the first one installs the verifiers, which
    // must not happen inside the override's 5 s.
    let current = secret.lock().unwrap().clone();
    let verifiers = Arc::new(Mutex::new(HashMap::from([(
        current.clone(),
        http_signature(&current),
    )])));
    let stop = StopVerifiers(verifiers.clone());
    let receiver = Receiver::answering(move |request: &Received| {
        let secret = secret.lock().unwrap().clone();
        let (verified, _) = {
            let mut verifiers = verifiers.lock().unwrap();
            let verifier = verifiers
                .entry(secret.clone())
                .or_insert_with(|| http_signature(&secret));
            replay(verifier, request)
        };
        if verified != 200 {
            return (401, json!({ "error": "bad signature" }).to_string());
        }
        let path = request.target.split('?').next().unwrap_or_default();
        if path == "/slow" {
            std::thread::sleep(Duration::from_millis(1500));
        }
        let (status, body) = override_answer(path);
        (status, body.to_string())
    });
    (receiver, stop)
}

fn the_override_caller_picks_signs_and_checks_answers(backend: Backend) {
    let server = MercerServer::start_with(
        mercer_tests::TestDatabase::create(backend),
        // The flag's former name, still accepted.
        &["--webhook-allow-private"],
    );
    let demo = server.demo().clone();
    let secret = Arc::new(Mutex::new(SECRET.to_string()));
    let (receiver, _verifiers) = override_server(secret.clone());
    let create = |kind: &str, path: &str| -> String {
        let answer = server
            .post(&overrides_path(&demo.shop))
            .bearer(&demo.token)
            .json(&json!({
                "override_type": kind,
                "url": format!("{}{path}", receiver.url),
                "shared_secret": SECRET,
            }));
        assert_eq!(answer.status, 200, "{}", answer.text);
        answer.json()["data"]["id"].as_str().unwrap().to_string()
    };
    for kind in OverrideType::ALL {
        create(kind.as_str(), &format!("/{}", kind.as_str()));
    }

    let store = server.database().open_store();
    let shop = store.read(|tx| find_shop(tx, &demo.shop)).unwrap();
    // The override's 5 s limit, shortened so the slow case below takes one second.
    let caller = HttpOverrideCaller::with_timeout(
        PrivateAddressGuard::ALLOW_PRIVATE,
        Duration::from_millis(800),
    );
    let run = |orders: &[OrderOverride], kind: OverrideType| {
        overrides::run(
            &store,
            &caller,
            &shop,
            orders,
            "order-0001",
            kind,
            json!({ "line_items": [{ "key": "li-1" }] }),
        )
    };

    match run(&[], OverrideType::Shipping) {
        Ok(Some(OverrideAnswer::Shipping(lines))) => assert_eq!(
            lines,
            [ShippingLine {
                id: "ground".to_string(),
                description: "Ground".to_string(),
                amount: 900
            }]
        ),
        other => panic!("shipping: {other:?}"),
    }
    assert!(matches!(
        run(&[], OverrideType::AddressValidate),
        Ok(Some(OverrideAnswer::AddressValidate(answer))) if !answer.valid && answer.errors[0].field == "zip"
    ));
    assert!(matches!(
        run(&[], OverrideType::Tax),
        Ok(Some(OverrideAnswer::Tax(taxes))) if taxes[0].amount == 210 && taxes[0].tag.as_deref() == Some("vat")
    ));
    assert!(matches!(
        run(&[], OverrideType::Discount),
        Ok(Some(OverrideAnswer::Discount(answer))) if answer.valid && answer.discount.as_ref().unwrap().code == "TEN"
    ));
    assert!(matches!(
        run(&[], OverrideType::Inventory),
        Ok(Some(OverrideAnswer::Inventory(items))) if items[0].available && items[0].quantity == Some(4)
    ));

    // What the override received: a signed JSON POST of the documented shape.
    let received = receiver.received();
    let first = &received[0];
    assert_eq!(first.method, "POST");
    assert_eq!(first.target, "/shipping");
    let body: Value = serde_json::from_slice(&first.body).unwrap();
    assert_eq!(
        body,
        json!({
            "override_type": "shipping",
            "shop_identifier": demo.shop,
            "public_order_id": "order-0001",
            "data": { "line_items": [{ "key": "li-1" }] },
        })
    );
    assert!(first.header("signature").unwrap().starts_with(
        "keyId=\"shared_secret\",algorithm=\"hmac-sha256\",headers=\"(request-target) date digest\""
    ));
    assert!(first.header("date").unwrap().ends_with(" GMT"));
    assert_eq!(
        first.header("digest"),
        Some(mercer_signing::cavage::digest(&first.body).as_str()),
        "the body's SHA-256, which the signature covers"
    );

    // The shop's newest override of a type wins; one given for the order wins over both.
    create("shipping", "/shipping-new?source=mercer");
    assert!(matches!(
        run(&[], OverrideType::Shipping),
        Ok(Some(OverrideAnswer::Shipping(lines))) if lines[0].id == "2" && lines[0].amount == 2500
    ));
    assert_eq!(
        receiver.received().last().unwrap().target,
        "/shipping-new?source=mercer"
    );
    let order_level = [OrderOverride {
        override_type: OverrideType::Shipping,
        target: OverrideTarget {
            url: format!("{}/order-shipping", receiver.url),
            shared_secret: mercer_domain::access::credentials::Secret::new(SECRET),
        },
    }];
    assert!(matches!(
        run(&order_level, OverrideType::Shipping),
        Ok(Some(OverrideAnswer::Shipping(lines))) if lines[0].id == "o"
    ));

    let failed = |result: Result<Option<OverrideAnswer>, DomainError>, needle: &str| match result {
        Err(DomainError::Remote {
            code: "override.failed",
            timed_out: false,
            message,
            ..
        }) => assert!(message.contains(needle), "{message}"),
        other => panic!("expected override.failed with {needle:?}, got {other:?}"),
    };
    // Answers of the wrong shape, error statuses and slowness all fail the step.
    let broken = create("shipping", "/broken");
    failed(run(&[], OverrideType::Shipping), "shipping_lines[0]");
    let path = format!("{}/{broken}", overrides_path(&demo.shop));
    let moved = server
        .request("PATCH", &path)
        .bearer(&demo.token)
        .json(&json!({ "url": format!("{}/error", receiver.url) }));
    assert_eq!(moved.status, 200, "{}", moved.text);
    failed(run(&[], OverrideType::Shipping), "HTTP 500");
    server
        .request("PATCH", &path)
        .bearer(&demo.token)
        .json(&json!({ "url": format!("{}/slow", receiver.url) }));
    failed(run(&[], OverrideType::Shipping), "in time");

    // A new secret on Mercer's side signs the next request: the server, still on the old
    // secret, refuses it, and accepts again once it has the new one too.
    server
        .request("PATCH", &path)
        .bearer(&demo.token)
        .json(&json!({ "url": format!("{}/shipping", receiver.url), "shared_secret": "rotated-secret-2" }));
    failed(run(&[], OverrideType::Shipping), "HTTP 401");
    *secret.lock().unwrap() = "rotated-secret-2".to_string();
    assert!(matches!(
        run(&[], OverrideType::Shipping),
        Ok(Some(OverrideAnswer::Shipping(_)))
    ));

    // No override of a type: checkout does the function itself.
    let listed = server
        .get(&overrides_path(&demo.shop))
        .bearer(&demo.token)
        .call()
        .json();
    for stored in listed["data"].as_array().unwrap() {
        if stored["override_type"] == "discount" {
            let id = stored["id"].as_str().unwrap();
            server
                .request("DELETE", &format!("{}/{id}", overrides_path(&demo.shop)))
                .bearer(&demo.token)
                .call();
        }
    }
    assert!(matches!(run(&[], OverrideType::Discount), Ok(None)));
}

backend_tests!(
    api_overrides_are_kept_and_checked,
    checkout_settings_routes_check_credentials,
    the_override_caller_picks_signs_and_checks_answers,
);
