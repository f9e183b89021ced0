//! The headless checkout end to end (issue 15; docs/checkout.md), on SQLite and
//! PostgreSQL: the vendor's own frontend library (npm `@boldcommerce/checkout-frontend-library`
//! 0.66.0, run by Node.js) drives a whole checkout against the real `mercer` binary, with local
//! override servers and the platform simulator; a local receiver gets the six checkout topics,
//! each checked by independent verifiers.

use std::time::Duration;

use mercer_domain::platform::catalogue;
use mercer_domain::ports::Database;
use mercer_platform_sim::{Faults, MercerLink, RunningSimulator};
use mercer_tests::receiver::{Received, Receiver};
use mercer_tests::storefront::{Drive, drive};
use mercer_tests::verifiers::{http_signature, replay, standard_webhooks};
use mercer_tests::{Backend, MercerServer, TestDatabase, backend_tests, wait_until};
use serde_json::{Value, json};

/// The integration's shared secret: it signs every checkout webhook.
const SECRET: &str = "checkout-integration-secret";
/// The overrides' shared secret.
const OVERRIDE_SECRET: &str = "override-shared-secret";
const TOPICS: [&str; 6] = [
    "order/processed",
    "order/created",
    "order/fulfilled",
    "order/abandoned",
    "order/failed",
    "gift_card/created",
];

pub(crate) struct Shop {
    pub(crate) id: String,
    pub(crate) token: String,
}

/// The demo shop, connected: its orders destination on the simulator (which pushes the shop's
/// products and orders back as events), the integration secret, a webhook of each topic at
/// `hooks` (`/topic/{id}`), and the shop's overrides at `overrides` (`/{override_type}`).
pub(crate) fn set_up(
    server: &MercerServer,
    sim: &RunningSimulator,
    hooks: &Receiver,
    overrides: &Receiver,
) -> Shop {
    let demo = server.demo().clone();
    let shop = Shop {
        id: demo.shop.clone(),
        token: demo.token.clone(),
    };
    let post = |path: String, body: Value| {
        let answer = server.post(&path).bearer(&shop.token).json(&body);
        assert!(
            answer.status == 200 || answer.status == 201,
            "{path}: {} {}",
            answer.status,
            answer.text
        );
        answer.json()
    };
    let rotated = post(
        format!("/integrations/v1/shops/{}/shared_secret/rotate", shop.id),
        json!({}),
    );
    let secret = rotated["data"]["shared_secret"].as_str().unwrap();
    sim.simulator.add_shop(
        &shop.id,
        secret,
        Some(MercerLink {
            base_url: server.base_url.clone(),
            token: shop.token.clone(),
        }),
    );
    post(
        format!(
            "/integrations/v1/shops/{}/platform_connector_destinations",
            shop.id
        ),
        json!({"data": {"destination": {"shop_identifier": shop.id, "topic": "orders",
            "destination": sim.base_url, "version": "v1", "timeout_ms": 5000}}}),
    );
    post(
        format!("/checkout/shop/{}/integration/config", shop.id),
        json!({"shared_secret": SECRET}),
    );
    for id in 1..=TOPICS.len() {
        post(
            format!("/checkout/shop/{}/webhooks", shop.id),
            json!({"webhook_topic_id": id, "callback_url": format!("{}/topic/{id}", hooks.url)}),
        );
    }
    for kind in [
        "address_validate",
        "shipping",
        "tax",
        "discount",
        "inventory",
    ] {
        post(
            format!("/checkout/shop/{}/overrides", shop.id),
            json!({"override_type": kind, "url": format!("{}/{kind}", overrides.url),
                   "shared_secret": OVERRIDE_SECRET}),
        );
    }
    server
        .cli(&[
            "shop",
            "update",
            "--shop",
            &shop.id,
            "--gift-cards",
            "on",
            "--gift-card-sku",
            "GC-25",
        ])
        .value();
    // The catalogue, saved on the platform and pushed to Mercer as a Product Saved event.
    let saved = ureq::post(&format!(
        "{}/admin/shops/{}/products",
        sim.base_url, shop.id
    ))
    .send_json(
        json!({"platform_id": "prd-coffee", "name": "Coffee", "vendor": "Roaster",
            "variants": [
                {"platform_id": "var-coffee", "name": "Coffee 1kg", "sku": "COF-1KG",
                 "barcode": "0012345678905", "price": "12.50", "require_shipping": true},
                {"platform_id": "var-card", "name": "Gift card", "sku": "GC-25",
                 "price": "25.00", "require_shipping": false}]}),
    )
    .unwrap()
    .into_body()
    .read_json::<Value>()
    .unwrap();
    assert_eq!(saved["push"]["status"], 202, "{saved}");
    let store = server.database().open_store();
    let shop_id = store
        .read(|tx| Ok(tx.shop_by_identifier(&parse_identifier(&shop.id))?))
        .unwrap()
        .unwrap()
        .id;
    assert!(wait_until(Duration::from_secs(10), || {
        store
            .read(|tx| catalogue::variants(tx, shop_id, &["var-coffee", "var-card"]))
            .is_ok_and(|found| found.len() == 2)
    }));
    shop
}

fn parse_identifier(text: &str) -> mercer_domain::access::shop::ShopIdentifier {
    mercer_domain::access::shop::ShopIdentifier::parse(text).unwrap()
}

/// The overrides, answering by the path they are called at.
pub(crate) fn override_server() -> Receiver {
    override_server_writing(Numbers::Json)
}

/// How an override server writes its numbers and booleans.
#[derive(Clone, Copy, PartialEq)]
pub(crate) enum Numbers {
    Json,
    /// As text (`"500"`, `"0.05"`, `"true"`), the way servers in PHP or Ruby often do.
    Text,
}

/// Every number and boolean of `value` as its text.
fn as_text(value: Value) -> Value {
    match value {
        Value::Number(number) => Value::String(number.to_string()),
        Value::Bool(flag) => Value::String(flag.to_string()),
        Value::Array(items) => Value::Array(items.into_iter().map(as_text).collect()),
        Value::Object(map) => {
            Value::Object(map.into_iter().map(|(k, v)| (k, as_text(v))).collect())
        }
        other => other,
    }
}

/// The overrides, answering by the path they are called at, writing numbers as `numbers`
/// says. The tax override at `/tax-half-cents` answers an amount that is no whole number of
/// cents.
pub(crate) fn override_server_writing(numbers: Numbers) -> Receiver {
    Receiver::answering(move |request| {
        let body: Value = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
        let answer = match request.target.as_str() {
            "/address_validate" => json!({"valid": true, "errors": []}),
            "/shipping" => json!({"shipping_lines": [
                {"id": "ground", "description": "Ground", "amount": 500},
                {"id": "air", "description": "Air", "amount": 1500}]}),
            "/tax" => json!({"taxes": [{"name": "GST", "amount": 300, "rate": 0.05}]}),
            "/discount" if body["data"]["code"] == "TEN" => {
                json!({"valid": true, "discount": {"code": "TEN", "amount": 1000, "text": "10 off"}})
            }
            "/discount" if body["data"]["code"] == "BROKEN" => return (500, "{}".to_string()),
            "/discount" => json!({"valid": false}),
            "/inventory" => {
                let items: Vec<Value> = body["data"]["items"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default()
                    .iter()
                    .map(|item| json!({"line_item_key": item["line_item_key"], "available": true}))
                    .collect();
                json!({"items": items})
            }
            "/tax-half-cents" => {
                json!({"taxes": [{"name": "GST", "amount": "12.5", "rate": 0.05}]})
            }
            _ => return (404, "{}".to_string()),
        };
        let answer = match numbers {
            Numbers::Json => answer,
            Numbers::Text => as_text(answer),
        };
        (200, answer.to_string())
    })
}

/// Init Order (API token, `write_orders`): its `data`.
pub(crate) fn init(server: &MercerServer, shop: &Shop, body: Value) -> Value {
    let answer = server
        .post(&format!("/checkout/orders/{}/init", shop.id))
        .bearer(&shop.token)
        .json(&body);
    assert_eq!(answer.status, 200, "{}", answer.text);
    answer.json()["data"].clone()
}

fn address() -> Value {
    json!({"first_name": "Ada", "last_name": "Lovelace", "address_line_1": "1 Main St",
           "address_line_2": "", "country": "Canada", "city": "Ottawa", "province": "Ontario",
           "country_code": "CA", "province_code": "ON", "postal_code": "K1A 0A1",
           "business_name": "", "phone_number": ""})
}

/// The library's functions the issue names, in its order, paying with `token`.
pub(crate) fn whole_checkout(token: &str, shipping_line: &str) -> Value {
    json!([
        ["addGuestCustomer", "Ada", "Lovelace", "ada@example.test", true],
        ["setShippingAddress", address()],
        ["setBillingAddress", address()],
        ["getShippingLines"],
        ["changeShippingLine", shipping_line],
        ["setTaxes"],
        ["addDiscount", "TEN"],
        ["addPayment", {"gateway_public_id": "test", "token": token}],
        ["processOrder"]
    ])
}

/// Whether a state's amounts agree: total = items + shipping + taxes − discounts, balance =
/// total − payments.
fn consistent(state: &Value) -> bool {
    let sum = |list: &Value, pick: &dyn Fn(&Value) -> i64| {
        list.as_array()
            .map_or(0, |items| items.iter().map(pick).sum::<i64>())
    };
    let items = sum(&state["line_items"], &|item| {
        item["product_data"]["total_price"].as_i64().unwrap_or(0)
    });
    let shipping = state["shipping"]["selected_shipping"]["amount"]
        .as_i64()
        .unwrap_or(0);
    let taxes = sum(&state["taxes"], &|tax| tax["value"].as_i64().unwrap_or(0));
    let discounts = sum(&state["discounts"], &|d| d["value"].as_i64().unwrap_or(0));
    let payments = sum(&state["payments"], &|p| p["amount"].as_i64().unwrap_or(0));
    let total = state["order_total"].as_i64().unwrap_or(-1);
    total == items + shipping + taxes - discounts
        && state["order_balance"].as_i64() == Some(total - payments)
}

/// Every step of `drive` answered 200 with the whole application state, consistent.
pub(crate) fn assert_all_answered(drive: &Drive, except: &[&str]) {
    for step in drive.steps.iter().skip(1) {
        if except.contains(&step.function.as_str()) {
            continue;
        }
        assert!(
            step.success && step.status == 200,
            "{}: {} {}",
            step.function,
            step.status,
            step.response
        );
        let state = &step.response["data"]["application_state"];
        assert!(state.is_object(), "{}: {}", step.function, step.response);
        assert!(consistent(state), "{}: {state}", step.function);
    }
}

/// The requests at `/topic/{id}` of `topic` about order `public_order_id`, one per message.
fn deliveries(hooks: &Receiver, topic: &str, public_order_id: &str) -> Vec<Received> {
    let id = TOPICS.iter().position(|t| *t == topic).unwrap() + 1;
    let mut seen = std::collections::BTreeSet::new();
    hooks
        .received()
        .into_iter()
        .filter(|r| r.target == format!("/topic/{id}"))
        .filter(|r| {
            let body: Value = serde_json::from_slice(&r.body).unwrap_or(Value::Null);
            body["public_order_id"] == public_order_id
        })
        .filter(|r| seen.insert(r.header("webhook-id").unwrap_or_default().to_string()))
        .collect()
}

pub(crate) fn wait_for(
    hooks: &Receiver,
    topic: &str,
    public_order_id: &str,
    server: &MercerServer,
) -> Value {
    assert!(
        wait_until(Duration::from_secs(30), || !deliveries(
            hooks,
            topic,
            public_order_id
        )
        .is_empty()),
        "no {topic} for {public_order_id}\n{}",
        server.log()
    );
    serde_json::from_slice(&deliveries(hooks, topic, public_order_id)[0].body).unwrap()
}

/// Every delivery the receiver got, checked by npm's http-signature (the draft-cavage
/// `Signature`) and PyPI's standardwebhooks, with the integration secret.
pub(crate) fn assert_verified(hooks: &Receiver) {
    let (cavage, standard) = (http_signature(SECRET), standard_webhooks(SECRET));
    for request in hooks.received() {
        assert_eq!(
            replay(&cavage, &request),
            (200, "verified".to_string()),
            "{}: Signature",
            request.target
        );
        assert_eq!(
            replay(&standard, &request),
            (200, "verified".to_string()),
            "{}: Standard Webhooks",
            request.target
        );
    }
}

/// The library runs a whole checkout: every answer carries a consistent application state;
/// the order is processed, pushed to the platform with its `public_order_id` as
/// Idempotency-Key and paid once; `order/processed`, `order/created`, `gift_card/created`, a
/// subscription of the plan's line item, then `order/fulfilled` from the platform's Order
/// Saved event. A declined payment and a platform refusing the order each give `order/failed`.
fn the_frontend_library_runs_a_whole_checkout(backend: Backend) {
    let sim = RunningSimulator::start().unwrap();
    let (hooks, overrides) = (Receiver::start(), override_server());
    let server = MercerServer::start_with(
        TestDatabase::create(backend),
        &["--allow-private-targets", "--job-lease", "2"],
    );
    let shop = set_up(&server, &sim, &hooks, &overrides);
    // The plan's subscription group.
    let group = server
        .post(&format!(
            "/subscriptions/v1/shops/{}/subscription_groups",
            shop.id
        ))
        .bearer(&shop.token)
        .json(&json!({"subscription_group": {"name": "Coffee club",
            "billing_rules": [{"interval_number": 1, "interval_type": "month"}]}}));
    assert_eq!(group.status, 201, "{}", group.text);
    let group_id = group.json()["subscription_group"]["id"].as_i64().unwrap();

    // Success, with a gift card and a subscription plan.
    let data = init(
        &server,
        &shop,
        json!({"cart_items": [
            {"platform_id": "var-coffee", "quantity": 2, "line_item_key": "coffee"},
            {"platform_id": "var-card", "quantity": 1, "line_item_key": "card"},
            {"platform_id": "var-coffee", "quantity": 1, "line_item_key": "plan",
             "line_item_properties": {"subscription_group_id": group_id.to_string(),
                 "order_rrule": "DTSTART:20261101T090000Z\nRRULE:FREQ=MONTHLY"}}]}),
    );
    let public_order_id = data["public_order_id"].as_str().unwrap().to_string();
    assert_eq!(
        data["application_state"]["order_total"],
        2 * 1250 + 2500 + 1250
    );
    let run = drive(
        &server.base_url,
        &shop.id,
        &data,
        whole_checkout("tok_success", "1"),
    );
    assert!(run.step("initialize").success);
    assert_all_answered(&run, &[]);
    let processed = &run.step("processOrder").response["data"]["application_state"];
    assert_eq!(processed["is_processed"], true);
    assert_eq!(
        processed["order_total"],
        2 * 1250 + 2500 + 1250 + 1500 + 300 - 1000,
        "items, the second shipping line, the tax override's tax, less the discount"
    );
    assert_eq!(processed["order_balance"], 0);
    assert_eq!(
        run.state["is_processed"], true,
        "the library holds the state"
    );
    assert_eq!(
        run.step("changeShippingLine").response["data"]["selected_shipping"]["id"],
        "air"
    );

    let created = wait_for(&hooks, "order/created", &public_order_id, &server);
    let platform_order_id = created["platform_order_id"].as_str().unwrap().to_string();
    assert!(!platform_order_id.is_empty());
    assert_ne!(created["platform_friendly_identifier"], "");
    let processed_hook = wait_for(&hooks, "order/processed", &public_order_id, &server);
    assert_eq!(
        processed_hook["application_state"], *processed,
        "the state the storefront was shown"
    );
    for field in [
        "platform_domain",
        "domain",
        "order_id",
        "order_source",
        "order_source_name",
    ] {
        assert!(!processed_hook[field].is_null(), "{field}");
    }
    assert_eq!(processed_hook["fulfillment_status"], "unfulfilled");
    assert_eq!(processed_hook["fulfillment_data"], json!([]));
    let card = wait_for(&hooks, "gift_card/created", &public_order_id, &server);
    assert_eq!(card["gift_card_amount"], 2500);
    assert_eq!(card["customer"]["email_address"], "ada@example.test");
    let keys: Vec<String> = sim
        .simulator
        .lock()
        .requests
        .iter()
        .filter(|r| r.method == "POST" && r.path.ends_with("/orders"))
        .filter_map(|r| r.idempotency_key.clone())
        .collect();
    assert_eq!(
        keys,
        std::slice::from_ref(&public_order_id),
        "Create Order keyed by the order"
    );
    let payments = sim
        .simulator
        .lock()
        .shops
        .get(&shop.id)
        .and_then(|s| s.orders.get(&platform_order_id).cloned())
        .and_then(|o| o.payments)
        .unwrap_or_default();
    assert_eq!(payments.len(), 1, "paid once");
    let subscriptions = server
        .get(&format!(
            "/subscriptions/v1/shops/{}/subscriptions?limit=10",
            shop.id
        ))
        .bearer(&shop.token)
        .call()
        .json();
    assert_eq!(subscriptions["pagination"]["total"], 1, "{subscriptions}");
    let plan = &subscriptions["subscriptions"][0];
    assert_eq!(plan["line_items"][0]["platform_variant_id"], "var-coffee");
    assert_eq!(plan["line_items"][0]["quantity"], 1);
    assert_eq!(plan["payment_method_token"], "tok_success");

    // The order refuses changes now; another order's token or none is 401.
    let storefront =
        |path: &str| format!("/checkout/storefront/{}/{public_order_id}{path}", shop.id);
    let jwt = data["jwt_token"].as_str().unwrap();
    server
        .request("PUT", &storefront("/customer"))
        .bearer(jwt)
        .json(&json!({"first_name": "Late", "email_address": "late@example.test"}))
        .assert_error(422, "order.processed");
    server
        .get(&storefront("/refresh"))
        .call()
        .assert_error(401, "auth.unauthenticated");
    let other = init(
        &server,
        &shop,
        json!({"cart_items": [{"platform_id": "var-coffee", "quantity": 1}]}),
    );
    server
        .get(&storefront("/refresh"))
        .bearer(other["jwt_token"].as_str().unwrap())
        .call()
        .assert_error(401, "auth.unauthenticated");
    // An override that fails: 502 in the library's error shape, the order unchanged.
    let other_id = other["public_order_id"].as_str().unwrap();
    let broken = server
        .post(&format!(
            "/checkout/storefront/{}/{other_id}/discounts",
            shop.id
        ))
        .bearer(other["jwt_token"].as_str().unwrap())
        .json(&json!({"code": "BROKEN"}));
    broken.assert_error(502, "override.failed");
    let entry = &broken.errors()[0];
    for field in ["message", "type", "severity", "sub_type"] {
        assert!(entry[field].is_string(), "{field}: {entry}");
    }

    // The platform fulfils the order: order/fulfilled, with fulfillment_data an object.
    let patched = ureq::patch(&format!(
        "{}/admin/shops/{}/orders/{platform_order_id}",
        sim.base_url, shop.id
    ))
    .send_json(json!({"fulfillment_status": "fulfilled"}))
    .unwrap()
    .into_body()
    .read_json::<Value>()
    .unwrap();
    assert_eq!(patched["push"]["status"], 202, "{patched}");
    let fulfilled = wait_for(&hooks, "order/fulfilled", &public_order_id, &server);
    assert_eq!(fulfilled["fulfillment_status"], "fulfilled");
    let data_object = &fulfilled["fulfillment_data"];
    assert!(data_object.is_object());
    for field in [
        "total_value",
        "total_shipping_value",
        "total_discount",
        "total_fees",
        "total_order_fees",
        "total_tax",
        "location_id",
        "item_count",
        "shipping_details",
        "fulfilled_items",
        "order_fees",
        "tracking_company",
        "tracking_number",
        "tracking_url",
        "fulfilled_at",
    ] {
        assert!(!data_object[field].is_null(), "fulfillment_data.{field}");
    }
    assert_eq!(data_object["item_count"], 4);

    // A declined payment: processOrder is refused and order/failed is sent.
    let declined = init(
        &server,
        &shop,
        json!({"cart_items": [{"platform_id": "var-coffee", "quantity": 1}]}),
    );
    let declined_id = declined["public_order_id"].as_str().unwrap().to_string();
    let run = drive(
        &server.base_url,
        &shop.id,
        &declined,
        whole_checkout("tok_decline", "0"),
    );
    assert_all_answered(&run, &["processOrder"]);
    let refused = run.step("processOrder");
    assert!(
        !refused.success && refused.status == 422,
        "{}",
        refused.response
    );
    assert_eq!(
        refused.response["errors"][0]["sub_type"],
        "payment_declined"
    );
    let failed = wait_for(&hooks, "order/failed", &declined_id, &server);
    assert_eq!(failed["platform_order_id"], "");

    // A platform that refuses the order: processed, then order/failed.
    let refusing = init(
        &server,
        &shop,
        json!({"cart_items": [{"platform_id": "var-coffee", "quantity": 1}]}),
    );
    let refusing_id = refusing["public_order_id"].as_str().unwrap().to_string();
    sim.simulator.lock().faults = Faults {
        status: Some(422),
        ..Faults::default()
    };
    let run = drive(
        &server.base_url,
        &shop.id,
        &refusing,
        whole_checkout("tok_success", "0"),
    );
    assert_all_answered(&run, &[]);
    wait_for(&hooks, "order/processed", &refusing_id, &server);
    let failed = wait_for(&hooks, "order/failed", &refusing_id, &server);
    assert_eq!(failed["application_state"]["is_processed"], true);
    sim.simulator.lock().faults = Faults::default();

    // The overrides were called signed with their secret.
    let called = overrides.received();
    assert!(called.iter().any(|r| r.target == "/tax"));
    let verifier = http_signature(OVERRIDE_SECRET);
    for request in &called {
        assert_eq!(
            replay(&verifier, request),
            (200, "verified".to_string()),
            "override {}",
            request.target
        );
    }
    std::thread::sleep(Duration::from_millis(500));
    assert_verified(&hooks);
}

/// A checkout with items and an email, left alone past the abandonment delay while the shop's
/// built-in emails are off, gives `order/abandoned` once; the settings routes show and change
/// the shop's checkout settings.
fn an_abandoned_checkout_is_reported_once(backend: Backend) {
    let sim = RunningSimulator::start().unwrap();
    let (hooks, overrides) = (Receiver::start(), override_server());
    let server = MercerServer::start_with(
        TestDatabase::create(backend),
        &[
            "--allow-private-targets",
            "--abandonment-delay-s",
            "2",
            "--abandonment-interval-s",
            "1",
        ],
    );
    let shop = set_up(&server, &sim, &hooks, &overrides);
    let settings = format!("/checkout/shop/{}/settings", shop.id);
    let shown = server.get(&settings).bearer(&shop.token).call();
    assert_eq!(shown.status, 200, "{}", shown.text);
    assert_eq!(
        shown.json()["data"],
        json!({"abandoned_cart_emails": true, "gift_cards_enabled": true,
               "gift_card_skus": ["GC-25"], "flat_shipping_rate": 0})
    );
    // The shopper is a customer the platform knows.
    let known = ureq::post(&format!(
        "{}/admin/shops/{}/customers",
        sim.base_url, shop.id
    ))
    .send_json(json!({"email": "gone@example.test", "first_name": "Gone"}))
    .unwrap()
    .into_body()
    .read_json::<Value>()
    .unwrap();
    let platform_customer = known["data"]["platform_id"].as_str().unwrap().to_string();
    let directory = format!(
        "/customers/v2/shops/{}/customers/pid/{platform_customer}",
        shop.id
    );
    assert!(wait_until(Duration::from_secs(10), || server
        .get(&directory)
        .bearer(&shop.token)
        .call()
        .status
        == 200));
    let abandoned = init(
        &server,
        &shop,
        json!({"cart_items": [{"platform_id": "var-coffee", "quantity": 1}],
               "customer": {"email_address": "gone@example.test", "first_name": "Gone"}}),
    );
    let abandoned_id = abandoned["public_order_id"].as_str().unwrap().to_string();
    // An address, the tax and a discount before the shopper leaves.
    let run = drive(
        &server.base_url,
        &shop.id,
        &abandoned,
        json!([
            ["setShippingAddress", address()],
            ["setBillingAddress", address()],
            ["setTaxes"],
            ["addDiscount", "TEN"]
        ]),
    );
    assert_all_answered(&run, &[]);
    // The shop's own emails are on: nothing is sent.
    std::thread::sleep(Duration::from_secs(4));
    assert!(deliveries(&hooks, "order/abandoned", &abandoned_id).is_empty());
    let changed = server
        .request("PATCH", &settings)
        .bearer(&shop.token)
        .json(&json!({"abandoned_cart_emails": false, "flat_shipping_rate": 700}));
    assert_eq!(changed.status, 200, "{}", changed.text);
    assert_eq!(changed.json()["data"]["abandoned_cart_emails"], false);
    server
        .request("PATCH", &settings)
        .bearer(&shop.token)
        .json(&json!({"flat_shipping_rate": -1}))
        .assert_error(422, "validation.failed");
    let payload = wait_for(&hooks, "order/abandoned", &abandoned_id, &server);
    let customer = &payload["customer"];
    assert_eq!(customer["email_address"], "gone@example.test");
    assert_eq!(
        customer["platform_id"],
        json!(platform_customer),
        "{customer}"
    );
    assert_eq!(
        customer["saved_addresses"].as_array().map(Vec::len),
        Some(1)
    );
    assert_eq!(customer["saved_addresses"][0]["city"], "Ottawa");
    let line = &payload["line_items"][0];
    assert_eq!(line["product_data"]["variant_id"], "var-coffee");
    assert_eq!(line["product_data"]["barcode"], "0012345678905");
    assert_eq!(
        (&line["taxes"][0]["name"], &line["taxes"][0]["value"]),
        (&json!("GST"), &json!(300)),
        "{line}"
    );
    assert_eq!(
        (
            &line["discounts"][0]["code"],
            &line["discounts"][0]["value"]
        ),
        (&json!("TEN"), &json!(1000)),
        "{line}"
    );
    assert!(
        payload["resumable_link"]
            .as_str()
            .unwrap()
            .ends_with(&abandoned_id)
    );
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(
        deliveries(&hooks, "order/abandoned", &abandoned_id).len(),
        1,
        "once"
    );
    assert_verified(&hooks);
}

/// Override servers written in PHP or Ruby often answer numbers and booleans as text: the
/// library's whole checkout goes through the same against one, and an answer that is wrong
/// anyway fails its step with a 502 naming the answer's field.
fn the_frontend_library_checks_out_with_overrides_answering_in_text(backend: Backend) {
    let sim = RunningSimulator::start().unwrap();
    let (hooks, overrides) = (Receiver::start(), override_server_writing(Numbers::Text));
    let server = MercerServer::start_with(
        TestDatabase::create(backend),
        &["--allow-private-targets", "--job-lease", "2"],
    );
    let shop = set_up(&server, &sim, &hooks, &overrides);
    let data = init(
        &server,
        &shop,
        json!({"cart_items": [{"platform_id": "var-coffee", "quantity": 2, "line_item_key": "coffee"}]}),
    );
    let run = drive(
        &server.base_url,
        &shop.id,
        &data,
        whole_checkout("tok_success", "1"),
    );
    assert_all_answered(&run, &[]);
    let processed = &run.step("processOrder").response["data"]["application_state"];
    assert_eq!(processed["is_processed"], true);
    assert_eq!(
        processed["order_total"],
        2 * 1250 + 1500 + 300 - 1000,
        "items, the air shipping line, the tax, less the discount: all answered as text"
    );
    assert_eq!(processed["taxes"][0]["value"], 300);

    // A tax of 12.5 cents is no amount, as text or not: 502 naming taxes[0].amount.
    let answer = server
        .post(&format!("/checkout/shop/{}/overrides", shop.id))
        .bearer(&shop.token)
        .json(
            &json!({"override_type": "tax", "url": format!("{}/tax-half-cents", overrides.url),
                      "shared_secret": OVERRIDE_SECRET}),
        );
    assert!(answer.status < 300, "{}", answer.text);
    let other = init(
        &server,
        &shop,
        json!({"cart_items": [{"platform_id": "var-coffee", "quantity": 1}]}),
    );
    let run = drive(
        &server.base_url,
        &shop.id,
        &other,
        json!([["setShippingAddress", address()], ["setTaxes"]]),
    );
    let failed = run.step("setTaxes");
    assert_eq!((failed.success, failed.status), (false, 502), "{failed:?}");
    let error = &failed.response["errors"][0];
    assert_eq!(
        (&error["type"], &error["field"]),
        (&json!("override.failed"), &json!("taxes[0].amount")),
        "{error}"
    );
}

/// The subscription messages `receiver` got of `topic` (registered at `/sub/{topic}`).
fn subscription_messages(receiver: &Receiver, topic: &str) -> Vec<Value> {
    receiver
        .received()
        .into_iter()
        .filter(|r| r.target == format!("/sub/{topic}"))
        .map(|r| serde_json::from_slice(&r.body).unwrap())
        .collect()
}

/// Subscription topics of a checkout's plans: a declined payment is
/// `subscription_payment_failed` (the initial transaction failed); a payment method whose
/// expiry the storefront gave reaches the subscription, which the scheduler announces as
/// expiring like any other.
fn a_checkouts_plans_send_payment_failed_and_expiring_payment(backend: Backend) {
    let sim = RunningSimulator::start().unwrap();
    let (hooks, overrides, subs) = (Receiver::start(), override_server(), Receiver::start());
    let server = MercerServer::start_with(
        TestDatabase::create(backend),
        &[
            "--allow-private-targets",
            "--job-lease",
            "2",
            "--scheduler-interval-ms",
            "300",
        ],
    );
    let shop = set_up(&server, &sim, &hooks, &overrides);
    for topic in [
        "subscription_payment_failed",
        "subscription_expiring_payment",
    ] {
        let id = crate::subscriptions::TOPICS
            .iter()
            .position(|t| *t == topic)
            .unwrap()
            + 1;
        let created = server
            .post(&format!("/subscriptions/v1/shops/{}/webhooks/subscriptions", shop.id))
            .bearer(&shop.token)
            .json(&json!({"webhook_subscription": {"callback_url": format!("{}/sub/{topic}", subs.url),
                "webhook_topic_id": id, "shared_secret": "subscription-secret"}}));
        assert_eq!(created.status, 201, "{}", created.text);
    }
    let plan = json!({"cart_items": [{"platform_id": "var-coffee", "quantity": 1, "line_item_key": "plan",
        "line_item_properties": {"order_rrule": "DTSTART:20261101T090000Z\nRRULE:FREQ=MONTHLY",
                                 "gift_note": "For Ada"}}]});
    let paying = |token: &str, extra: Value| {
        json!([
            ["addGuestCustomer", "Ada", "Lovelace", "ada@example.test", true],
            ["setShippingAddress", address()],
            ["setBillingAddress", address()],
            ["getShippingLines"],
            ["changeShippingLine", "0"],
            ["setTaxes"],
            ["addPayment", {"gateway_public_id": "test", "token": token, "extra_payment_data": extra}],
            ["processOrder"]
        ])
    };
    let declined = init(&server, &shop, plan.clone());
    let run = drive(
        &server.base_url,
        &shop.id,
        &declined,
        paying("tok_decline", json!({})),
    );
    assert!(!run.step("processOrder").success);
    assert!(
        wait_until(Duration::from_secs(15), || !subscription_messages(
            &subs,
            "subscription_payment_failed"
        )
        .is_empty()),
        "{}",
        server.log()
    );
    let failed = &subscription_messages(&subs, "subscription_payment_failed")[0];
    assert_eq!(failed["data"]["id"], Value::Null, "{failed}");
    assert_eq!(failed["data"]["customer"]["email"], "ada@example.test");
    assert_eq!(
        failed["order"]["public_order_id"],
        declined["public_order_id"]
    );
    assert_eq!(failed["order"]["failure_code"], "payment_declined");

    // Paid with a card that expires at the end of this month.
    let month = mercer_domain::Timestamp::now().to_rfc3339()[..7].to_string();
    let paid = init(&server, &shop, plan);
    let run = drive(
        &server.base_url,
        &shop.id,
        &paid,
        paying("tok_success", json!({"expires_at": month})),
    );
    assert!(
        run.step("processOrder").success,
        "{:?}",
        run.step("processOrder")
    );
    assert!(
        wait_until(Duration::from_secs(30), || !subscription_messages(
            &subs,
            "subscription_expiring_payment"
        )
        .is_empty()),
        "{}",
        server.log()
    );
    let expiring = &subscription_messages(&subs, "subscription_expiring_payment")[0];
    assert_eq!(
        expiring["data"]["payment_method_expires_at"],
        json!(month),
        "{expiring}"
    );
    assert_eq!(expiring["data"]["external_id"], paid["public_order_id"]);
    // The subscription's line item is the catalogue's, with the plan's other properties as
    // its attributes; it ships with the line the shopper chose.
    let item = &expiring["data"]["line_items"][0];
    assert_eq!(
        (&item["title"], &item["sku"]),
        (&json!("Coffee 1kg"), &json!("COF-1KG"))
    );
    assert_eq!(
        item["line_item_attributes"][0]["name"], "gift_note",
        "{item}"
    );
    assert_eq!(item["line_item_attributes"][0]["value"], "For Ada");
    let shipping = &expiring["data"]["shipping_lines"][0];
    assert_eq!(
        (&shipping["name"], &shipping["price"]),
        (&json!("Ground"), &json!(500))
    );
}

/// Overrides answering as [`override_server`] does, but for a `discount` override that allows
/// one discount per order: 2.50 off, under the code as typed, unless one is applied already.
fn one_discount_per_order() -> Receiver {
    Receiver::answering(move |request| {
        let body: Value = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
        let answer = match request.target.as_str() {
            "/address_validate" => json!({"valid": true, "errors": []}),
            "/shipping" => {
                json!({"shipping_lines": [{"id": "ground", "description": "Ground", "amount": 500}]})
            }
            "/tax" => json!({"taxes": [{"name": "GST", "amount": 300, "rate": 0.05}]}),
            "/discount" => {
                let applied = body["data"]["applied_discounts"]
                    .as_array()
                    .map_or(0, Vec::len);
                if applied == 0 {
                    json!({"valid": true, "discount": {"code": body["data"]["code"],
                                                       "amount": 250, "text": "2.50 off"}})
                } else {
                    json!({"valid": false})
                }
            }
            "/inventory" => {
                let items: Vec<Value> = body["data"]["items"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default()
                    .iter()
                    .map(|item| json!({"line_item_key": item["line_item_key"], "available": true}))
                    .collect();
                json!({"items": items})
            }
            _ => return (404, "{}".to_string()),
        };
        (200, answer.to_string())
    })
}

/// A code in another letter case is no second discount; the storefront's bodies are bounded
/// (quantities 1..10,000, a line's properties 16 KiB, the order 512 KiB); and the order of a
/// customer the platform knows reaches it as that customer's, not a guest's.
fn a_checkout_takes_one_discount_per_code_stays_bounded_and_names_its_customer(backend: Backend) {
    let sim = RunningSimulator::start().unwrap();
    let (hooks, overrides) = (Receiver::start(), one_discount_per_order());
    let server = MercerServer::start_with(
        TestDatabase::create(backend),
        &["--allow-private-targets", "--job-lease", "2"],
    );
    let shop = set_up(&server, &sim, &hooks, &overrides);
    // The platform's customer, pushed to Mercer as a Customer Saved event.
    let saved = ureq::post(&format!(
        "{}/admin/shops/{}/customers",
        sim.base_url, shop.id
    ))
    .send_json(json!({"email": "ada@example.test", "first_name": "Ada", "last_name": "Lovelace"}))
    .unwrap()
    .into_body()
    .read_json::<Value>()
    .unwrap();
    assert_eq!(saved["push"]["status"], 202, "{saved}");
    let customer_id = saved["data"]["platform_id"].as_str().unwrap().to_string();
    let customers = format!("/customers/v2/shops/{}/customers?limit=250", shop.id);
    assert!(wait_until(Duration::from_secs(10), || {
        let listed = server.get(&customers).bearer(&shop.token).call().json();
        listed["customers"]
            .as_array()
            .is_some_and(|all| all.iter().any(|c| c["email"] == "ada@example.test"))
    }));

    let data = init(
        &server,
        &shop,
        json!({"cart_items": [{"platform_id": "var-coffee", "quantity": 1, "line_item_key": "coffee"}]}),
    );
    let public_order_id = data["public_order_id"].as_str().unwrap().to_string();
    let jwt = data["jwt_token"].as_str().unwrap().to_string();
    let storefront = |method: &str, path: &str, body: Value| {
        server
            .request(
                method,
                &format!("/checkout/storefront/{}/{public_order_id}{path}", shop.id),
            )
            .bearer(&jwt)
            .json(&body)
    };
    let first_problem = |answer: mercer_tests::Answer| {
        let entry = answer.assert_error(422, "validation.failed")[0].clone();
        (
            entry["field"].as_str().unwrap_or_default().to_string(),
            entry["sub_type"].as_str().unwrap_or_default().to_string(),
        )
    };
    // Bounds of the storefront's bodies.
    let properties = |bytes: usize| json!({ "k": "v".repeat(bytes - 8) });
    assert_eq!(
        first_problem(storefront(
            "POST",
            "/items",
            json!({"platform_id": "var-coffee",
            "quantity": 1, "line_item_key": "big", "line_item_properties": properties(16 * 1024 + 1)})
        )),
        ("line_item_properties".to_string(), "too_large".to_string())
    );
    assert_eq!(
        first_problem(storefront(
            "POST",
            "/items",
            json!({"platform_id": "var-coffee",
            "quantity": 10_001})
        )),
        ("quantity".to_string(), "out_of_range".to_string())
    );
    assert_eq!(
        first_problem(storefront(
            "PUT",
            "/items",
            json!({"line_item_key": "coffee",
            "quantity": 10_001})
        )),
        ("quantity".to_string(), "out_of_range".to_string())
    );
    let mut added = 0;
    let refused = loop {
        let answer = storefront(
            "POST",
            "/items",
            json!({"platform_id": "var-coffee",
            "quantity": 1, "line_item_key": format!("line-{added}"),
            "line_item_properties": properties(16 * 1024)}),
        );
        if answer.status != 200 {
            break answer;
        }
        added += 1;
        assert!(added < 40, "the order grew past 512 KiB");
    };
    assert_eq!(
        first_problem(refused),
        ("line_item_properties".to_string(), "too_large".to_string())
    );
    assert!(added >= 25, "{added} lines of 16 KiB fit in 512 KiB");
    for index in 0..added {
        let answer = storefront(
            "DELETE",
            "/items",
            json!({"line_item_key": format!("line-{index}")}),
        );
        assert_eq!(answer.status, 200, "{}", answer.text);
    }

    // SAVE, then the same code in other letter cases: one discount of 2.50.
    let run = drive(
        &server.base_url,
        &shop.id,
        &data,
        json!([
            ["addGuestCustomer", "Ada", "Lovelace", "ada@example.test", true],
            ["setShippingAddress", address()],
            ["setBillingAddress", address()],
            ["getShippingLines"],
            ["changeShippingLine", "0"],
            ["setTaxes"],
            ["addDiscount", "SAVE"],
            ["addDiscount", "save"],
            ["addDiscount", "Save"],
            ["addDiscount", "sAVE"],
            ["addPayment", {"gateway_public_id": "test", "token": "tok_success"}],
            ["processOrder"]
        ]),
    );
    let refused: Vec<u16> = run
        .steps
        .iter()
        .filter(|step| step.function == "addDiscount")
        .map(|step| step.status)
        .collect();
    assert_eq!(refused, [200, 422, 422, 422], "{:?}", run.steps);
    let processed = &run.step("processOrder").response["data"]["application_state"];
    assert_eq!(
        processed["is_processed"],
        true,
        "{}",
        run.step("processOrder").response
    );
    assert_eq!(processed["discounts"].as_array().unwrap().len(), 1);
    assert_eq!(processed["order_total"], 1250 + 500 + 300 - 250);

    // Pushed as the platform customer's order.
    let created = wait_for(&hooks, "order/created", &public_order_id, &server);
    let platform_order_id = created["platform_order_id"].as_str().unwrap().to_string();
    let order = sim
        .simulator
        .lock()
        .shops
        .get(&shop.id)
        .and_then(|s| s.orders.get(&platform_order_id).cloned())
        .unwrap();
    assert_eq!(
        order.platform_customer_id.as_ref().map(|id| id.as_str()),
        Some(customer_id.as_str())
    );
}

backend_tests!(
    a_checkout_takes_one_discount_per_code_stays_bounded_and_names_its_customer,
    the_frontend_library_runs_a_whole_checkout,
    a_checkouts_plans_send_payment_failed_and_expiring_payment,
    the_frontend_library_checks_out_with_overrides_answering_in_text,
    an_abandoned_checkout_is_reported_once,
);
