//! The records the fuzzer works on, made through the API (and the simulator's admin API) before
//! the run, and the pins that point the routes naming them at them.

use std::time::Duration;

use mercer_platform_sim::{MercerLink, RunningSimulator};
use mercer_tests::receiver::Receiver;
use mercer_tests::schemathesis::{Credentials, Pin, Plan};
use mercer_tests::{MercerServer, wait_until};
use serde_json::{Value, json};

/// What the run needs of the seed; the simulator and the receiver live as long as it.
pub struct Seeded {
    pub plan: Plan,
    _simulator: RunningSimulator,
    _receiver: Receiver,
}

/// The demo shop's API, with its token.
struct Api<'a> {
    server: &'a MercerServer,
    shop: String,
    token: String,
}

impl Api<'_> {
    /// `method path` with `body`, which must succeed: its answer.
    fn send(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        let call = self
            .server
            .request(method, &path.replace("{shop}", &self.shop))
            .bearer(&self.token);
        let answer = match body {
            Some(body) => call.json(&body),
            None => call.call(),
        };
        assert!(
            answer.status < 300,
            "seeding {method} {path}: {} {}",
            answer.status,
            answer.text
        );
        answer.json()
    }
}

pub fn seed(server: &MercerServer) -> Seeded {
    let api = Api {
        server,
        shop: server.demo().shop.clone(),
        token: server.demo().token.clone(),
    };
    let simulator = connect_simulator(&api);
    let receiver = Receiver::start();
    let group = api.send(
        "POST",
        "/subscriptions/v1/shops/{shop}/subscription_groups",
        Some(
            json!({"subscription_group": {"name": "Coffee club", "billing_rules": [
            {"interval_number": 1, "interval_type": "month"}]}}),
        ),
    )["subscription_group"]
        .clone();
    let subscription = api.send(
        "POST",
        "/subscriptions/v1/shops/{shop}/subscriptions",
        Some(subscription_body()),
    )["subscription"]
        .clone();
    let webhook = api.send(
        "POST",
        "/subscriptions/v1/shops/{shop}/webhooks/subscriptions",
        Some(
            json!({"webhook_subscription": {"callback_url": receiver.url,
            "webhook_topic_id": 1, "shared_secret": "fuzz-secret-0123456789"}}),
        ),
    )["webhook_subscription"]
        .clone();
    let box_id = api.send(
        "POST",
        "/box_builder/v1/shops/{shop}/boxes",
        Some(json!({"box": {"svc_subscription_group_id": group["id"],
            "box_name": "Coffee box"}})),
    )["data"]["box"]["id"]
        .clone();
    let box_product_id = box_product(&api)["id"].clone();
    let box_size_id = api.send(
        "POST",
        &format!("/box_builder/v1/shops/{{shop}}/boxes/{box_id}/box_sizes"),
        Some(
            json!({"box_size": {"box_size_name": "Small", "min_quantity": 1,
            "max_quantity": 4}}),
        ),
    )["data"]["id"]
        .clone();
    let time_slot_id = api.send(
        "POST",
        &format!("/box_builder/v1/shops/{{shop}}/boxes/{box_id}/time_slots"),
        Some(json!({"time_slot": {"time_slot_name": "Week 1",
            "visibility_date": "2020-01-01T00:00:00Z",
            "selection_deadline_date": "2030-01-04T00:00:00Z",
            "start_date": "2030-01-07T00:00:00Z", "end_date": "2030-01-13T23:59:59Z"}})),
    )["data"]["time-slot"]["id"]
        .clone();
    api.send(
        "POST",
        &format!("/box_builder/v1/shops/{{shop}}/time_slots/{time_slot_id}/options"),
        Some(json!({"box_product_id": box_product_id})),
    );
    let order = api.send(
        "POST",
        "/checkout/orders/{shop}/init",
        Some(json!({"cart_items": [
            {"platform_id": "var-coffee", "quantity": 1, "line_item_key": "coffee"}]})),
    )["data"]
        .clone();
    let (customer, customer_token) = platform_customer(&simulator, &api.shop);

    let ids = Ids {
        group: &group["id"],
        subscription: &subscription,
        webhook: &webhook["id"],
        box_id: &box_id,
        box_product: &box_product_id,
        box_size: &box_size_id,
        time_slot: &time_slot_id,
        order: &order["public_order_id"],
        customer: &json!(customer),
    };
    Seeded {
        plan: Plan {
            credentials: Credentials {
                api_token: api.token.clone(),
                checkout_jwt: text(&order["jwt_token"]),
                customer_token,
            },
            pins: pins(&ids),
            skipped: vec!["rotate_connector_secret"],
        },
        _simulator: simulator,
        _receiver: receiver,
    }
}

/// The simulator as the shop's connector of every topic, with a product of two variants
/// (pushed to Mercer as a Product Saved event).
fn connect_simulator(api: &Api<'_>) -> RunningSimulator {
    let rotated = api.send(
        "POST",
        "/integrations/v1/shops/{shop}/shared_secret/rotate",
        None,
    );
    let simulator = RunningSimulator::start().expect("the simulator starts");
    simulator.simulator.add_shop(
        &api.shop,
        &text(&rotated["data"]["shared_secret"]),
        Some(MercerLink {
            base_url: api.server.base_url.clone(),
            token: api.token.clone(),
        }),
    );
    for topic in ["customers", "orders", "products"] {
        api.send(
            "POST",
            "/integrations/v1/shops/{shop}/platform_connector_destinations",
            Some(json!({"data": {"destination": {"topic": topic,
                "destination": simulator.base_url, "version": "v1", "timeout_ms": 2000}}})),
        );
    }
    let saved = sim_admin(
        &format!("{}/admin/shops/{}/products", simulator.base_url, api.shop),
        Some(json!({"platform_id": "prd-coffee", "name": "Coffee",
            "variants": [
                {"platform_id": "var-coffee", "name": "Coffee 1kg", "price": "12.50",
                 "require_shipping": true},
                {"platform_id": "var-beans", "name": "Beans 250g", "price": "5.00",
                 "require_shipping": true}]})),
    );
    assert_eq!(saved["push"]["status"], 202, "{saved}");
    simulator
}

/// A box product of the seeded product, once Mercer has applied its event.
fn box_product(api: &Api<'_>) -> Value {
    let path = format!("/box_builder/v1/shops/{}/box_products", api.shop);
    let body = json!({"box_product": {"platform_product_id": "prd-coffee",
        "platform_variant_id": "var-coffee"}});
    let mut made = Value::Null;
    let applied = wait_until(Duration::from_secs(10), || {
        let answer = api.server.post(&path).bearer(&api.token).json(&body);
        if answer.status == 201 {
            made = answer.json()["data"]["box_product"].clone();
        }
        answer.status == 201
    });
    assert!(applied, "the product event was not applied");
    made
}

/// A customer of the platform (pushed to Mercer) and a token the platform issued them.
fn platform_customer(simulator: &RunningSimulator, shop: &str) -> (String, String) {
    let base = format!("{}/admin/shops/{shop}/customers", simulator.base_url);
    let made = sim_admin(
        &base,
        Some(json!({"email": "grace@fuzz.test", "first_name": "Grace"})),
    );
    let id = text(&made["data"]["platform_id"]);
    let issued = sim_admin(&format!("{base}/{id}/token"), None);
    (id, text(&issued["token"]))
}

/// A POST to the simulator's admin API: its JSON answer.
fn sim_admin(url: &str, body: Option<Value>) -> Value {
    let request = ureq::post(url);
    let answer = match body {
        Some(body) => request.send_json(body),
        None => request.send_empty(),
    };
    answer
        .unwrap_or_else(|error| panic!("POST {url}: {error}"))
        .into_body()
        .read_json()
        .unwrap_or_else(|error| panic!("POST {url}: {error}"))
}

fn text(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

/// The seeded records' ids.
struct Ids<'a> {
    group: &'a Value,
    subscription: &'a Value,
    webhook: &'a Value,
    box_id: &'a Value,
    box_product: &'a Value,
    box_size: &'a Value,
    time_slot: &'a Value,
    order: &'a Value,
    customer: &'a Value,
}

/// Each route family naming a seeded record, pointed at it. The regexes do not overlap.
fn pins(ids: &Ids<'_>) -> Vec<Pin> {
    let pin = |path_regex: &str, parameters: &[(&'static str, &Value)]| Pin {
        path_regex: path_regex.to_string(),
        parameters: parameters
            .iter()
            .map(|(name, value)| (*name, text(value)))
            .collect(),
    };
    let subscriptions = r"^/subscriptions/v1/shops/\{shop\}";
    let boxes = r"^/box_builder/v1/shops/\{shop\}";
    let (subscription, customer) = (&ids.subscription["id"], &ids.subscription["customer_id"]);
    vec![
        pin(
            &format!(r"{subscriptions}/subscription_groups/\{{id\}}$"),
            &[("id", ids.group)],
        ),
        pin(
            &format!(r"{subscriptions}/subscriptions/\{{id\}}/line_items/"),
            &[
                ("id", subscription),
                ("line_item_id", &ids.subscription["line_items"][0]["id"]),
            ],
        ),
        pin(
            &format!(r"{subscriptions}/subscriptions/\{{id\}}(/[a-z_]+)?$"),
            &[("id", subscription)],
        ),
        pin(
            &format!(r"{subscriptions}/customers/\{{customer_id\}}/addresses/\{{address_id\}}$"),
            &[
                ("customer_id", customer),
                ("address_id", &ids.subscription["shipping_address_id"]),
            ],
        ),
        pin(
            &format!(r"{subscriptions}/customers/\{{customer_id\}}(/[a-z_]+)?$"),
            &[("customer_id", customer)],
        ),
        pin(
            &format!(r"{subscriptions}/webhooks/subscriptions/\{{id\}}"),
            &[("id", ids.webhook)],
        ),
        pin(
            &format!(r"{boxes}/boxes/\{{box_id\}}"),
            &[("box_id", ids.box_id)],
        ),
        pin(
            r"^/box_builder/v1/storefront/shops/\{shop\}/boxes/\{box_id\}",
            &[("box_id", ids.box_id)],
        ),
        pin(
            &format!(r"{boxes}/box_products/\{{box_product_id\}}$"),
            &[("box_product_id", ids.box_product)],
        ),
        pin(
            &format!(r"{boxes}/box_sizes/\{{box_size_id\}}$"),
            &[("box_size_id", ids.box_size)],
        ),
        pin(
            &format!(r"{boxes}/time_slots/\{{time_slot_id\}}/options/\{{box_product_id\}}$"),
            &[
                ("time_slot_id", ids.time_slot),
                ("box_product_id", ids.box_product),
            ],
        ),
        pin(
            &format!(r"{boxes}/time_slots/\{{time_slot_id\}}(/options)?$"),
            &[("time_slot_id", ids.time_slot)],
        ),
        pin(
            r"^/box_builder/v1/customer/shops/\{shop\}/customers/\{platform_customer_id\}",
            &[("platform_customer_id", ids.customer)],
        ),
        pin(
            r"^/checkout/storefront/\{shop\}/\{public_order_id\}",
            &[("public_order_id", ids.order)],
        ),
    ]
}

/// A subscription with its customer, two line items and an address.
fn subscription_body() -> Value {
    json!({
        "customer": {"first_name": "Ada", "last_name": "Lovelace", "email": "ada@fuzz.test"},
        "subscription": {
            "order_rrule": "DTSTART:20260105T090000Z\nRRULE:FREQ=WEEKLY;INTERVAL=2;BYDAY=MO",
            "base_currency": "USD",
            "line_items": [
                {"platform_product_id": "prd-coffee", "platform_variant_id": "var-coffee",
                 "quantity": 2, "price": 1299},
                {"platform_product_id": "prd-coffee", "platform_variant_id": "var-beans",
                 "quantity": 1, "price": 450}
            ],
            "shipping_address": {
                "first_name": "Ada", "last_name": "Lovelace", "street1": "1 Rue Sainte-Catherine",
                "city": "Montréal", "province_code": "QC", "country_code": "CA", "zip": "H2X 1Y4"
            },
            "payment_details": {"gateway_name": "stripe", "gateway_customer_id": "cus_fuzz",
                "gateway_payment_id": "pm_fuzz"}
        }
    })
}
