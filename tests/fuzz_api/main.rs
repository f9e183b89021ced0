//! Schema fuzzing: schemathesis sends generated requests to every operation of the real
//! `mercer`'s OpenAPI document, on each database, as the demo shop, following the document's
//! links from creates to reads. It must find no server error (5xx) and no answer that breaks
//! the document.
//!
//! The shop is seeded first (a subscription group, a subscription with its customer and
//! address, a webhook subscription to a local receiver), and the operations on those records get
//! their ids, so generated bodies reach the handlers with real records behind them.
//!
//! `cargo xtask test` runs it briefly (`MERCER_FUZZ_SECONDS`, default 45 s per database);
//! `cargo xtask fuzz-api` runs it long. Outgoing calls are limited to loopback
//! (`--loopback-targets-only`): the fuzzer's URLs never lead Mercer off the machine.

use mercer_tests::receiver::Receiver;
use mercer_tests::schemathesis::{Pin, fuzz, max_time};
use mercer_tests::{Backend, MercerServer, TestDatabase, backend_tests};
use serde_json::{Value, json};

backend_tests!(schemathesis_finds_no_server_error_and_no_answer_off_the_document);

fn schemathesis_finds_no_server_error_and_no_answer_off_the_document(backend: Backend) {
    let server = MercerServer::start_with(
        TestDatabase::create_migrated(backend),
        &["--loopback-targets-only"],
    );
    let receiver = Receiver::start();
    let pins = seed(&server, &receiver);
    let name = backend.name();
    let findings =
        fuzz(&server, name, max_time(45), &pins).unwrap_or_else(|error| panic!("{error}"));
    println!(
        "schemathesis on {name}: {} operations, {} cases, {} failures (report {})",
        findings.operations,
        findings.cases,
        findings.failures,
        findings.report.display()
    );
    assert!(
        findings.exit_code == 0 && findings.failures == 0,
        "schemathesis found {} failures on {name} (exit {}):\n{}",
        findings.failures,
        findings.exit_code,
        findings.output
    );
    assert!(
        findings.cases > 0 && findings.operations > 0,
        "{}",
        findings.output
    );
}

/// Creates one record of each kind the subscription routes name in their paths, and pins
/// their ids on those routes.
fn seed(server: &MercerServer, receiver: &Receiver) -> Vec<Pin> {
    let base = format!("/subscriptions/v1/shops/{}", server.demo().shop);
    let create = |path: &str, body: Value| -> Value {
        let answer = server
            .post(&format!("{base}{path}"))
            .bearer(&server.demo().token)
            .json(&body);
        assert!(
            answer.status < 300,
            "seeding {path}: {} {}",
            answer.status,
            answer.text
        );
        answer.json()
    };
    let group = create(
        "/subscription_groups",
        json!({"subscription_group": {"name": "Coffee club", "billing_rules": [
            {"interval_number": 1, "interval_type": "month"}]}}),
    );
    let subscription = &create("/subscriptions", subscription_body())["subscription"];
    let webhook = create(
        "/webhooks/subscriptions",
        json!({"webhook_subscription": {"callback_url": receiver.url, "webhook_topic_id": 1,
            "shared_secret": "fuzz-secret-0123456789"}}),
    );
    let text = |value: &Value| match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    };
    let shop_path = r"^/subscriptions/v1/shops/\{shop\}";
    let pin = |rest: &str, parameters: &[(&'static str, &Value)]| Pin {
        path_regex: format!("{shop_path}{rest}"),
        parameters: parameters
            .iter()
            .map(|(name, value)| (*name, text(value)))
            .collect(),
    };
    let (subscription_id, customer_id) = (&subscription["id"], &subscription["customer_id"]);
    vec![
        pin(
            r"/subscription_groups/\{id\}$",
            &[("id", &group["subscription_group"]["id"])],
        ),
        pin(
            r"/subscriptions/\{id\}/line_items/",
            &[
                ("id", subscription_id),
                ("line_item_id", &subscription["line_items"][0]["id"]),
            ],
        ),
        pin(
            r"/subscriptions/\{id\}(/[a-z_]+)?$",
            &[("id", subscription_id)],
        ),
        pin(
            r"/customers/\{customer_id\}/addresses/\{address_id\}$",
            &[
                ("customer_id", customer_id),
                ("address_id", &subscription["shipping_address_id"]),
            ],
        ),
        pin(
            r"/customers/\{customer_id\}(/[a-z_]+)?$",
            &[("customer_id", customer_id)],
        ),
        pin(
            r"/webhooks/subscriptions/\{id\}",
            &[("id", &webhook["webhook_subscription"]["id"])],
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
                {"platform_product_id": "prod-coffee", "platform_variant_id": "var-1kg",
                 "quantity": 2, "price": 1299},
                {"platform_product_id": "prod-tea", "platform_variant_id": "var-tin",
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
