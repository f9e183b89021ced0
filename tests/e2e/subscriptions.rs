//! The subscriptions API end to end (issue 13;
//! docs/subscriptions.md): Create Subscription with the documented body, idempotency, every action
//! from every status against the states table, the 422s with their field paths, the keyset
//! cursor over 1,000 subscriptions changing under it, and every webhook the actions emit,
//! received and verified by independent code. What the "done when" names runs against
//! the real binary; the other API checks in-process.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::{Duration, Instant};

use mercer_domain::Timestamp;
use mercer_domain::access::shop::ShopIdentifier;
use mercer_domain::kernel::ids::WebhookId;
use mercer_domain::ports::Database;
use mercer_domain::webhooks::WebhookMessage;
use mercer_store::Store;
use mercer_tests::receiver::{Received, Receiver};
use mercer_tests::verifiers::{Verifier, replay, standard_webhooks, x_svc_signature};
use mercer_tests::{Answer, Backend, MercerServer, TestDatabase, backend_tests, wait_until};
use serde_json::{Value, json};

pub(crate) const ALLOW_PRIVATE: &[&str] = &["--allow-private-targets"];
/// The gateway's customer id of the documented `payment_details`: never shown in any answer.
pub(crate) const GATEWAY_CUSTOMER: &str = "cus_gateway_customer_never_shown";
pub(crate) const PAYMENT_TOKEN: &str = "pm_card_visa_4242";
const DAY: i64 = 86_400;
const INVALID_TRANSITION: &str = "subscription.invalid_transition";
/// The documented topics, ids 1..20 in this order.
pub(crate) const TOPICS: [&str; 20] = [
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
];

/// 09:00 UTC on a Monday: `monday(0)` is the first Monday after today (so at least 9 h ahead),
/// `monday(n)` `n` weeks after it (`n` < 0 before it).
pub(crate) fn monday(weeks: i64) -> Timestamp {
    let today = Timestamp::now().as_micros().div_euclid(1_000_000 * DAY);
    // 1970-01-01 was a Thursday: weekday 3, counting from Monday = 0.
    let weekday = (today + 3).rem_euclid(7);
    let next = today + 7 - weekday;
    Timestamp::from_micros(((next + 7 * weeks) * DAY + 9 * 3600) * 1_000_000)
}

/// `at` as an RFC 5545 UTC date-time: `20260601T090000Z`.
pub(crate) fn ical(at: Timestamp) -> String {
    at.to_rfc3339_seconds().replace(['-', ':'], "")
}

pub(crate) fn rfc(at: Timestamp) -> String {
    at.to_rfc3339()
}

/// Every other Monday from `start`.
pub(crate) fn biweekly_from(start: Timestamp) -> String {
    format!(
        "DTSTART:{}\nRRULE:FREQ=WEEKLY;INTERVAL=2;BYDAY=MO",
        ical(start)
    )
}

/// A rule that began weeks ago: its next order is `monday(0)`, and without a status the
/// subscription is `active`.
pub(crate) fn running_rule() -> String {
    biweekly_from(monday(-4))
}

pub(crate) fn address(street: &str, city: &str) -> Value {
    json!({
        "first_name": "Ada", "last_name": "Lovelace", "company": "Analytical Engines",
        "phone": "+1 514 555 0100", "street1": street, "street2": "Suite 2", "city": city,
        "province": "Quebec", "province_code": "QC", "country": "Canada", "country_code": "CA",
        "zip": "H2X 1Y4"
    })
}

/// The Create Subscription body with every field given.
pub(crate) fn seed_body(email: &str, rule: &str) -> Value {
    json!({
        "customer": {
            "first_name": "Ada", "last_name": "Lovelace", "email": email,
            "phone": "+1 514 555 0100", "notes": "prefers morning deliveries"
        },
        "subscription": {
            "external_id": "ext-1001",
            "order_rrule": rule,
            "base_currency": "USD",
            "charged_currency": "CAD",
            "base_to_charged_exchange_rate": 1.25,
            "line_items": [
                {"platform_product_id": "prod-coffee", "platform_variant_id": "var-1kg",
                 "quantity": 2, "price": 1299},
                {"platform_product_id": 2002, "platform_variant_id": 3003,
                 "quantity": 1, "price": 450}
            ],
            "shipping_address": address("1 Rue Sainte-Catherine", "Montréal"),
            "payment_details": {
                "gateway_name": "stripe",
                "gateway_customer_id": GATEWAY_CUSTOMER,
                "gateway_payment_id": PAYMENT_TOKEN
            },
            "discount_code": "WELCOME10",
            "note": "staff: fragile",
            "order_note": "leave at the door",
            "placed_at": "2024-03-01T10:30:00Z",
            "last_order_datetime": "2024-03-04T09:00:00Z"
        }
    })
}

/// [`seed_body`] with a `subscription_status`.
pub(crate) fn with_status(mut body: Value, status: &str) -> Value {
    body["subscription"]["subscription_status"] = json!(status);
    body
}

/// The subscription API of one shop, with one token.
pub(crate) struct Api<'a> {
    pub server: &'a MercerServer,
    pub shop: String,
    pub token: String,
}

impl<'a> Api<'a> {
    pub(crate) fn demo(server: &'a MercerServer) -> Api<'a> {
        let demo = server.demo().clone();
        Api {
            server,
            shop: demo.shop,
            token: demo.token,
        }
    }

    pub(crate) fn path(&self, rest: &str) -> String {
        format!("/subscriptions/v1/shops/{}{rest}", self.shop)
    }

    pub(crate) fn get(&self, rest: &str) -> Answer {
        self.server.get(&self.path(rest)).bearer(&self.token).call()
    }

    pub(crate) fn send(&self, method: &str, rest: &str, body: &Value) -> Answer {
        self.server
            .request(method, &self.path(rest))
            .bearer(&self.token)
            .json(body)
    }

    pub(crate) fn delete(&self, rest: &str) -> Answer {
        self.server
            .request("DELETE", &self.path(rest))
            .bearer(&self.token)
            .call()
    }

    /// Create Subscription, which must answer 200; the subscription.
    pub(crate) fn create(&self, body: &Value) -> Value {
        ok(self.send("POST", "/subscriptions", body))["subscription"].clone()
    }

    pub(crate) fn subscription(&self, id: i64) -> Value {
        ok(self.get(&format!("/subscriptions/{id}")))["subscription"].clone()
    }

    pub(crate) fn customer(&self, id: i64) -> Value {
        ok(self.get(&format!("/customers/{id}")))["customer"].clone()
    }

    /// A page of List Subscriptions with this query.
    pub(crate) fn list(&self, query: &str) -> Value {
        ok(self.get(&format!("/subscriptions?{query}")))
    }
}

/// The JSON of a 200 answer.
pub(crate) fn ok(answer: Answer) -> Value {
    assert_eq!(answer.status, 200, "{}", answer.text);
    answer.json()
}

pub(crate) fn id_of(value: &Value) -> i64 {
    value["id"]
        .as_i64()
        .unwrap_or_else(|| panic!("no integer id in {value}"))
}

/// The keys of an object, sorted.
fn keys(value: &Value) -> BTreeSet<String> {
    value
        .as_object()
        .unwrap_or_else(|| panic!("not an object: {value}"))
        .keys()
        .cloned()
        .collect()
}

fn set(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|name| name.to_string()).collect()
}

/// `(field, sub_type)` of each entry of a 422 `validation.failed`.
pub(crate) fn problems(answer: &Answer) -> Vec<(String, String)> {
    answer
        .assert_error(422, "validation.failed")
        .iter()
        .map(|entry| {
            (
                entry["field"].as_str().unwrap_or_default().to_string(),
                entry["sub_type"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

/// A 422 entry's `(field, sub_type)`.
type Problem = (String, String);

fn pair(field: &str, sub_type: &str) -> Problem {
    (field.to_string(), sub_type.to_string())
}

const SUBSCRIPTION_FIELDS: [&str; 44] = [
    "id",
    "shop_id",
    "customer_id",
    "billing_address_id",
    "shipping_address_id",
    "orders_processed",
    "current_retries",
    "external_id",
    "idempotency_key",
    "customer",
    "next_order_datetime",
    "next_payment_datetime",
    "next_processing_datetime",
    "last_payment_datetime",
    "last_order_datetime",
    "last_processed_datetime",
    "status_changed_at",
    "placed_at",
    "created_at",
    "updated_at",
    "subscription_status",
    "payment_method_token",
    "payment_gateway_public_id",
    // Mercer's extension (docs/scheduler.md): when the payment method expires.
    "payment_method_expires_at",
    "payment_rrule",
    "order_rrule",
    "payment_rrule_text",
    "order_rrule_text",
    "charged_currency",
    "base_currency",
    "base_to_charged_exchange_rate",
    "percent_discount",
    "discount_code",
    "line_items",
    "shipping_lines",
    "billing_address",
    "shipping_address",
    "last_failure_code",
    "last_failure_reason",
    "last_failure_details",
    "latest_status_log",
    "note",
    "order_note",
    // A Mercer extension: the day a paused subscription comes back by itself.
    "resume_on",
];

const LINE_ITEM_FIELDS: [&str; 29] = [
    "id",
    "subscription_id",
    "subscription_group_id",
    "subscription_group_billing_rules_id",
    "platform_id",
    "platform_product_id",
    "platform_variant_id",
    "title",
    "product_name",
    "variant_name",
    "sku",
    "image",
    "quantity",
    "price",
    "price_charged",
    "discounted_price",
    "discounted_price_charged",
    "full_price",
    "full_price_charged",
    "requires_shipping",
    "taxable",
    "grams",
    "weight",
    "weight_unit",
    "discounts",
    "prepaid_metadata",
    "line_item_attributes",
    "created_at",
    "updated_at",
];

pub(crate) const ADDRESS_FIELDS: [&str; 23] = [
    "id",
    "shop_identifier",
    "platform_id",
    "customer_id",
    "platform_type",
    "platform_customer_id",
    "first_name",
    "last_name",
    "company",
    "phone",
    "street1",
    "street2",
    "city",
    "province",
    "province_code",
    "country",
    "country_code",
    "zip",
    "is_default",
    "address_use",
    "address_source",
    "created_at",
    "updated_at",
];

pub(crate) const CUSTOMER_FIELDS: [&str; 12] = [
    "id",
    "platform_id",
    "cashier_public_id",
    "first_name",
    "last_name",
    "phone",
    "email",
    "notes",
    "addresses",
    "default_address",
    "subscription_summary",
    "labels",
];

fn is_time(value: &Value) -> bool {
    value
        .as_str()
        .is_some_and(|text| text.ends_with('Z') && Timestamp::parse_rfc3339(text).is_some())
}

/// Asserts the seed's shape of a subscription made from [`seed_body`].
fn assert_seed_subscription(sub: &Value, shop: &str, email_customer: i64) {
    assert_eq!(keys(sub), set(&SUBSCRIPTION_FIELDS), "{sub}");
    for name in [
        "id",
        "shop_id",
        "customer_id",
        "billing_address_id",
        "shipping_address_id",
    ] {
        assert!(sub[name].as_i64().is_some_and(|id| id > 0), "{name}: {sub}");
    }
    assert_eq!(sub["customer_id"], email_customer);
    assert_eq!(sub["orders_processed"], 0);
    assert_eq!(sub["current_retries"], 0);
    assert_eq!(sub["external_id"], "ext-1001");
    assert_eq!(sub["customer"], Value::Null, "customer only when expanded");
    for name in [
        "status_changed_at",
        "created_at",
        "updated_at",
        "next_order_datetime",
        "next_payment_datetime",
    ] {
        assert!(is_time(&sub[name]), "{name}: {}", sub[name]);
    }
    assert_eq!(sub["placed_at"], "2024-03-01T10:30:00Z");
    assert_eq!(sub["last_order_datetime"], "2024-03-04T09:00:00Z");
    for name in [
        "next_processing_datetime",
        "last_payment_datetime",
        "last_processed_datetime",
        "last_failure_code",
        "last_failure_reason",
        "last_failure_details",
    ] {
        assert_eq!(sub[name], Value::Null, "{name}");
    }
    assert_eq!(sub["payment_method_token"], PAYMENT_TOKEN);
    assert_eq!(sub["payment_gateway_public_id"], "stripe");
    assert_eq!(sub["order_rrule_text"], "every 2 weeks on Monday");
    assert_eq!(sub["payment_rrule"], sub["order_rrule"]);
    assert_eq!(sub["payment_rrule_text"], "every 2 weeks on Monday");
    assert_eq!(sub["base_currency"], "USD");
    assert_eq!(sub["charged_currency"], "CAD");
    assert_eq!(sub["base_to_charged_exchange_rate"], 1.25);
    assert!(sub["percent_discount"].is_number());
    assert_eq!(sub["discount_code"], "WELCOME10");
    assert_eq!(sub["note"], "staff: fragile");
    assert_eq!(sub["order_note"], "leave at the door");
    assert_eq!(sub["shipping_lines"], json!([]));

    let items = sub["line_items"].as_array().expect("line_items");
    assert_eq!(items.len(), 2, "{sub}");
    for item in items {
        assert_eq!(keys(item), set(&LINE_ITEM_FIELDS), "{item}");
        assert_eq!(item["subscription_id"], sub["id"]);
        assert!(item["id"].as_i64().is_some_and(|id| id > 0));
        // Money: integer cents, in the charged currency at the rate (half away from zero).
        for name in [
            "price",
            "price_charged",
            "discounted_price",
            "discounted_price_charged",
            "full_price",
            "full_price_charged",
        ] {
            assert!(item[name].is_i64(), "{name} is integer cents: {item}");
        }
        assert!(item["discounts"].is_array() && item["line_item_attributes"].is_array());
    }
    assert_eq!(items[0]["platform_product_id"], "prod-coffee");
    assert_eq!(items[0]["platform_variant_id"], "var-1kg");
    assert_eq!(items[0]["quantity"], 2);
    assert_eq!(items[0]["subscription_group_id"], Value::Null);
    assert_eq!(items[0]["price"], 1299);
    assert_eq!(items[0]["price_charged"], 1624); // 1299 × 1.25 = 1623.75
    assert_eq!(items[0]["full_price"], 2598);
    assert_eq!(items[0]["full_price_charged"], 3248); // 3247.5
    // Integer platform ids are kept as their text.
    assert_eq!(items[1]["platform_product_id"], "2002");
    assert_eq!(items[1]["platform_variant_id"], "3003");
    assert_eq!(items[1]["price"], 450);
    assert_eq!(items[1]["price_charged"], 563); // 562.5
    assert_eq!(items[1]["full_price"], 450);

    for name in ["billing_address", "shipping_address"] {
        let address = &sub[name];
        assert_eq!(keys(address), set(&ADDRESS_FIELDS), "{address}");
        assert_eq!(address["shop_identifier"], shop);
        assert_eq!(address["customer_id"], email_customer);
        assert_eq!(address["street1"], "1 Rue Sainte-Catherine");
        assert_eq!(address["city"], "Montréal");
        assert_eq!(address["country_code"], "CA");
        assert_eq!(address["province_code"], "QC");
        assert_eq!(address["zip"], "H2X 1Y4");
        assert_eq!(address["company"], "Analytical Engines");
    }
    // Without a billing address, the shipping address bills.
    assert_eq!(sub["billing_address_id"], sub["shipping_address_id"]);
    assert_eq!(sub["shipping_address"]["id"], sub["shipping_address_id"]);

    let log = &sub["latest_status_log"];
    assert_eq!(
        keys(log),
        set(&[
            "id",
            "subscription_status",
            "reason",
            "metadata",
            "created_at",
            "subscription_id"
        ]),
        "{log}"
    );
    assert_eq!(log["reason"], "created");
    assert_eq!(log["subscription_status"], sub["subscription_status"]);
    assert_eq!(log["subscription_id"], sub["id"]);
    assert!(is_time(&log["created_at"]));
    let user = &log["metadata"]["user"];
    assert_eq!(keys(user), set(&["type", "id", "name"]), "{user}");
    assert_eq!(user["type"], "api");
    assert!(user["id"].is_i64() && user["name"].is_string(), "{user}");
}

fn create_subscription_answers_every_field_of_the_seed(backend: Backend) {
    let server = MercerServer::in_process_with(backend, ALLOW_PRIVATE);
    let api = Api::demo(&server);
    let start = monday(1);
    let body = with_status(
        seed_body("ada@example.test", &biweekly_from(start)),
        "active",
    );
    let answer = api.send("POST", "/subscriptions", &body);
    assert_eq!(answer.status, 200, "{}", answer.text);
    assert!(!answer.text.contains(GATEWAY_CUSTOMER), "{}", answer.text);
    assert!(
        !answer.text.contains("gateway_customer_id"),
        "{}",
        answer.text
    );
    let answered = answer.json();
    assert_eq!(keys(&answered), set(&["subscription"]));
    let sub = answered["subscription"].clone();
    let customer_id = sub["customer_id"].as_i64().unwrap();
    assert_seed_subscription(&sub, &api.shop, customer_id);
    assert_eq!(sub["subscription_status"], "active");
    // The rule is kept as given; its first date lies ahead, so it is the next order.
    assert_eq!(sub["order_rrule"], biweekly_from(start));
    assert_eq!(sub["next_order_datetime"], rfc(start));
    assert_eq!(sub["next_payment_datetime"], rfc(start));

    // Get, without and with the customer.
    let id = id_of(&sub);
    let got = api.get(&format!("/subscriptions/{id}"));
    assert_eq!(got.status, 200, "{}", got.text);
    assert!(!got.text.contains(GATEWAY_CUSTOMER));
    assert_eq!(got.json()["subscription"], sub);
    let expanded = api.get(&format!("/subscriptions/{id}?expand=customer"));
    assert_eq!(expanded.status, 200, "{}", expanded.text);
    assert!(!expanded.text.contains(GATEWAY_CUSTOMER));
    let expanded = expanded.json()["subscription"].clone();
    let customer = expanded["customer"].clone();
    assert_eq!(keys(&customer), set(&CUSTOMER_FIELDS), "{customer}");
    assert_eq!(customer["id"], customer_id);
    assert_eq!(customer["email"], "ada@example.test");
    assert_eq!(customer["first_name"], "Ada");
    assert_eq!(customer["last_name"], "Lovelace");
    assert_eq!(customer["phone"], "+1 514 555 0100");
    assert_eq!(customer["notes"], "prefers morning deliveries");
    assert_eq!(customer["platform_id"], Value::Null);
    assert_eq!(customer["addresses"].as_array().unwrap().len(), 1);
    assert_eq!(
        customer["default_address"]["id"],
        sub["shipping_address_id"]
    );
    assert_eq!(customer["default_address"]["is_default"], true);
    let summary = &customer["subscription_summary"];
    assert_eq!(summary["active_subscription_count"], 1);
    assert_eq!(summary["inactive_subscription_count"], 0);
    assert_eq!(summary["next_order_date"], rfc(start));
    // Everything else is the same subscription.
    let mut without = expanded.clone();
    without["customer"] = Value::Null;
    assert_eq!(without, sub);
    assert_eq!(api.customer(customer_id), customer);

    // List Subscriptions expands the customer too.
    let listed = api.list("expand=customer");
    assert_eq!(listed["subscriptions"][0]["customer"], customer);

    // A rule whose start lies ahead, without a status: scheduled. The email is the same
    // customer's whatever its case.
    let scheduled = api.create(&seed_body("ADA@Example.TEST", &biweekly_from(start)));
    assert_eq!(scheduled["subscription_status"], "scheduled");
    assert_eq!(scheduled["customer_id"], customer_id, "the same email");
    assert_eq!(
        scheduled["latest_status_log"]["subscription_status"],
        "scheduled"
    );

    // The customer is the directory's customer too, with no platform id yet.
    let reader = server
        .cli(&[
            "token",
            "create",
            "--shop",
            &api.shop,
            "--scope",
            "read_customers",
        ])
        .value();
    let directory = server
        .get(&format!(
            "/customers/v2/shops/{}/customers/{customer_id}",
            api.shop
        ))
        .bearer(&reader)
        .call();
    assert_eq!(directory.status, 200, "{}", directory.text);
    let listed = directory.json()["customer"].clone();
    assert_eq!(listed["id"], customer_id);
    assert_eq!(listed["email"], "ada@example.test");
    assert_eq!(listed["first_name"], "Ada");
    assert_no_platform_id(&listed["platform_id"]);
}

/// A directory customer without a platform id: `null`, or the documented union with no value.
pub(crate) fn assert_no_platform_id(value: &Value) {
    let empty_union = json!({ "string_value": "", "int64_value": 0 });
    assert!(
        value.is_null() || *value == empty_union,
        "a customer made by the subscription API has no platform id: {value}"
    );
}

fn an_idempotency_key_returns_the_first_subscription_or_409(backend: Backend) {
    let server = MercerServer::start_with(TestDatabase::create(backend), ALLOW_PRIVATE);
    let api = Api::demo(&server);
    let mut body = seed_body("ada@example.test", &running_rule());
    body["subscription"]["idempotency_key"] = json!("checkout-7f3a-1");
    let first = api.create(&body);
    assert_eq!(first["idempotency_key"], "checkout-7f3a-1");
    let again = api.send("POST", "/subscriptions", &body);
    assert_eq!(again.status, 200, "{}", again.text);
    assert_eq!(again.json()["subscription"], first);

    let mut other = body.clone();
    other["subscription"]["line_items"][0]["quantity"] = json!(3);
    let conflict = api.send("POST", "/subscriptions", &other);
    assert_eq!(conflict.status, 409, "{}", conflict.text);
    conflict.errors();
    // Another key is another subscription.
    other["subscription"]["idempotency_key"] = json!("checkout-7f3a-2");
    let second = api.create(&other);
    assert_ne!(second["id"], first["id"]);

    // The same request from several clients at once: one subscription, and every client gets
    // it (creations with one key run one after the other, docs/subscriptions.md).
    let mut racing = body.clone();
    racing["subscription"]["idempotency_key"] = json!("checkout-7f3a-race");
    let answers: Vec<Answer> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..4)
            .map(|_| scope.spawn(|| api.send("POST", "/subscriptions", &racing)))
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).collect()
    });
    let mut raced_ids = BTreeSet::new();
    for answer in &answers {
        assert_eq!(answer.status, 200, "{}", answer.text);
        raced_ids.insert(id_of(&answer.json()["subscription"]));
    }
    assert_eq!(
        raced_ids.len(),
        1,
        "one subscription for one key: {answers:?}"
    );
    let raced = api.create(&racing);
    assert_eq!(Some(&id_of(&raced)), raced_ids.first());
    let raced = [raced];

    let listed = api.list("");
    let ids: Vec<i64> = listed["subscriptions"]
        .as_array()
        .unwrap()
        .iter()
        .map(id_of)
        .collect();
    assert_eq!(ids, [id_of(&first), id_of(&second), id_of(&raced[0])]);
    assert_eq!(listed["pagination"]["total"], 3);

    // Keys are the shop's own: another shop's use of the same key is another subscription.
    let other_shop = server
        .cli(&["shop", "create", "--domain", "keys.subscriptions.test"])
        .values()[0]
        .clone();
    let other_token = server
        .cli(&["token", "create", "--shop", &other_shop, "--scope", "all"])
        .value();
    let theirs = Api {
        server: &server,
        shop: other_shop,
        token: other_token,
    };
    let their_first = theirs.create(&body);
    assert_eq!(their_first["idempotency_key"], "checkout-7f3a-1");
    assert_ne!(their_first["shop_id"], first["shop_id"]);
    assert_eq!(theirs.list("")["pagination"]["total"], 1);
    assert_eq!(api.list("")["pagination"]["total"], 3);
}

/// The client actions of docs/subscriptions.md's states table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Act {
    Cancel,
    Reactivate,
    Pause,
    Resume,
    Skip,
    Quantity,
    Frequency,
    Shipping,
    Payment,
}

const ACTS: [Act; 9] = [
    Act::Cancel,
    Act::Reactivate,
    Act::Pause,
    Act::Resume,
    Act::Skip,
    Act::Quantity,
    Act::Frequency,
    Act::Shipping,
    Act::Payment,
];

/// The rule Change Frequency moves to: weekly from `monday(1)`.
fn weekly_rule() -> String {
    format!("DTSTART:{}\nRRULE:FREQ=WEEKLY", ical(monday(1)))
}

impl Act {
    /// The statuses the states table allows it from, and where it leads.
    fn allowed(self, from: &str) -> Option<&'static str> {
        let to = match (self, from) {
            (Act::Cancel, "active" | "paused") => "inactive",
            (Act::Reactivate, "inactive") => "active",
            (Act::Pause, "active") => "paused",
            (Act::Resume, "paused") => "active",
            (Act::Skip, "active") => "active",
            (Act::Skip, "paused") => "paused",
            (Act::Skip, "scheduled") => "scheduled",
            (Act::Quantity | Act::Frequency | Act::Shipping | Act::Payment, _) => match from {
                "active" => "active",
                "paused" => "paused",
                "scheduled" => "scheduled",
                "inactive" => "inactive",
                _ => return None,
            },
            _ => return None,
        };
        Some(to)
    }

    fn reason(self) -> &'static str {
        match self {
            Act::Cancel => "cancelled",
            Act::Reactivate => "reactivated",
            Act::Pause => "paused",
            Act::Resume => "resumed",
            Act::Skip => "order_skipped",
            Act::Quantity => "quantity_changed",
            Act::Frequency => "frequency_changed",
            Act::Shipping => "shipping_address_changed",
            Act::Payment => "payment_method_changed",
        }
    }

    /// Takes the action on `sub` with a valid body.
    fn call(self, api: &Api<'_>, sub: &Value) -> Answer {
        let id = id_of(sub);
        let path = |name: &str| format!("/subscriptions/{id}/{name}");
        match self {
            Act::Cancel => api.send("POST", &path("cancel"), &json!({})),
            Act::Reactivate => api.send("POST", &path("reactivate"), &json!({})),
            Act::Pause => api.send("POST", &path("pause"), &json!({})),
            Act::Resume => api.send("POST", &path("resume"), &json!({})),
            Act::Skip => api.send(
                "POST",
                &path("skip"),
                &json!({ "order_datetime": sub["next_order_datetime"] }),
            ),
            Act::Quantity => {
                let line_item = id_of(&sub["line_items"][0]);
                api.send(
                    "PUT",
                    &path(&format!("line_items/{line_item}/quantity")),
                    &json!({ "quantity": 5 }),
                )
            }
            Act::Frequency => api.send(
                "PUT",
                &path("frequency"),
                &json!({ "order_rrule": weekly_rule() }),
            ),
            Act::Shipping => api.send(
                "PUT",
                &path("shipping_address"),
                &json!({ "shipping_address": address("99 Boulevard Saint-Laurent", "Laval") }),
            ),
            Act::Payment => api.send(
                "PUT",
                &path("payment_method"),
                &json!({ "payment_method_token": "pm_new_card_5555",
                         "payment_gateway_public_id": "adyen" }),
            ),
        }
    }

    /// Asserts what the action changed besides the status.
    fn assert_effect(self, before: &Value, after: &Value) {
        let unchanged = |name: &str| assert_eq!(after[name], before[name], "{self:?}: {name}");
        match self {
            Act::Cancel | Act::Pause => {
                unchanged("next_order_datetime");
                unchanged("line_items");
            }
            Act::Reactivate | Act::Resume => {
                // The next order is still ahead: kept.
                unchanged("next_order_datetime");
            }
            Act::Skip => {
                // The skipped date was the next order: the next is the rule's one after it.
                let skipped =
                    Timestamp::parse_rfc3339(before["next_order_datetime"].as_str().unwrap())
                        .unwrap();
                assert_eq!(
                    after["next_order_datetime"],
                    rfc(skipped.plus_seconds(14 * DAY)),
                    "{self:?}"
                );
                unchanged("order_rrule");
            }
            Act::Quantity => {
                assert_eq!(after["line_items"][0]["quantity"], 5);
                assert_eq!(after["line_items"][0]["price"], 1299);
                assert_eq!(after["line_items"][1], before["line_items"][1]);
                unchanged("next_order_datetime");
            }
            Act::Frequency => {
                assert_eq!(after["order_rrule"], weekly_rule());
                assert_eq!(after["order_rrule_text"], "every week on Monday");
                assert_eq!(after["payment_rrule"], weekly_rule());
                assert_eq!(after["payment_rrule_text"], "every week on Monday");
                if before["subscription_status"] == "inactive" {
                    unchanged("next_order_datetime");
                } else {
                    assert_eq!(after["next_order_datetime"], rfc(monday(1)));
                }
            }
            Act::Shipping => {
                assert_ne!(after["shipping_address_id"], before["shipping_address_id"]);
                assert_eq!(
                    after["shipping_address"]["id"],
                    after["shipping_address_id"]
                );
                assert_eq!(
                    after["shipping_address"]["street1"],
                    "99 Boulevard Saint-Laurent"
                );
                assert_eq!(after["shipping_address"]["city"], "Laval");
                assert_eq!(
                    after["shipping_address"]["customer_id"],
                    before["customer_id"]
                );
                unchanged("billing_address_id");
                unchanged("billing_address");
            }
            Act::Payment => {
                assert_eq!(after["payment_method_token"], "pm_new_card_5555");
                assert_eq!(after["payment_gateway_public_id"], "adyen");
            }
        }
        unchanged("id");
        unchanged("customer_id");
        unchanged("created_at");
    }
}

/// A subscription in `status`: scheduled by a rule that starts ahead, the others given.
fn create_in(api: &Api<'_>, status: &str, email: &str) -> Value {
    let body = match status {
        "scheduled" => seed_body(email, &biweekly_from(monday(1))),
        _ => with_status(seed_body(email, &running_rule()), status),
    };
    let sub = api.create(&body);
    assert_eq!(sub["subscription_status"], status, "{sub}");
    sub
}

fn every_action_from_every_status_follows_the_states_table(backend: Backend) {
    let server = MercerServer::start_with(TestDatabase::create(backend), ALLOW_PRIVATE);
    let api = Api::demo(&server);
    for from in ["active", "paused", "inactive", "scheduled"] {
        for act in ACTS {
            let before = create_in(&api, from, "states@example.test");
            let id = id_of(&before);
            let answer = act.call(&api, &before);
            match act.allowed(from) {
                Some(to) => {
                    assert_eq!(answer.status, 200, "{act:?} from {from}: {}", answer.text);
                    let after = answer.json()["subscription"].clone();
                    assert_eq!(after["subscription_status"], to, "{act:?} from {from}");
                    let log = &after["latest_status_log"];
                    assert_eq!(log["reason"], act.reason(), "{act:?} from {from}");
                    assert_eq!(log["subscription_status"], to);
                    assert_eq!(log["subscription_id"], id);
                    assert_eq!(log["metadata"]["user"]["type"], "api");
                    assert_ne!(log["id"], before["latest_status_log"]["id"]);
                    if to != from {
                        assert_ne!(
                            after["status_changed_at"], before["status_changed_at"],
                            "{act:?} from {from}"
                        );
                    }
                    act.assert_effect(&before, &after);
                    assert_eq!(
                        api.subscription(id),
                        after,
                        "Get shows what the action answered"
                    );
                }
                None => {
                    let entries = answer.assert_error(422, INVALID_TRANSITION);
                    assert_eq!(entries.len(), 1, "{}", answer.text);
                    assert_eq!(
                        api.subscription(id),
                        before,
                        "{act:?} from {from} is refused and changes nothing"
                    );
                }
            }
        }
    }

    // Chains through the machine: active → paused → active → inactive → active.
    let sub = create_in(&api, "active", "chain@example.test");
    let mut current = sub.clone();
    for (act, to) in [
        (Act::Pause, "paused"),
        (Act::Pause, ""),
        (Act::Resume, "active"),
        (Act::Resume, ""),
        (Act::Cancel, "inactive"),
        (Act::Cancel, ""),
        (Act::Skip, ""),
        (Act::Reactivate, "active"),
        (Act::Reactivate, ""),
    ] {
        let answer = act.call(&api, &current);
        if to.is_empty() {
            answer.assert_error(422, INVALID_TRANSITION);
        } else {
            current = ok(answer)["subscription"].clone();
            assert_eq!(current["subscription_status"], to);
            assert_eq!(current["latest_status_log"]["reason"], act.reason());
        }
    }
    assert_eq!(current["next_order_datetime"], rfc(monday(0)));
}

fn actions_check_their_bodies_and_targets(backend: Backend) {
    let server = MercerServer::in_process_with(backend, ALLOW_PRIVATE);
    let api = Api::demo(&server);
    let sub = create_in(&api, "active", "bodies@example.test");
    let id = id_of(&sub);
    let customer_id = sub["customer_id"].as_i64().unwrap();
    assert_eq!(sub["next_order_datetime"], rfc(monday(0)));

    // Skip a later date: the next order stays.
    let skipped = ok(api.send(
        "POST",
        &format!("/subscriptions/{id}/skip"),
        &json!({ "order_datetime": rfc(monday(2)) }),
    ))["subscription"]
        .clone();
    assert_eq!(skipped["next_order_datetime"], rfc(monday(0)));
    assert_eq!(skipped["latest_status_log"]["reason"], "order_skipped");
    // Skip the next one (named by its day, another time of it): past the skipped later one too.
    let skipped = ok(api.send(
        "POST",
        &format!("/subscriptions/{id}/skip"),
        &json!({ "order_datetime": rfc(monday(0).plus_seconds(3 * 3600)) }),
    ))["subscription"]
        .clone();
    assert_eq!(skipped["next_order_datetime"], rfc(monday(4)));
    let skip = |body: Value| api.send("POST", &format!("/subscriptions/{id}/skip"), &body);
    for (body, expected) in [
        (json!({}), pair("order_datetime", "required")),
        (
            json!({ "order_datetime": "next tuesday" }),
            pair("order_datetime", "invalid_date"),
        ),
        // A day without an order, one already skipped, one in the past.
        (
            json!({ "order_datetime": rfc(monday(1)) }),
            pair("order_datetime", "not_an_order_date"),
        ),
        (
            json!({ "order_datetime": rfc(monday(2)) }),
            pair("order_datetime", "not_an_order_date"),
        ),
        (
            json!({ "order_datetime": rfc(monday(-2)) }),
            pair("order_datetime", "not_an_order_date"),
        ),
    ] {
        assert_eq!(problems(&skip(body.clone())), [expected], "{body}");
    }

    let line_item = id_of(&sub["line_items"][1]);
    let quantity = |item: i64, body: Value| {
        api.send(
            "PUT",
            &format!("/subscriptions/{id}/line_items/{item}/quantity"),
            &body,
        )
    };
    for (body, expected) in [
        (json!({ "quantity": 0 }), pair("quantity", "out_of_range")),
        (json!({ "quantity": -2 }), pair("quantity", "out_of_range")),
        // Decimal text is read as the integer it writes (docs/api-conventions.md); other
        // text is not an integer.
        (
            json!({ "quantity": "three" }),
            pair("quantity", "invalid_type"),
        ),
        (json!({ "quantity": "0" }), pair("quantity", "out_of_range")),
        (json!({}), pair("quantity", "required")),
    ] {
        assert_eq!(
            problems(&quantity(line_item, body.clone())),
            [expected],
            "{body}"
        );
    }
    quantity(999_999, json!({ "quantity": 3 })).assert_error(404, "resource.not_found");
    let changed = ok(quantity(line_item, json!({ "quantity": 3 })))["subscription"].clone();
    assert_eq!(changed["line_items"][1]["quantity"], 3);
    assert_eq!(changed["line_items"][0]["quantity"], 2);

    let frequency = |body: Value| api.send("PUT", &format!("/subscriptions/{id}/frequency"), &body);
    let non_recurring = format!("DTSTART:{}\nRRULE:FREQ=WEEKLY;COUNT=1", ical(monday(1)));
    for (body, expected) in [
        (json!({}), pair("order_rrule", "required")),
        (
            json!({ "order_rrule": "every monday" }),
            pair("order_rrule", "invalid_rrule"),
        ),
        (
            json!({ "order_rrule": non_recurring }),
            pair("order_rrule", "not_recurring"),
        ),
    ] {
        assert_eq!(problems(&frequency(body.clone())), [expected], "{body}");
    }

    // Shipping address: a new one, or one of the customer's own by id.
    let own = ok(api.send(
        "POST",
        &format!("/customers/{customer_id}/addresses"),
        &json!({ "customer_address": address("5 Avenue du Parc", "Montréal") }),
    ))["customer_address"]
        .clone();
    let moved = ok(api.send(
        "PUT",
        &format!("/subscriptions/{id}/shipping_address"),
        &json!({ "address_id": own["id"] }),
    ))["subscription"]
        .clone();
    assert_eq!(moved["shipping_address_id"], own["id"]);
    assert_eq!(moved["shipping_address"]["street1"], "5 Avenue du Parc");
    assert_eq!(moved["billing_address_id"], sub["billing_address_id"]);
    assert_eq!(
        moved["latest_status_log"]["reason"],
        "shipping_address_changed"
    );
    let other = create_in(&api, "active", "someone.else@example.test");
    assert_ne!(other["customer_id"], sub["customer_id"]);
    let shipping = |body: Value| {
        api.send(
            "PUT",
            &format!("/subscriptions/{id}/shipping_address"),
            &body,
        )
    };
    assert_eq!(
        problems(&shipping(
            json!({ "address_id": other["shipping_address_id"] })
        )),
        [pair("address_id", "invalid_value")],
        "another customer's address"
    );
    assert_eq!(
        problems(&shipping(json!({ "address_id": 99_999_999 }))),
        [pair("address_id", "invalid_value")]
    );
    assert_eq!(
        problems(&shipping(
            json!({ "shipping_address": { "city": "Laval" } })
        )),
        [
            pair("shipping_address.street1", "required"),
            pair("shipping_address.country_code", "required")
        ]
    );
    assert_eq!(
        problems(&shipping(json!({}))),
        [pair("shipping_address", "required")]
    );
    assert_eq!(api.subscription(id)["shipping_address_id"], own["id"]);

    let payment =
        |body: Value| api.send("PUT", &format!("/subscriptions/{id}/payment_method"), &body);
    assert_eq!(
        problems(&payment(json!({}))),
        [
            pair("payment_method_token", "required"),
            pair("payment_gateway_public_id", "required")
        ]
    );

    // Unknown subscriptions, and another shop's, are 404.
    for path in ["/subscriptions/999999/pause", "/subscriptions/abc/pause"] {
        api.send("POST", path, &json!({}))
            .assert_error(404, "resource.not_found");
    }
    let other_shop = server
        .cli(&["shop", "create", "--domain", "other.subscriptions.test"])
        .values()[0]
        .clone();
    let other_token = server
        .cli(&["token", "create", "--shop", &other_shop, "--scope", "all"])
        .value();
    let theirs = Api {
        server: &server,
        shop: other_shop,
        token: other_token,
    };
    theirs
        .get(&format!("/subscriptions/{id}"))
        .assert_error(404, "resource.not_found");
    theirs
        .send("POST", &format!("/subscriptions/{id}/cancel"), &json!({}))
        .assert_error(404, "resource.not_found");
    assert_eq!(api.subscription(id)["subscription_status"], "active");

    // Last, as it fails today: a line's full price follows its quantity, as at creation
    // (`full_price` = `price × quantity`, docs/subscriptions.md), in both currencies.
    let line = &changed["line_items"][1];
    assert_eq!(line["price"], 450);
    assert_eq!(
        (&line["full_price"], &line["full_price_charged"]),
        (&json!(1350), &json!(1688)), // 1350 × 1.25 = 1687.5
        "full price after Change quantity to 3: {line}"
    );
}

fn create_subscription_refuses_each_invalid_field_on_its_path(backend: Backend) {
    let server = MercerServer::start_with(TestDatabase::create(backend), ALLOW_PRIVATE);
    let api = Api::demo(&server);
    let valid = seed_body("invalid@example.test", &running_rule());
    let with = |change: &dyn Fn(&mut Value)| {
        let mut body = valid.clone();
        change(&mut body);
        body
    };
    let cases: Vec<(&str, Value, Vec<Problem>)> = vec![
        (
            "unknown currency",
            with(&|b| b["subscription"]["base_currency"] = json!("XYZ")),
            vec![pair("subscription.base_currency", "invalid_currency")],
        ),
        (
            "lower-case currency",
            with(&|b| b["subscription"]["charged_currency"] = json!("cad")),
            vec![pair("subscription.charged_currency", "invalid_currency")],
        ),
        (
            "quantity below 1",
            with(&|b| b["subscription"]["line_items"][0]["quantity"] = json!(0)),
            vec![pair("subscription.line_items[0].quantity", "out_of_range")],
        ),
        (
            "negative price",
            with(&|b| b["subscription"]["line_items"][1]["price"] = json!(-1)),
            vec![pair("subscription.line_items[1].price", "out_of_range")],
        ),
        (
            "a price with a fraction",
            with(&|b| b["subscription"]["line_items"][1]["price"] = json!(12.5)),
            vec![pair("subscription.line_items[1].price", "invalid_type")],
        ),
        (
            "a bad rrule",
            with(&|b| {
                b["subscription"]["order_rrule"] = json!(format!(
                    "DTSTART:{}\nRRULE:FREQ=FORTNIGHTLY",
                    ical(monday(1))
                ))
            }),
            vec![pair("subscription.order_rrule", "invalid_rrule")],
        ),
        (
            "a non-recurring rrule",
            with(&|b| {
                b["subscription"]["order_rrule"] = json!(format!(
                    "DTSTART:{}\nRRULE:FREQ=WEEKLY;COUNT=1",
                    ical(monday(1))
                ))
            }),
            vec![pair("subscription.order_rrule", "not_recurring")],
        ),
        (
            "no line items",
            with(&|b| b["subscription"]["line_items"] = json!([])),
            vec![pair("subscription.line_items", "empty")],
        ),
        (
            "an unknown status",
            with(&|b| b["subscription"]["subscription_status"] = json!("frozen")),
            vec![pair("subscription.subscription_status", "invalid_value")],
        ),
        (
            "processing is Mercer's",
            with(&|b| b["subscription"]["subscription_status"] = json!("processing")),
            vec![pair("subscription.subscription_status", "invalid_value")],
        ),
        (
            "a malformed date",
            with(&|b| b["subscription"]["next_order_datetime"] = json!("2026-02-30T09:00:00Z")),
            vec![pair("subscription.next_order_datetime", "invalid_date")],
        ),
        (
            "no email",
            with(&|b| b["customer"]["email"] = Value::Null),
            vec![pair("customer.email", "required")],
        ),
        (
            "no shipping address",
            with(&|b| {
                b["subscription"]
                    .as_object_mut()
                    .unwrap()
                    .remove("shipping_address");
            }),
            vec![pair("subscription.shipping_address", "required")],
        ),
        (
            "everything at once",
            with(&|b| {
                b["subscription"]["base_currency"] = json!("XYZ");
                b["subscription"]["line_items"][0]["quantity"] = json!(0);
                b["subscription"]["line_items"][1]["price"] = json!(-5);
                b["subscription"]["subscription_status"] = json!("frozen");
                b["subscription"]["next_order_datetime"] = json!("yesterday");
            }),
            vec![
                pair("subscription.next_order_datetime", "invalid_date"),
                pair("subscription.subscription_status", "invalid_value"),
                pair("subscription.base_currency", "invalid_currency"),
                pair("subscription.line_items[0].quantity", "out_of_range"),
                pair("subscription.line_items[1].price", "out_of_range"),
            ],
        ),
    ];
    for (what, body, expected) in cases {
        let answer = api.send("POST", "/subscriptions", &body);
        let mut found = problems(&answer);
        let mut expected = expected;
        found.sort();
        expected.sort();
        assert_eq!(found, expected, "{what}: {}", answer.text);
    }
    // Nothing was stored: no subscription, no customer.
    assert_eq!(api.list("")["pagination"]["total"], 0);
    assert_eq!(ok(api.get("/customers"))["customers"], json!([]));
    // The valid body is valid.
    api.create(&valid);

    // List Subscriptions: an unknown filter field or operator, a bad value, a bad cursor.
    for query in [
        "filter=lt(color:3)",
        "filter=ne(id:3)",
        "filter=like(id:3)",
        "filter=lt(next_order_datetime:tomorrow)",
        "filter=gt(id:abc)",
        "filter=gt(id:3",
        "subscription_status=frozen",
        "cursor=not-a-cursor",
        "limit=0",
        "limit=251",
    ] {
        let answer = api.get(&format!("/subscriptions?{query}"));
        assert_eq!(answer.status, 400, "{query}: {}", answer.text);
        let entries = answer.errors();
        let parameter = query.split('=').next().unwrap();
        assert_eq!(entries[0]["field"], parameter, "{query}");
    }
}

/// The ids of a List Subscriptions page; asserts the pagination's shape on the way.
fn page_ids(page: &Value, per_page: i64) -> Vec<i64> {
    let pagination = &page["pagination"];
    assert_eq!(
        keys(pagination),
        set(&["total", "count", "per_page", "total_pages", "next"]),
        "{pagination}"
    );
    let ids: Vec<i64> = page["subscriptions"]
        .as_array()
        .unwrap()
        .iter()
        .map(id_of)
        .collect();
    assert_eq!(pagination["count"], ids.len() as i64);
    assert_eq!(pagination["per_page"], per_page);
    let total = pagination["total"].as_i64().unwrap();
    assert_eq!(pagination["total_pages"], (total + per_page - 1) / per_page);
    assert!(
        ids.windows(2).all(|pair| pair[0] < pair[1]),
        "by id ascending"
    );
    ids
}

/// Walks List Subscriptions from the first page to the one whose `next` is null, calling
/// `between` after each page but the last; every id seen, in order.
fn walk(
    api: &Api<'_>,
    query: &str,
    limit: i64,
    mut between: impl FnMut(usize, &[i64]),
) -> Vec<i64> {
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    for page_number in 0.. {
        let cursor_part = cursor
            .as_ref()
            .map(|c| format!("&cursor={c}"))
            .unwrap_or_default();
        let page = api.list(&format!("{query}&limit={limit}{cursor_part}"));
        let ids = page_ids(&page, limit);
        seen.extend(&ids);
        match page["pagination"]["next"].as_str() {
            Some(next) => {
                assert_eq!(ids.len() as i64, limit, "only the last page is short");
                cursor = Some(next.to_string());
                between(page_number, &seen);
            }
            None => {
                assert_eq!(page["pagination"]["next"], Value::Null);
                break;
            }
        }
    }
    seen
}

fn a_cursor_walk_sees_every_subscription_once_while_others_change(backend: Backend) {
    let server = MercerServer::start_with(TestDatabase::create(backend), ALLOW_PRIVATE);
    let api = Api::demo(&server);
    let rule = running_rule();
    let base = monday(1);
    let next_of = |index: usize| rfc(base.plus_seconds(index as i64 * 3600));
    let body_of = |index: usize| {
        let mut body = seed_body(&format!("walker{}@example.test", index % 20), &rule);
        body["subscription"]["next_order_datetime"] = json!(next_of(index));
        if index % 10 == 9 {
            body["subscription"]["subscription_status"] = json!("paused");
        }
        body
    };

    // 1,000 subscriptions over HTTP, from four clients at once.
    let started = Instant::now();
    let mut originals: Vec<(usize, i64)> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..4)
            .map(|worker| {
                let (api, body_of) = (&api, &body_of);
                scope.spawn(move || {
                    (worker..1000)
                        .step_by(4)
                        .map(|index| (index, id_of(&api.create(&body_of(index)))))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|worker| worker.join().unwrap())
            .collect()
    });
    originals.sort();
    eprintln!(
        "{backend:?}: 1,000 subscriptions created over HTTP in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let id_at = |index: usize| originals[index].1;
    let paused: BTreeSet<i64> = (0..1000).filter(|i| i % 10 == 9).map(id_at).collect();
    let active_originals: Vec<i64> = (0..1000).filter(|i| i % 10 != 9).map(id_at).collect();

    // Walk the active ones, 50 a page; after each of the first ten pages, 5 are created and
    // 5 cancelled: 3 ahead of the cursor, 2 behind it.
    let walked_at = Instant::now();
    let mut created = Vec::new();
    let mut cancelled_ahead = BTreeSet::new();
    let mut cancelled_behind = BTreeSet::new();
    let seen = walk(&api, "subscription_status=active", 50, |page, seen| {
        if page >= 10 {
            return;
        }
        for n in 0..5 {
            let mut body = body_of(0);
            body["subscription"]["next_order_datetime"] = json!(rfc(base.plus_seconds(-DAY)));
            body["customer"]["email"] = json!(format!("late{page}-{n}@example.test"));
            created.push(id_of(&api.create(&body)));
        }
        let last_seen = *seen.last().unwrap();
        let ahead = active_originals
            .iter()
            .filter(|id| **id > last_seen + 100 && !cancelled_ahead.contains(*id))
            .step_by(7)
            .take(3)
            .copied()
            .collect::<Vec<_>>();
        let behind = seen
            .iter()
            .filter(|id| active_originals.contains(id) && !cancelled_behind.contains(*id))
            .take(2)
            .copied()
            .collect::<Vec<_>>();
        for id in ahead.iter().chain(&behind) {
            let answer = api.send("POST", &format!("/subscriptions/{id}/cancel"), &json!({}));
            assert_eq!(answer.status, 200, "{}", answer.text);
        }
        cancelled_ahead.extend(ahead);
        cancelled_behind.extend(behind);
    });
    eprintln!(
        "{backend:?}: the walk took {:.1} s",
        walked_at.elapsed().as_secs_f64()
    );
    assert_eq!(
        (
            created.len(),
            cancelled_ahead.len() + cancelled_behind.len()
        ),
        (50, 50)
    );
    let mut counts: BTreeMap<i64, usize> = BTreeMap::new();
    for id in &seen {
        *counts.entry(*id).or_default() += 1;
    }
    let twice: Vec<_> = counts.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "seen more than once: {twice:?}");
    let seen: BTreeSet<i64> = seen.into_iter().collect();
    for id in &active_originals {
        assert_eq!(
            seen.contains(id),
            !cancelled_ahead.contains(id),
            "subscription {id}: every active one is seen, but those cancelled before the \
             walk reached them"
        );
    }
    assert!(seen.is_disjoint(&paused), "no paused one in an active walk");
    for id in &created {
        assert!(
            seen.contains(id),
            "{id} was created during the walk, after every other"
        );
    }

    // The whole list, 250 a page: every subscription once, in id order.
    let all = walk(&api, "", 250, |_, _| {});
    let mut expected: Vec<i64> = originals.iter().map(|(_, id)| *id).collect();
    expected.sort_unstable();
    expected.extend(&created);
    assert!(
        all == expected,
        "the whole list is every subscription once, by id: {} listed, {} expected",
        all.len(),
        expected.len()
    );
    let last = api.list("limit=250");
    assert_eq!(last["pagination"]["total"], 1050);
    assert_eq!(last["pagination"]["total_pages"], 5);

    // Filters by status.
    let ids_of =
        |query: &str| -> BTreeSet<i64> { walk(&api, query, 250, |_, _| {}).into_iter().collect() };
    let cancelled: BTreeSet<i64> = cancelled_ahead.union(&cancelled_behind).copied().collect();
    assert_eq!(ids_of("subscription_status=paused"), paused);
    assert_eq!(ids_of("subscription_status=inactive"), cancelled);
    assert_eq!(
        ids_of("subscription_status%5B%5D=paused&subscription_status%5B%5D=inactive"),
        paused.union(&cancelled).copied().collect()
    );
    let active_now = ids_of("subscription_status=active");
    assert_eq!(active_now.len(), 900);
    assert!(active_now.is_disjoint(&cancelled) && active_now.is_disjoint(&paused));
    assert!(ids_of("subscription_status=scheduled").is_empty());

    // A window of next_order_datetime: the originals 100..200, whatever their status.
    let window = format!(
        "filter=gte(next_order_datetime:{}),lt(next_order_datetime:{})",
        next_of(100),
        next_of(200)
    );
    let in_window: BTreeSet<i64> = (100..200).map(id_at).collect();
    assert_eq!(ids_of(&window), in_window);
    let first_page = api.list(&format!("{window}&limit=60"));
    assert_eq!(first_page["pagination"]["total"], 100);
    assert_eq!(first_page["pagination"]["total_pages"], 2);
    assert_eq!(first_page["pagination"]["count"], 60);
    assert_eq!(
        ids_of(&format!("{window}&subscription_status=paused")),
        (100..200).filter(|i| i % 10 == 9).map(id_at).collect()
    );
    // lte and gt, and an integer field.
    assert_eq!(
        ids_of(&format!(
            "filter=gt(next_order_datetime:{}),lte(next_order_datetime:{})",
            next_of(100),
            next_of(200)
        )),
        (101..=200).map(id_at).collect()
    );
    assert_eq!(
        ids_of(&format!("filter=eq(id:{})", id_at(500))),
        BTreeSet::from([id_at(500)])
    );
    assert_eq!(
        ids_of(&format!(
            "filter=gt(id:{})",
            originals.iter().map(|(_, id)| *id).max().unwrap()
        )),
        created.iter().copied().collect()
    );
}

/// What each step of the webhook test does, and the topics it emits in order.
struct Step {
    what: &'static str,
    topics: &'static [&'static str],
}

fn topic_id(name: &str) -> usize {
    TOPICS
        .iter()
        .position(|topic| *topic == name)
        .map(|index| index + 1)
        .unwrap_or_else(|| panic!("no topic {name}"))
}

fn topic_secret(id: usize) -> String {
    format!("shared-secret-of-topic-{id:02}")
}

/// The messages enqueued for the shop's subscription webhooks so far, in the order they were
/// enqueued.
fn enqueued(store: &Store, endpoints: &[WebhookId]) -> Vec<WebhookMessage> {
    let endpoints = endpoints.to_vec();
    let mut messages = store
        .read(move |tx| {
            let mut all = Vec::new();
            for endpoint in endpoints {
                all.extend(tx.webhook_messages_of_endpoint(endpoint, 1000)?);
            }
            Ok(all)
        })
        .unwrap();
    messages.sort_by_key(|message| message.id);
    messages
}

fn every_action_emits_its_webhooks_each_verified(backend: Backend) {
    let server = MercerServer::start_with(TestDatabase::create(backend), ALLOW_PRIVATE);
    let api = Api::demo(&server);
    let receiver = Receiver::start();

    // One webhook subscription per topic, each with its own secret.
    let mut endpoints = Vec::new();
    let store = server.database().open_store();
    let shop_identifier = ShopIdentifier::parse(&api.shop).unwrap();
    let shop_id = store
        .read(move |tx| Ok(tx.shop_by_identifier(&shop_identifier)?.unwrap().id))
        .unwrap();
    for id in 1..=20 {
        let created = api.send(
            "POST",
            "/webhooks/subscriptions",
            &json!({ "webhook_subscription": {
                "callback_url": format!("{}/topic/{id}", receiver.url),
                "webhook_topic_id": id,
                "shared_secret": topic_secret(id),
            } }),
        );
        assert_eq!(created.status, 201, "{}", created.text);
        let public_id = created.json()["webhook_subscription"]["id"]
            .as_str()
            .unwrap()
            .to_string();
        let endpoint = store
            .read(move |tx| Ok(tx.webhook_endpoint(shop_id, &public_id)?.unwrap().id))
            .unwrap();
        endpoints.push(endpoint);
    }

    // Each step, then the topics it enqueued, in order; `expected_data` holds what each
    // message's `data` must be.
    let mut expected_data: Vec<(&str, Value)> = Vec::new();
    let mut expect = |step: Step, data_of: &dyn Fn(&str) -> Value| {
        let before = expected_data.len();
        let count = before + step.topics.len();
        let done = wait_until(Duration::from_secs(10), || {
            enqueued(&store, &endpoints).len() >= count
        });
        let messages = enqueued(&store, &endpoints);
        assert!(done, "{}: {} messages", step.what, messages.len());
        let topics: Vec<&str> = messages[before..]
            .iter()
            .map(|m| m.topic.as_str())
            .collect();
        assert_eq!(topics, step.topics, "{}", step.what);
        for topic in step.topics {
            expected_data.push((topic, data_of(topic)));
        }
    };

    let sub = api.create(&seed_body("hooks@example.test", &running_rule()));
    let id = id_of(&sub);
    let customer_id = sub["customer_id"].as_i64().unwrap();
    let customer = api.customer(customer_id);
    expect(
        Step {
            what: "create with a new customer",
            topics: &["customer_created", "subscription_created"],
        },
        &|topic: &str| {
            if topic == "customer_created" {
                customer.clone()
            } else {
                sub.clone()
            }
        },
    );

    let act = |path: &str, method: &str, body: Value| -> Value {
        ok(api.send(method, &format!("/subscriptions/{id}/{path}"), &body))["subscription"].clone()
    };
    let mut run = |what: &'static str, topics: &'static [&'static str], after: Value| {
        expect(Step { what, topics }, &|_: &str| after.clone());
    };
    run(
        "pause",
        &["subscription_paused", "subscription_updated"],
        act("pause", "POST", json!({})),
    );
    run(
        "resume, the next order still ahead",
        &["subscription_resumed", "subscription_updated"],
        act("resume", "POST", json!({})),
    );
    run(
        "skip the next order",
        &[
            "subscription_skipped",
            "subscription_frequency_updated",
            "subscription_updated",
        ],
        act("skip", "POST", json!({ "order_datetime": rfc(monday(0)) })),
    );
    run(
        "skip a later order",
        &["subscription_skipped", "subscription_updated"],
        act("skip", "POST", json!({ "order_datetime": rfc(monday(4)) })),
    );
    let line_item = id_of(&sub["line_items"][0]);
    run(
        "change quantity",
        &["subscription_quantity_updated", "subscription_updated"],
        act(
            &format!("line_items/{line_item}/quantity"),
            "PUT",
            json!({ "quantity": 4 }),
        ),
    );
    run(
        "change frequency",
        &["subscription_frequency_updated", "subscription_updated"],
        act("frequency", "PUT", json!({ "order_rrule": weekly_rule() })),
    );
    run(
        "change shipping address",
        &[
            "subscription_shipping_address_updated",
            "subscription_updated",
        ],
        act(
            "shipping_address",
            "PUT",
            json!({ "shipping_address": address("7 Rue Ontario", "Québec") }),
        ),
    );
    run(
        "change payment method",
        &[
            "subscription_credit_card_updated",
            "subscription_payment_method_updated",
            "subscription_updated",
        ],
        act(
            "payment_method",
            "PUT",
            json!({ "payment_method_token": "pm_new_card_5555", "payment_gateway_public_id": "adyen" }),
        ),
    );
    run(
        "cancel",
        &["subscription_cancelled", "subscription_updated"],
        act("cancel", "POST", json!({})),
    );
    run(
        "reactivate, the next order still ahead",
        &["subscription_reactivated", "subscription_updated"],
        act("reactivate", "POST", json!({})),
    );
    // A pause, a next order moved into the past by Update Subscription, then a resume that
    // must find a new date: subscription_frequency_updated on the resume too.
    run(
        "pause again",
        &["subscription_paused", "subscription_updated"],
        act("pause", "POST", json!({})),
    );
    let updated = ok(api.send(
        "PUT",
        &format!("/subscriptions/{id}"),
        &json!({ "subscription": { "next_order_datetime": rfc(monday(-2)) } }),
    ))["subscription"]
        .clone();
    assert_eq!(updated["next_order_datetime"], rfc(monday(-2)));
    run(
        "update next_order_datetime",
        &["subscription_frequency_updated", "subscription_updated"],
        updated,
    );
    let resumed = act("resume", "POST", json!({}));
    assert_eq!(resumed["next_order_datetime"], rfc(monday(1)));
    run(
        "resume, the next order gone by",
        &[
            "subscription_resumed",
            "subscription_frequency_updated",
            "subscription_updated",
        ],
        resumed,
    );

    // Update Customer: the name → customer_updated; notes only → nothing.
    let notes_only = ok(api.send(
        "PUT",
        &format!("/customers/{customer_id}"),
        &json!({ "customer": { "notes": "ring twice" } }),
    ));
    assert_eq!(notes_only["customer"]["notes"], "ring twice");
    let renamed = ok(api.send(
        "PUT",
        &format!("/customers/{customer_id}"),
        &json!({ "customer": { "first_name": "Augusta", "last_name": "King" } }),
    ))["customer"]
        .clone();
    assert_eq!(renamed["first_name"], "Augusta");
    expect(
        Step {
            what: "update customer (notes, then the name)",
            topics: &["customer_updated"],
        },
        &|_: &str| renamed.clone(),
    );
    // Another subscription of the same customer: no customer_created.
    let second = api.create(&seed_body("hooks@example.test", &running_rule()));
    assert_eq!(second["customer_id"], customer_id);
    expect(
        Step {
            what: "create for a known customer",
            topics: &["subscription_created"],
        },
        &|_: &str| second.clone(),
    );
    // Refused actions and repeated creations emit nothing.
    api.send("POST", &format!("/subscriptions/{id}/resume"), &json!({}))
        .assert_error(422, INVALID_TRANSITION);

    // Every message reaches its endpoint exactly once.
    let messages = enqueued(&store, &endpoints);
    assert_eq!(messages.len(), expected_data.len());
    let delivered = wait_until(Duration::from_secs(30), || {
        receiver.received().len() >= messages.len()
    });
    std::thread::sleep(Duration::from_millis(500));
    let received = receiver.received();
    assert!(
        delivered,
        "{} of {} delivered",
        received.len(),
        messages.len()
    );
    assert_eq!(
        received.len(),
        messages.len(),
        "nothing more, nothing twice"
    );
    assert_eq!(
        enqueued(&store, &endpoints).len(),
        messages.len(),
        "a refused action enqueues nothing"
    );

    let mut verifiers: HashMap<usize, (Verifier, Verifier)> = HashMap::new();
    for (message, (topic, data)) in messages.iter().zip(&expected_data) {
        let copies: Vec<&Received> = received
            .iter()
            .filter(|r| r.header("webhook-id") == Some(message.message_id.as_str()))
            .collect();
        assert_eq!(copies.len(), 1, "{topic}: received once");
        let request = copies[0];
        let id = topic_id(topic);
        assert_eq!(request.method, "POST");
        assert_eq!(
            request.target,
            format!("/topic/{id}"),
            "{topic}: its own endpoint"
        );
        assert_eq!(request.header("X-Svc-Topic"), Some(*topic));
        let body: Value = serde_json::from_slice(&request.body).unwrap();
        if *topic == "subscription_cancelled" {
            // What the canceller said: nothing here (docs/subscriptions.md, Cancellation reasons).
            assert_eq!(
                keys(&body),
                set(&[
                    "topic",
                    "shop_identifier",
                    "created_at",
                    "data",
                    "cancellation"
                ]),
                "{body}"
            );
            assert_eq!(
                body["cancellation"],
                json!({"reason": null, "comment": null})
            );
        } else {
            assert_eq!(
                keys(&body),
                set(&["topic", "shop_identifier", "created_at", "data"]),
                "{body}"
            );
        }
        assert_eq!(body["topic"], *topic);
        assert_eq!(body["shop_identifier"], api.shop.as_str());
        assert!(is_time(&body["created_at"]), "{body}");
        assert_eq!(
            &body["data"], data,
            "{topic}: the full resource after the change"
        );

        let (svc, standard) = verifiers.entry(id).or_insert_with(|| {
            (
                x_svc_signature(&topic_secret(id)),
                standard_webhooks(&topic_secret(id)),
            )
        });
        assert_eq!(
            replay(svc, request),
            (200, "verified".to_string()),
            "{topic}: x-svc-signature"
        );
        assert_eq!(
            replay(standard, request),
            (200, "verified".to_string()),
            "{topic}: Standard Webhooks"
        );
    }
    // Each endpoint signs with its own secret: another topic's does not verify.
    let wrong = (
        x_svc_signature(&topic_secret(20)),
        standard_webhooks(&topic_secret(20)),
    );
    let paused_request = received
        .iter()
        .find(|r| r.target == "/topic/12")
        .expect("a subscription_paused delivery");
    assert_eq!(replay(&wrong.0, paused_request).0, 401);
    assert_eq!(replay(&wrong.1, paused_request).0, 401);
}

/// Rates, quantities and prices outside their bounds are refused on their paths, a charged
/// currency needs its rate, and an amount is charged at the rate as written (100 × 1.005 is
/// 100.5, rounded to 101; in binary floats it is 100.49999999999999).
fn rates_quantities_and_prices_are_bounded_and_charged_exactly(backend: Backend) {
    let server = MercerServer::start_with(TestDatabase::create(backend), ALLOW_PRIVATE);
    let api = Api::demo(&server);
    let valid = seed_body("bounds@example.test", &running_rule());
    let with = |pointer: &str, value: Value| {
        let mut body = valid.clone();
        *body.pointer_mut(pointer).unwrap() = value;
        body
    };
    let rate = "/subscription/base_to_charged_exchange_rate";
    let quantity = "/subscription/line_items/0/quantity";
    let price = "/subscription/line_items/0/price";
    for (pointer, value, field) in [
        (
            rate,
            json!(1e-9),
            "subscription.base_to_charged_exchange_rate",
        ),
        (
            rate,
            json!(1e308),
            "subscription.base_to_charged_exchange_rate",
        ),
        (
            rate,
            json!(1_000_000.01),
            "subscription.base_to_charged_exchange_rate",
        ),
        (
            quantity,
            json!(10_001),
            "subscription.line_items[0].quantity",
        ),
        (
            quantity,
            json!(i64::MAX),
            "subscription.line_items[0].quantity",
        ),
        (
            price,
            json!(100_000_001),
            "subscription.line_items[0].price",
        ),
    ] {
        let answer = api.send("POST", "/subscriptions", &with(pointer, value.clone()));
        assert_eq!(
            problems(&answer),
            [pair(field, "out_of_range")],
            "{pointer} = {value}"
        );
    }
    let mut no_rate = valid.clone();
    no_rate["subscription"]
        .as_object_mut()
        .unwrap()
        .remove("base_to_charged_exchange_rate");
    assert_eq!(
        problems(&api.send("POST", "/subscriptions", &no_rate)),
        [pair(
            "subscription.base_to_charged_exchange_rate",
            "required"
        )]
    );
    // Just inside every bound.
    let mut edge = with(rate, json!(1.005));
    edge["subscription"]["line_items"][0]["quantity"] = json!(10_000);
    edge["subscription"]["line_items"][0]["price"] = json!(100);
    edge["subscription"]["line_items"][1]["price"] = json!(100_000_000);
    let created = api.create(&edge);
    assert_eq!(created["line_items"][0]["price_charged"], 101);
    assert_eq!(created["line_items"][0]["full_price_charged"], 1_005_000);
    let id = id_of(&created);
    let line_item = created["line_items"][0]["id"].as_i64().unwrap();
    let change = |quantity: Value| {
        api.send(
            "PUT",
            &format!("/subscriptions/{id}/line_items/{line_item}/quantity"),
            &json!({ "quantity": quantity }),
        )
    };
    assert_eq!(
        problems(&change(json!(10_001))),
        [pair("quantity", "out_of_range")]
    );
    let changed = ok(change(json!(3)));
    assert_eq!(
        changed["subscription"]["line_items"][0]["full_price_charged"],
        302
    );
    let update = |body: Value| api.send("PUT", &format!("/subscriptions/{id}"), &body);
    assert_eq!(
        problems(&update(
            json!({"subscription": {"base_to_charged_exchange_rate": 0.0000009}})
        )),
        [pair(
            "subscription.base_to_charged_exchange_rate",
            "out_of_range"
        )]
    );
    assert_eq!(
        problems(&update(
            json!({"subscription": {"charged_currency": "EUR"}})
        )),
        [pair(
            "subscription.base_to_charged_exchange_rate",
            "required"
        )]
    );
}

backend_tests!(
    rates_quantities_and_prices_are_bounded_and_charged_exactly,
    create_subscription_answers_every_field_of_the_seed,
    an_idempotency_key_returns_the_first_subscription_or_409,
    every_action_from_every_status_follows_the_states_table,
    actions_check_their_bodies_and_targets,
    create_subscription_refuses_each_invalid_field_on_its_path,
    a_cursor_walk_sees_every_subscription_once_while_others_change,
    every_action_emits_its_webhooks_each_verified,
);
