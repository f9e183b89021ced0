//! Privacy requests end to end: a customer seeded everywhere Mercer keeps personal data (the
//! directory through a Customer Saved event, Create Subscription with its addresses, webhook
//! messages of every subscription topic, a checkout), then redacted: no text column of any
//! table, found from the database's own catalogue, still holds their name, email, phone or
//! street; ids and amounts are unchanged; a second redaction changes nothing. Also the export
//! and `mercer shop redact`.

use std::time::Duration;

use mercer_tests::receiver::Receiver;
use mercer_tests::{Backend, MercerServer, TestDatabase, backend_tests, run_cli, wait_until};
use serde_json::json;

use crate::subscriptions::{ALLOW_PRIVATE, Api, id_of, ok, running_rule, seed_body};

const FIRST: &str = "Quillonette";
const LAST: &str = "Zarkowitzky";
const EMAIL: &str = "Quillonette.Zarkowitzky@privacy.test";
const PHONE: &str = "+1 555 013 7788";
const STREET: &str = "77 Xylophone Crescent";

/// What must be gone after the redaction, lower-case.
fn needles() -> Vec<String> {
    [FIRST, LAST, EMAIL, PHONE, STREET]
        .iter()
        .map(|n| n.to_lowercase())
        .collect()
}

/// Every (table, column) of the database that holds text, from its own catalogue.
fn text_columns(db: &TestDatabase) -> Vec<(String, String)> {
    match db.backend() {
        Backend::Sqlite => {
            let tables = db.texts(
                "SELECT name AS t FROM sqlite_master WHERE type = 'table' \
                 AND name NOT LIKE 'sqlite_%'",
            );
            let mut columns = Vec::new();
            for table in tables {
                for column in db.texts(&format!(
                    "SELECT name AS t FROM pragma_table_info('{table}') \
                     WHERE type = 'TEXT' OR type LIKE '%CHAR%' OR type = ''"
                )) {
                    columns.push((table.clone(), column));
                }
            }
            columns
        }
        Backend::Postgres => db
            .texts(
                "SELECT table_name || '.' || column_name AS t FROM information_schema.columns \
                 WHERE table_schema = current_schema() \
                 AND data_type IN ('text', 'character varying', 'json', 'jsonb')",
            )
            .into_iter()
            .map(|pair| {
                let (table, column) = pair.split_once('.').unwrap();
                (table.to_string(), column.to_string())
            })
            .collect(),
    }
}

/// The (table, column, needle) of every stored text that still holds a needle.
fn findings(db: &TestDatabase) -> Vec<(String, String, String)> {
    let columns = text_columns(db);
    assert!(
        columns.len() > 50,
        "the catalogue lists the tables: {columns:?}"
    );
    let mut found = Vec::new();
    for (table, column) in columns {
        for needle in needles() {
            let n = db.count(&format!(
                "SELECT COUNT(*) AS n FROM \"{table}\" \
                 WHERE LOWER(CAST(\"{column}\" AS TEXT)) LIKE '%{needle}%'"
            ));
            if n > 0 {
                found.push((table.clone(), column.clone(), needle));
            }
        }
    }
    found
}

/// The demo shop's customer, with a subscription, messages of every subscription topic, a
/// directory record from the platform and a checkout; answers the customer's and the
/// subscription's ids.
fn seed(server: &MercerServer, api: &Api<'_>, receiver: &Receiver) -> (i64, i64) {
    for topic in 1..=20 {
        let hook = api.send(
            "POST",
            "/webhooks/subscriptions",
            &json!({ "webhook_subscription": {
                "callback_url": format!("{}/topic-{topic}", receiver.url),
                "webhook_topic_id": topic, "shared_secret": "privacy-secret-0123456789"
            } }),
        );
        assert_eq!(hook.status, 201, "{}", hook.text);
    }
    let saved = server
        .post(&format!(
            "/customers/v1/shops/{}/platforms/custom/webhooks/customers/saved",
            api.shop
        ))
        .bearer(&api.token)
        .json(&json!({"data": {"customer": {
            "platform_id": "cus-privacy", "email": EMAIL, "first_name": FIRST,
            "last_name": LAST, "phone": PHONE, "platform_updated_at": "2026-01-01T00:00:00Z",
            "addresses": [{"platform_id": "adr-privacy", "first_name": FIRST, "last_name": LAST,
                "street_1": STREET, "city": "Ostrava", "postal_code": "70200",
                "country_code": "CZ", "phone": PHONE}]
        }}}));
    assert_eq!(saved.status, 202, "{}", saved.text);
    let known = format!("/customers/v2/shops/{}/customers/pid/cus-privacy", api.shop);
    assert!(wait_until(Duration::from_secs(10), || {
        server.get(&known).bearer(&api.token).call().status == 200
    }));
    let mut body = seed_body(EMAIL, &running_rule());
    body["customer"] = json!({"first_name": FIRST, "last_name": LAST, "email": EMAIL,
        "phone": PHONE, "notes": format!("call {FIRST} first")});
    for kind in ["shipping_address", "billing_address"] {
        body["subscription"][kind] = json!({"first_name": FIRST, "last_name": LAST,
            "phone": PHONE, "street1": STREET, "street2": "Flat 9", "city": "Ostrava",
            "zip": "70200", "country_code": "CZ"});
    }
    body["subscription"]["note"] = json!(format!("{FIRST} {LAST} likes it fresh"));
    let sub = api.create(&body);
    let customer = sub["customer_id"].as_i64().unwrap();
    // Two changes of phone: each `customer_updated` carries the whole customer.
    for phone in ["+1 555 000 0000", PHONE] {
        let update = json!({"customer": {"first_name": FIRST, "last_name": LAST,
            "email": EMAIL, "phone": phone, "notes": format!("call {FIRST} first")}});
        ok(api.send("PUT", &format!("/customers/{customer}"), &update));
    }
    // A checkout of the same customer, as the headless checkout stores it.
    let db = server.database();
    db.execute(&format!(
        "INSERT INTO checkout_orders (shop_id, public_order_id, status, email, item_count, \
         last_activity_at, version, document, created_at, updated_at) \
         SELECT id, 'chk-privacy', 'open', '{EMAIL}', 1, 1, 1, \
         '{{\"total\":4200,\"customer\":{{\"email\":\"{EMAIL}\",\"first_name\":\"{FIRST}\"}},\
         \"shipping_address\":{{\"street1\":\"{STREET}\",\"phone\":\"{PHONE}\",\
         \"last_name\":\"{LAST}\"}}}}', 1, 1 FROM shops"
    ));
    assert!(
        wait_until(Duration::from_secs(15), || receiver.received().len() >= 3),
        "webhooks are delivered: {:?}",
        db.texts("SELECT topic || ' ' || status AS t FROM webhook_messages")
    );
    let stored = db.count(&format!(
        "SELECT COUNT(*) AS n FROM webhook_messages WHERE LOWER(payload) LIKE '%{}%'",
        EMAIL.to_lowercase()
    ));
    assert!(
        stored > 0,
        "the payloads hold the customer: {:?}",
        db.texts("SELECT topic || ' ' || payload AS t FROM webhook_messages")
    );
    (customer, id_of(&sub))
}

/// Ids and amounts: what redaction keeps.
fn books(db: &TestDatabase) -> Vec<String> {
    let mut kept = db.texts(
        "SELECT CAST(id AS TEXT) || ':' || CAST(customer_id AS TEXT) AS t FROM subscriptions \
         ORDER BY id",
    );
    kept.extend(db.texts(
        "SELECT CAST(id AS TEXT) || ':' || CAST(price AS TEXT) || ':' || \
         CAST(quantity AS TEXT) AS t FROM subscription_line_items ORDER BY id",
    ));
    kept.extend(db.texts(
        "SELECT CAST(id AS TEXT) || ':' || message_id || ':' || status AS t \
         FROM webhook_messages ORDER BY id",
    ));
    kept.extend(db.texts("SELECT CAST(id AS TEXT) AS t FROM customer_addresses ORDER BY id"));
    kept
}

fn a_redacted_customer_is_found_nowhere(backend: Backend) {
    let receiver = Receiver::start();
    let server = MercerServer::in_process_with(backend, ALLOW_PRIVATE);
    let api = Api::demo(&server);
    let (customer, subscription) = seed(&server, &api, &receiver);
    let db = server.database();
    assert!(!findings(db).is_empty(), "the seed is found before");

    let export = ok(api.get(&format!("/customers/{customer}/export")));
    let text = export.to_string().to_lowercase();
    for needle in needles() {
        assert!(
            text.contains(&needle),
            "the export holds {needle}: {export}"
        );
    }
    let subscriptions = &export["records"]["subscriptions"];
    assert_eq!(subscriptions[0]["id"], subscription, "{export}");
    assert!(
        export["records"]["subscription_status_logs"]
            .as_array()
            .is_some()
    );
    assert!(
        !export["records"]["webhook_messages"]
            .as_array()
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        export["records"]["checkout_orders"][0]["document"]["total"],
        4200
    );

    let before = books(db);
    let redacted = api.send("POST", &format!("/customers/{customer}/redact"), &json!({}));
    assert_eq!(redacted.status, 202, "{}", redacted.text);
    assert_eq!(redacted.json()["customer_id"], customer);
    let found = findings(db);
    assert!(found.is_empty(), "personal data left: {found:?}");
    assert_eq!(books(db), before, "ids and amounts are kept");
    let answer = ok(api.get(&format!("/customers/{customer}")))["customer"].clone();
    assert_eq!(
        answer["email"],
        format!("redacted+{customer}@invalid"),
        "{answer}"
    );
    let sub = ok(api.get(&format!("/subscriptions/{subscription}")))["subscription"].clone();
    assert_eq!(sub["line_items"][0]["price"], 1299, "{sub}");

    // Again: nothing changes, and the answer is the same.
    let snapshot = |db: &TestDatabase| {
        let mut all = Vec::new();
        for (table, column) in text_columns(db) {
            all.extend(db.texts(&format!(
                "SELECT COALESCE(CAST(\"{column}\" AS TEXT), '') AS t FROM \"{table}\" \
                 ORDER BY 1"
            )));
        }
        all
    };
    let once = snapshot(db);
    let again = api.send("POST", &format!("/customers/{customer}/redact"), &json!({}));
    assert_eq!(again.status, 202, "{}", again.text);
    assert_eq!(again.json(), redacted.json());
    assert_eq!(snapshot(db), once, "a second redaction is a no-op");

    let other = api.send("POST", "/customers/999999/redact", &json!({}));
    assert_eq!(other.status, 404, "{}", other.text);
    let other = api.get("/customers/999999/export");
    assert_eq!(other.status, 404, "{}", other.text);
}

fn shop_redact_erases_every_customer(backend: Backend) {
    let receiver = Receiver::start();
    let server = MercerServer::in_process_with(backend, ALLOW_PRIVATE);
    let api = Api::demo(&server);
    seed(&server, &api, &receiver);
    let mut body = seed_body("second.person@privacy.test", &running_rule());
    body["customer"]["last_name"] = json!("Vexleby");
    api.create(&body);
    let db = server.database();
    let output = run_cli(db, &["shop", "redact", "--shop", &api.shop]);
    assert!(output.success, "{}", output.stderr);
    assert!(output.stderr.contains("2 customer"), "{}", output.stderr);
    let found = findings(db);
    assert!(found.is_empty(), "personal data left: {found:?}");
    assert_eq!(
        db.count("SELECT COUNT(*) AS n FROM shops WHERE pii_redacted_at IS NOT NULL"),
        1
    );
    assert_eq!(
        db.count("SELECT COUNT(*) AS n FROM platform_customers WHERE last_name = 'Vexleby'"),
        0
    );
    let again = run_cli(db, &["shop", "redact", "--shop", &api.shop]);
    assert!(
        again.success && again.stderr.contains("0 customer"),
        "{}",
        again.stderr
    );
}

backend_tests!(
    a_redacted_customer_is_found_nowhere,
    shop_redact_erases_every_customer
);
