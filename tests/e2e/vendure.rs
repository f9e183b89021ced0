//! The Vendure connector end to end: a real Vendure (the pinned `@vendure/core`, with the Mercer
//! plugin, shared by the tests of this process), the real `mercer-vendure` binary, and the real
//! `mercer` binary on SQLite and PostgreSQL.
//!
//! - `mercer conformance` passes every check against `mercer-vendure`, with Vendure on SQLite
//!   and with Vendure on PostgreSQL;
//! - a catalogue that existed before the shop was connected arrives with a product sync; a
//!   customer, an address, a product and a collection made in Vendure's Admin API afterwards
//!   arrive as events, and so does a deletion.

use std::process::Command;
use std::time::Duration;

use mercer_connector::conformance::CHECKS;
use mercer_domain::platform::events::EntityKind;
use mercer_domain::ports::Database as _;
use mercer_store::Store;
use mercer_tests::vendure::{self, Connector, ConnectorFor, admin, shop_session};
use mercer_tests::{Backend, MercerServer, TestDatabase, backend_tests, mercer_binary, wait_until};
use mercer_vendure::dev::{Database, RunningVendure};
use serde_json::{Value, json};

const SHOP: &str = "0123456789abcdef0123456789abcdef";
const SECRET: &str = "vendure-conformance-secret";

/// The seeded customer's Vendure id and a Shop API session token of theirs.
fn seeded_customer_token(vendure: &RunningVendure) -> (String, String) {
    let found = admin(
        vendure,
        "query($email: String!) { customers(options: {filter: {emailAddress: {eq: $email}}}) { items { id } } }",
        json!({ "email": vendure.customer_email }),
    );
    let id = found["customers"]["items"][0]["id"]
        .as_str()
        .expect("the seeded customer")
        .to_string();
    let token = shop_session(vendure, &vendure.customer_email, &vendure.customer_password);
    (id, token)
}

/// `mercer conformance` against a connector for `vendure` (no Mercer behind it: the checks
/// call the connector only); asserts every check passed, the customer token's too.
fn conformance_passes(vendure: &RunningVendure) {
    let connector = Connector::start(
        vendure,
        &ConnectorFor {
            shop: SHOP,
            secret: SECRET,
            mercer_url: "http://127.0.0.1:9",
            mercer_token: "unused",
            reconcile_interval_s: 3600,
        },
    );
    let (customer, token) = seeded_customer_token(vendure);
    let output = Command::new(mercer_binary())
        .args(["conformance", "--connector", &connector.url, "--shop", SHOP])
        .args(["--secret", SECRET, "--allow-private-targets"])
        .args(["--customer-token", &format!("{customer}:{token}")])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}\n{stderr}");
    for check in CHECKS {
        let row = stdout
            .lines()
            .find(|line| line.split_whitespace().next() == Some(check.name))
            .unwrap_or_else(|| panic!("no row {}:\n{stdout}", check.name));
        assert!(row.contains(" PASS"), "{row}");
    }
    let validate = stdout
        .lines()
        .find(|line| line.starts_with("validate-customer-jwt"))
        .unwrap();
    assert!(!validate.contains("no customer token"), "{validate}");
}

#[test]
fn conformance_passes_against_vendure_on_sqlite() {
    conformance_passes(vendure::shared());
}

#[test]
fn conformance_passes_against_vendure_on_postgresql() {
    let url = format!("{}/mercer_vendure_test", postgres_server());
    conformance_passes(&vendure::start(Database::Postgres(url)));
}

/// The PostgreSQL server the suite uses (`postgres://USER@HOST:PORT`).
fn postgres_server() -> String {
    let url = std::env::var("MERCER_TEST_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432".to_string());
    let without_db = url.trim_end_matches('/');
    match without_db.rsplit_once('/') {
        Some((server, _)) if server.contains("://") && !server.ends_with('/') => server.to_string(),
        _ => without_db.to_string(),
    }
}

/// Mercer on `backend` and a Vendure connector for its demo shop, registered for every topic.
struct World {
    server: MercerServer,
    store: Store,
    shop: String,
    token: String,
    vendure: &'static RunningVendure,
    _connector: Connector,
}

impl World {
    fn new(backend: Backend) -> World {
        let server =
            MercerServer::start_with(TestDatabase::create(backend), &["--allow-private-targets"]);
        let demo = server.demo().clone();
        let secret = server.rotate_connector_secret(&demo.shop, &demo.token);
        let vendure = vendure::shared();
        let connector = Connector::start(
            vendure,
            &ConnectorFor {
                shop: &demo.shop,
                secret: &secret,
                mercer_url: &server.base_url,
                mercer_token: &demo.token,
                reconcile_interval_s: 2,
            },
        );
        let path = format!(
            "/integrations/v1/shops/{}/platform_connector_destinations",
            demo.shop
        );
        for topic in ["customers", "orders", "products"] {
            let body =
                json!({"data": {"destination": {"topic": topic, "destination": connector.url}}});
            let answer = server.post(&path).bearer(&demo.token).json(&body);
            assert_eq!(answer.status, 200, "{topic}: {}", answer.text);
        }
        let store = server.database().open_store();
        World {
            server,
            store,
            shop: demo.shop,
            token: demo.token,
            vendure,
            _connector: connector,
        }
    }

    /// The entity Mercer holds, once it holds one (live, or deleted when `deleted`).
    fn wait_for(&self, kind: EntityKind, platform_id: &str, deleted: bool) -> Value {
        let shop_id = self
            .store
            .read(|tx| Ok(mercer_domain::access::shop::find_shop(tx, &self.shop)?.id))
            .unwrap();
        let mut found = None;
        let arrived = wait_until(Duration::from_secs(30), || {
            let record = self
                .store
                .read(|tx| Ok(tx.platform_entity(shop_id, kind, platform_id)?))
                .unwrap();
            found = record.filter(|r| r.platform_deleted_at.is_some() == deleted);
            found.is_some()
        });
        assert!(
            arrived,
            "{kind:?} {platform_id} (deleted: {deleted}) did not arrive"
        );
        let document: String = found.and_then(|record| record.document).unwrap_or_default();
        serde_json::from_str(&document).unwrap_or(Value::Null)
    }

    fn directory_customer(&self, platform_id: &str) -> Value {
        let path = format!(
            "/customers/v2/shops/{}/customers/pid/{platform_id}",
            self.shop
        );
        let answer = self.server.get(&path).bearer(&self.token).call();
        assert_eq!(answer.status, 200, "{}", answer.text);
        answer.json()
    }
}

fn vendure_changes_reach_the_directory_and_the_catalogue(backend: Backend) {
    let world = World::new(backend);
    let vendure = world.vendure;

    // The catalogue Vendure had before the shop was connected comes with a sync.
    let sync = format!("/products/v2/shops/{}/sync", world.shop);
    let started = world.server.post(&sync).bearer(&world.token).call();
    assert_eq!(started.status, 202, "{}", started.text);
    let products = admin(
        vendure,
        "{ products(options: {filter: {slug: {eq: \"house-blend\"}}}) { items { id variants { id sku price } } } }",
        json!({}),
    );
    let house_blend = &products["products"]["items"][0];
    let house_blend_id = house_blend["id"].as_str().unwrap();
    let synced = world.wait_for(EntityKind::Product, house_blend_id, false);
    assert_eq!(synced["name"], "House Blend", "{synced}");
    let variants = synced["variants"].as_array().unwrap();
    assert_eq!(variants.len(), 2, "{synced}");
    assert_eq!(variants[0]["sku"], "HB-250");
    assert_eq!(
        variants[0]["price"], "12.50",
        "minor units as the currency's decimal"
    );
    assert_eq!(synced["categories"][0]["name"], "Coffee", "{synced}");

    // A customer made in Vendure arrives as Customer Saved, then their address.
    let email = format!("grace-{}@example.com", world.shop);
    let made = admin(
        vendure,
        "mutation($input: CreateCustomerInput!) { createCustomer(input: $input) { ... on Customer { id } } }",
        json!({ "input": { "emailAddress": email, "firstName": "Grace", "lastName": "Hopper" } }),
    );
    let customer = made["createCustomer"]["id"].as_str().unwrap().to_string();
    let saved = world.wait_for(EntityKind::Customer, &customer, false);
    assert_eq!(saved["email"], email.as_str());
    admin(
        vendure,
        "mutation($id: ID!, $input: CreateAddressInput!) { createCustomerAddress(customerId: $id, input: $input) { id } }",
        json!({ "id": customer, "input": { "fullName": "Grace Hopper", "streetLine1": "1 Navy Way",
            "city": "Arlington", "postalCode": "22201", "countryCode": "US",
            "customFields": { "provinceCode": "VA" } } }),
    );
    assert!(wait_until(Duration::from_secs(30), || {
        let listed = world.directory_customer(&customer);
        listed["customer"]["addresses"]
            .as_array()
            .is_some_and(|addresses| addresses.len() == 1)
    }));
    let listed = world.directory_customer(&customer);
    let address = &listed["customer"]["addresses"][0];
    assert_eq!(address["city"], "Arlington", "{listed}");
    assert_eq!(listed["customer"]["first_name"], "Grace");

    // A collection and a product made in Vendure arrive as Category and Product Saved.
    // Slugs are unique in Vendure, which the tests of this process share.
    let collection = admin(
        vendure,
        "mutation($slug: String!) { createCollection(input: {filters: [], translations: [{languageCode: en, name: \"Gifts\", slug: $slug, description: \"\"}]}) { id } }",
        json!({ "slug": format!("gifts-{}", world.shop) }),
    );
    let collection = collection["createCollection"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let category = world.wait_for(EntityKind::Category, &collection, false);
    assert_eq!(category["name"], "Gifts");
    let product = admin(
        vendure,
        "mutation($slug: String!) { createProduct(input: {translations: [{languageCode: en, name: \"Gift Card\", slug: $slug, description: \"\"}]}) { id } }",
        json!({ "slug": format!("gift-card-{}", world.shop) }),
    );
    let product = product["createProduct"]["id"].as_str().unwrap().to_string();
    admin(
        vendure,
        "mutation($id: ID!, $sku: String!) { createProductVariants(input: [{productId: $id, sku: $sku, price: 2500, translations: [{languageCode: en, name: \"Gift Card 25\"}]}]) { id } }",
        json!({ "id": product, "sku": format!("GIFT-25-{}", world.shop) }),
    );
    assert!(wait_until(Duration::from_secs(30), || {
        world.wait_for(EntityKind::Product, &product, false)["variants"]
            .as_array()
            .is_some_and(|variants| variants.len() == 1)
    }));

    // A deletion in Vendure arrives as Customer Deleted.
    admin(
        vendure,
        "mutation($id: ID!) { deleteCustomer(id: $id) { result } }",
        json!({ "id": customer }),
    );
    world.wait_for(EntityKind::Customer, &customer, true);
}

backend_tests!(vendure_changes_reach_the_directory_and_the_catalogue);
