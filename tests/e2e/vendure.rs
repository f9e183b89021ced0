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
use mercer_domain::Timestamp;
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
            bind: "127.0.0.1:0",
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
        .args([
            "--secret",
            SECRET,
            "--allow-private-targets",
            "--timeout-ms",
            "30000",
        ])
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

/// The conformance checks count what lists answer: they get a Vendure of their own, which no
/// other test changes meanwhile.
#[test]
fn conformance_passes_against_vendure_on_sqlite() {
    conformance_passes(&vendure::start(Database::Sqlite));
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
    /// What the connector was started with, to start it again.
    secret: String,
    bind: String,
    vendure: &'static RunningVendure,
    connector: Option<Connector>,
}

impl World {
    fn new(backend: Backend) -> World {
        World::with(backend, &[])
    }

    /// With more arguments for `mercer serve`.
    fn with(backend: Backend, serve_args: &[&str]) -> World {
        World::on(backend, vendure::shared(), serve_args)
    }

    /// Connected to `vendure` rather than the shared one.
    fn on(backend: Backend, vendure: &'static RunningVendure, serve_args: &[&str]) -> World {
        let mut args = vec!["--allow-private-targets"];
        args.extend_from_slice(serve_args);
        let server = MercerServer::start_with(TestDatabase::create(backend), &args);
        let demo = server.demo().clone();
        let secret = server.rotate_connector_secret(&demo.shop, &demo.token);
        // A port of its own, so that a restarted connector listens where the plugin pushes.
        let bind = format!("127.0.0.1:{}", vendure::free_port());
        let connector = Connector::start(
            vendure,
            &ConnectorFor {
                bind: &bind,
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
        // The suite runs many tests against one Vendure at once: its calls take seconds then.
        // Calls get the longest timeout, and an order whose placement timed out is tried again
        // (with its key: the order made first is the one paid) after 5 s, not a day.
        server
            .cli(&[
                "shop",
                "update",
                "--shop",
                &demo.shop,
                "--order-retry-interval",
                "5",
            ])
            .value();
        for topic in ["customers", "orders", "products"] {
            let body = json!({"data": {"destination": {"topic": topic,
                "destination": connector.url, "timeout_ms": 30000}}});
            let answer = server.post(&path).bearer(&demo.token).json(&body);
            assert_eq!(answer.status, 200, "{topic}: {}", answer.text);
        }
        let store = server.database().open_store();
        World {
            server,
            store,
            shop: demo.shop,
            token: demo.token,
            secret,
            bind,
            vendure,
            connector: Some(connector),
        }
    }

    /// Mercer restarted on the same database with these arguments (a later clock), and the
    /// connector restarted on its address to send to Mercer's new one.
    fn restart(self, serve_args: &[&str]) -> World {
        let World {
            server,
            shop,
            token,
            secret,
            bind,
            vendure,
            connector,
            ..
        } = self;
        let mut args = vec!["--allow-private-targets"];
        args.extend_from_slice(serve_args);
        let server = MercerServer::start_with(server.into_database(), &args);
        let store = server.database().open_store();
        let mut world = World {
            server,
            store,
            shop,
            token,
            secret,
            bind,
            vendure,
            connector,
        };
        world.connector_down(|| {});
        world
    }

    /// The connector killed as a crash would, `meanwhile` done, and the connector started again
    /// on the same address.
    fn connector_down(&mut self, meanwhile: impl FnOnce()) {
        if let Some(connector) = self.connector.take() {
            connector.crash();
        }
        meanwhile();
        self.connector = Some(Connector::start(
            self.vendure,
            &ConnectorFor {
                bind: &self.bind,
                shop: &self.shop,
                secret: &self.secret,
                mercer_url: &self.server.base_url,
                mercer_token: &self.token,
                reconcile_interval_s: 2,
            },
        ));
    }

    fn send(&self, method: &str, path: &str, body: &Value) -> Value {
        let answer = self
            .server
            .request(method, path)
            .bearer(&self.token)
            .json(body);
        assert!(
            (200..300).contains(&answer.status),
            "{method} {path}: {} {}",
            answer.status,
            answer.text
        );
        answer.json()
    }

    /// The entity Mercer holds, once it holds one (live, or deleted when `deleted`).
    fn wait_for(&self, kind: EntityKind, platform_id: &str, deleted: bool) -> Value {
        let shop_id = self
            .store
            .read(|tx| Ok(mercer_domain::access::shop::find_shop(tx, &self.shop)?.id))
            .unwrap();
        let mut found = None;
        let arrived = wait_until(Duration::from_secs(60), || {
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

    // A customer group in Vendure is one of the directory's groups.
    let group = admin(
        vendure,
        "mutation($name: String!) { createCustomerGroup(input: {name: $name}) { id } }",
        json!({ "name": format!("Wholesale {}", world.shop) }),
    );
    let group = group["createCustomerGroup"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    admin(
        vendure,
        "mutation($group: ID!, $customer: ID!) { addCustomersToGroup(customerGroupId: $group, customerIds: [$customer]) { id } }",
        json!({ "group": group, "customer": customer }),
    );
    assert!(wait_until(Duration::from_secs(60), || {
        let listed = world.directory_customer(&customer);
        listed["customer"]["groups"]
            .as_array()
            .is_some_and(|groups| groups.iter().any(|g| g["platform_id"] == group.as_str()))
    }));
    let listed = world.directory_customer(&customer);
    assert_eq!(
        listed["customer"]["groups"][0]["name"],
        format!("Wholesale {}", world.shop).as_str(),
        "{listed}"
    );

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

/// A customer made in Vendure for one test (tests share the Vendure); their id.
fn vendure_customer(vendure: &RunningVendure, email: &str) -> String {
    let made = admin(
        vendure,
        "mutation($input: CreateCustomerInput!) { createCustomer(input: $input) { ... on Customer { id } } }",
        json!({ "input": { "emailAddress": email, "firstName": "Lin", "lastName": "Subscriber" } }),
    );
    made["createCustomer"]["id"].as_str().unwrap().to_string()
}

/// The Vendure ids of a product of the seed and its variant of `sku`.
fn seeded_variant(vendure: &RunningVendure, slug: &str, sku: &str) -> (String, String) {
    let found = admin(
        vendure,
        "query($slug: String!) { products(options: {filter: {slug: {eq: $slug}}}) { items { id variants { id sku } } } }",
        json!({ "slug": slug }),
    );
    let product = &found["products"]["items"][0];
    let variant = product["variants"]
        .as_array()
        .unwrap()
        .iter()
        .find(|variant| variant["sku"] == sku)
        .unwrap_or_else(|| panic!("no variant {sku} in {product}"));
    (
        product["id"].as_str().unwrap().to_string(),
        variant["id"].as_str().unwrap().to_string(),
    )
}

/// The orders of a Vendure customer, with what a test checks of them.
fn orders_of(vendure: &RunningVendure, customer: &str) -> Vec<Value> {
    let found = admin(
        vendure,
        "query($id: ID!) { customer(id: $id) { orders { items {
            id state totalWithTax shipping subTotal
            customFields { mercerIdempotencyKey }
            shippingAddress { streetLine1 city countryCode }
            lines { quantity unitPrice discountedUnitPrice productVariant { id } }
            payments { state method amount }
        } } } }",
        json!({ "id": customer }),
    );
    found["customer"]["orders"]["items"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// The Vendure id of the customer of this email, once Vendure has one.
fn wait_for_vendure_customer(vendure: &RunningVendure, email: &str) -> String {
    let mut id = None;
    let made = wait_until(Duration::from_secs(30), || {
        let found = admin(
            vendure,
            "query($email: String!) { customers(options: {filter: {emailAddress: {eq: $email}}}) { items { id } } }",
            json!({ "email": email }),
        );
        id = found["customers"]["items"][0]["id"]
            .as_str()
            .map(str::to_string);
        id.is_some()
    });
    assert!(made, "Vendure has no customer {email}");
    id.unwrap()
}

/// Waits for the customer's one paid order; fails if a second appears meanwhile.
fn wait_for_paid_order(world: &World, customer: &str) -> Value {
    let mut orders = Vec::new();
    let paid = wait_until(Duration::from_secs(120), || {
        orders = orders_of(world.vendure, customer);
        orders
            .iter()
            .any(|order| order["state"] == "PaymentSettled")
    });
    assert!(
        paid,
        "no paid order for {customer}: {orders:?}\n{}",
        world.server.log()
    );
    // A placement retried, or a scheduler pass run twice, must not make a second order.
    std::thread::sleep(Duration::from_secs(2));
    let orders = orders_of(world.vendure, customer);
    assert_eq!(orders.len(), 1, "{orders:?}");
    orders[0].clone()
}

fn due_subscriptions_become_one_paid_vendure_order_each(backend: Backend) {
    let world = World::with(backend, &["--scheduler-interval-ms", "200"]);
    let vendure = world.vendure;
    let (blend, blend_250) = seeded_variant(vendure, "house-blend", "HB-250");
    let (ethiopia, ethiopia_1000) = seeded_variant(vendure, "ethiopia-yirgacheffe", "ET-1000");
    let known_email = format!("lin-{}@example.com", world.shop);
    let known = vendure_customer(vendure, &known_email);
    world.wait_for(EntityKind::Customer, &known, false);
    let sync = format!("/products/v2/shops/{}/sync", world.shop);
    assert_eq!(
        world.server.post(&sync).bearer(&world.token).call().status,
        202
    );
    world.wait_for(EntityKind::Product, &ethiopia, false);
    world.wait_for(EntityKind::Product, &blend, false);

    let start = Timestamp::now()
        .plus_seconds(6)
        .to_datetime()
        .format("%Y%m%dT%H%M%SZ");
    let subscribe = |email: &str, line: Value, extra: Value| {
        let mut body = json!({
            "customer": {"email": email, "first_name": "Lin", "last_name": "Subscriber"},
            "subscription": {
                "order_rrule": format!("DTSTART:{start}\nRRULE:FREQ=WEEKLY"),
                "line_items": [line],
                "shipping_address": {"first_name": "Lin", "last_name": "Subscriber",
                    "street1": "1 Main St", "city": "Portland", "province_code": "OR",
                    "zip": "97201", "country_code": "US"},
                "payment_details": {"gateway_name": "test", "gateway_payment_id": "tok_success"}
            }
        });
        for (name, value) in extra.as_object().unwrap() {
            body["subscription"][name] = value.clone();
        }
        let path = format!("/subscriptions/v1/shops/{}/subscriptions", world.shop);
        let answer = world.server.post(&path).bearer(&world.token).json(&body);
        assert_eq!(answer.status, 200, "{}", answer.text);
    };
    // A Vendure customer's subscription: two 250 g bags at 12.50 less 2.00 each, 10 % off the
    // order, and 5.00 shipping.
    subscribe(
        &known_email,
        json!({"platform_product_id": blend, "platform_variant_id": blend_250, "quantity": 2,
               "price": 1250, "discounts": [{"discount_type": "fixed_amount", "fixed_value": 200}]}),
        json!({"percent_discount": 10,
               "shipping_lines": [{"name": "Standard", "code": "STD", "price": 500}]}),
    );
    // A new subscriber, whom Mercer creates in Vendure first.
    let new_email = format!("new-{}@example.com", world.shop);
    subscribe(
        &new_email,
        json!({"platform_product_id": ethiopia, "platform_variant_id": ethiopia_1000,
               "quantity": 1, "price": 4900}),
        json!({}),
    );

    let order = wait_for_paid_order(&world, &known);
    let line = &order["lines"][0];
    assert_eq!(line["productVariant"]["id"], blend_250.as_str(), "{order}");
    assert_eq!(line["quantity"], 2);
    assert_eq!(line["unitPrice"], 1250, "the subscription's list price");
    assert_eq!(
        line["discountedUnitPrice"], 1050,
        "less its discount: {order}"
    );
    assert_eq!(order["shipping"], 500, "{order}");
    // 21.00 of items, 10 % off, 5.00 shipping: what Mercer charged.
    assert_eq!(order["totalWithTax"], 2390, "{order}");
    assert_eq!(order["shippingAddress"]["streetLine1"], "1 Main St");
    assert_eq!(order["payments"][0]["state"], "Settled");
    assert!(
        order["customFields"]["mercerIdempotencyKey"].is_string(),
        "{order}"
    );

    let new = wait_for_vendure_customer(vendure, &new_email);
    let order = wait_for_paid_order(&world, &new);
    assert_eq!(
        order["lines"][0]["productVariant"]["id"],
        ethiopia_1000.as_str()
    );
    // Mercer charged no shipping for it, and neither does Vendure.
    assert_eq!(
        (&order["shipping"], &order["totalWithTax"]),
        (&json!(0), &json!(4900)),
        "{order}"
    );
}

/// Syncs the catalogue and waits for the seeded products of these slugs; the product and
/// variant ids of each slug's variant of `sku`.
fn synced_variants(world: &World, wanted: &[(&str, &str)]) -> Vec<(String, String)> {
    let sync = format!("/products/v2/shops/{}/sync", world.shop);
    assert_eq!(
        world.server.post(&sync).bearer(&world.token).call().status,
        202
    );
    wanted
        .iter()
        .map(|(slug, sku)| {
            let (product, variant) = seeded_variant(world.vendure, slug, sku);
            world.wait_for(EntityKind::Product, &product, false);
            (product, variant)
        })
        .collect()
}

fn a_box_subscriptions_vendure_order_holds_the_customers_selection(backend: Backend) {
    let world = World::with(
        backend,
        &[
            "--scheduler-interval-ms",
            "200",
            "--clock-start",
            "2030-01-03T00:00:00Z",
        ],
    );
    let synced = synced_variants(&world, &[("earl-grey", "EG-100"), ("sencha", "SE-100")]);
    let [(earl_grey, earl_grey_100), (sencha, sencha_100)] = [synced[0].clone(), synced[1].clone()];
    let email = format!("box-{}@example.com", world.shop);
    let customer = vendure_customer(world.vendure, &email);
    world.wait_for(EntityKind::Customer, &customer, false);

    let subscriptions = format!("/subscriptions/v1/shops/{}", world.shop);
    let group = world.send(
        "POST",
        &format!("{subscriptions}/subscription_groups"),
        &json!({
        "subscription_group": {"name": "Tea club",
            "billing_rules": [{"interval_number": 1, "interval_type": "week"}]}}),
    );
    let group_id = group["subscription_group"]["id"].as_i64().unwrap();
    let rule = group["subscription_group"]["billing_rules"][0]["id"].clone();
    let boxes = format!("/box_builder/v1/shops/{}", world.shop);
    let made = world.send(
        "POST",
        &format!("{boxes}/boxes"),
        &json!({"svc_subscription_group_id": group_id, "box_name": "Tea box"}),
    );
    let box_id = made["data"]["box"]["id"].as_i64().unwrap();
    let box_product = |product: &str, variant: &str| {
        world.send(
            "POST",
            &format!("{boxes}/box_products"),
            &json!({"box_product":
            {"platform_product_id": product, "platform_variant_id": variant}}),
        )["data"]["box_product"]["id"]
            .as_i64()
            .unwrap()
    };
    let (earl_grey_box, sencha_box) = (
        box_product(&earl_grey, &earl_grey_100),
        box_product(&sencha, &sencha_100),
    );
    let size = world.send(
        "POST",
        &format!("{boxes}/boxes/{box_id}/box_sizes"),
        &json!({"box_size_name": "Small", "min_quantity": 2, "max_quantity": 4}),
    )["data"]["id"]
        .clone();
    let slot = world.send(
        "POST",
        &format!("{boxes}/boxes/{box_id}/time_slots"),
        &json!({"time_slot_name": "Week 2", "visibility_date": "2030-01-01T00:00:00Z",
            "selection_deadline_date": "2030-01-04T00:00:00Z",
            "start_date": "2030-01-07T00:00:00Z", "end_date": "2030-01-13T23:59:59Z"}),
    )["data"]["time-slot"]["id"]
        .clone();
    for product in [earl_grey_box, sencha_box] {
        world.send(
            "POST",
            &format!("{boxes}/time_slots/{slot}/options"),
            &json!({"box_product_id": product}),
        );
    }
    let subscribed = world.send("POST", &format!("{subscriptions}/subscriptions"), &json!({
        "customer": {"email": email, "first_name": "Lin"},
        "subscription": {
            "subscription_status": "active",
            "next_order_datetime": "2030-01-10T09:00:00Z",
            "line_items": [{"platform_product_id": earl_grey, "platform_variant_id": earl_grey_100,
                "quantity": 1, "price": 800, "subscription_group_id": group_id, "interval_id": rule}],
            "shipping_address": {"street1": "1 Main St", "city": "Portland", "country_code": "US"},
            "payment_details": {"gateway_name": "test", "gateway_payment_id": "tok_success"}}}));
    let line = subscribed["subscription"]["line_items"][0]["id"]
        .as_i64()
        .unwrap();
    // Two senchas, chosen before the deadline.
    world.send(
        "POST",
        &format!("{boxes}/customers/{customer}/selections"),
        &json!({"selection": {
        "svc_platform_subscription_line_item_id": line, "box_size_id": size,
        "time_slot_id": slot, "order_datetime": "2030-01-10T09:00:00Z",
        "line_items": [{"box_product_id": sencha_box, "choice_quantity": 2}]}}),
    );

    // The order date comes.
    let world = world.restart(&[
        "--scheduler-interval-ms",
        "200",
        "--clock-start",
        "2030-01-10T08:59:58Z",
    ]);
    let order = wait_for_paid_order(&world, &customer);
    let lines = order["lines"].as_array().unwrap();
    assert_eq!(lines.len(), 1, "the selection only: {order}");
    assert_eq!(lines[0]["productVariant"]["id"], sencha_100.as_str());
    assert_eq!(lines[0]["quantity"], 2);
    assert_eq!(lines[0]["unitPrice"], 1100, "the catalogue's price");
}

fn a_shop_api_session_opens_the_customers_box_builder_routes(backend: Backend) {
    let world = World::new(backend);
    let vendure = world.vendure;
    let (owner, token) = seeded_customer_token(vendure);
    let other_email = format!("other-{}@example.com", world.shop);
    let other = vendure_customer(vendure, &other_email);
    let selections = |customer: &str, token: &str| {
        let path = format!(
            "/box_builder/v1/customer/shops/{}/customers/{customer}/selections?token={token}",
            world.shop
        );
        world.server.get(&path).call()
    };
    let mine = selections(&owner, &token);
    assert_eq!(mine.status, 200, "{}", mine.text);
    assert_eq!(mine.json()["pagination"]["total"], 0);
    // The same session names one customer only.
    selections(&other, &token).assert_error(401, "auth.unauthenticated");
    selections(&owner, "not-a-session").assert_error(401, "auth.unauthenticated");
}

fn a_headless_checkout_creates_the_signed_in_customers_vendure_order(backend: Backend) {
    let world = World::new(backend);
    let synced = synced_variants(&world, &[("house-blend", "HB-1000")]);
    let variant = synced[0].1.clone();
    let email = format!("checkout-{}@example.com", world.shop);
    let customer = vendure_customer(world.vendure, &email);
    world.wait_for(EntityKind::Customer, &customer, false);
    world.send(
        "POST",
        &format!("/checkout/shop/{}/integration/config", world.shop),
        &json!({"shared_secret": "checkout-integration-secret"}),
    );

    let data = world.send(
        "POST",
        &format!("/checkout/orders/{}/init", world.shop),
        &json!({
        "cart_items": [{"platform_id": variant, "quantity": 1, "line_item_key": "blend"}],
        "customer": {"first_name": "Lin", "last_name": "Subscriber", "email_address": email}}),
    )["data"]
        .clone();
    let address = json!({"first_name": "Lin", "last_name": "Subscriber",
        "address_line_1": "1 Main St", "address_line_2": "", "country": "United States",
        "city": "Portland", "province": "Oregon", "country_code": "US", "province_code": "OR",
        "postal_code": "97201", "business_name": "", "phone_number": ""});
    let run = mercer_tests::storefront::drive(
        &world.server.base_url,
        &world.shop,
        &data,
        json!([
            ["setShippingAddress", address],
            ["setBillingAddress", address],
            ["getShippingLines"],
            ["changeShippingLine", "0"],
            ["setTaxes"],
            ["addPayment", {"gateway_public_id": "test", "token": "tok_success"}],
            ["processOrder"]
        ]),
    );
    let processed = &run.step("processOrder").response["data"]["application_state"];
    assert_eq!(processed["is_processed"], true, "{:?}", run.steps);

    let order = wait_for_paid_order(&world, &customer);
    assert_eq!(
        order["lines"][0]["productVariant"]["id"],
        variant.as_str(),
        "{order}"
    );
    assert_eq!(order["lines"][0]["unitPrice"], 3900);
    assert_eq!(order["totalWithTax"], processed["order_total"], "{order}");
}

fn changes_made_while_the_connector_is_down_arrive_when_it_is_back(backend: Backend) {
    let mut world = World::new(backend);
    let vendure = world.vendure;
    let email = format!("while-down-{}@example.com", world.shop);
    let mut made = String::new();
    world.connector_down(|| {
        made = vendure_customer(vendure, &email);
        // The plugin's pushes fail meanwhile; it keeps them and tries again.
        std::thread::sleep(Duration::from_secs(2));
    });
    let saved = world.wait_for(EntityKind::Customer, &made, false);
    assert_eq!(saved["email"], email.as_str());
    // A change whose push never reaches Mercer still arrives, with a reconcile pass: here the
    // connector stays down, and a pass run for another address (which the plugin forwards to
    // as well, so it keeps that address's reconcile time) sends what changed since its last.
    if let Some(connector) = world.connector.take() {
        connector.crash();
    }
    let elsewhere = format!("http://127.0.0.1:{}", vendure::free_port());
    admin(
        vendure,
        "mutation($url: String!, $secret: String!) { setMercerConnector(url: $url, secret: $secret) }",
        json!({ "url": elsewhere, "secret": world.secret }),
    );
    let guard = mercer_outbound::PrivateAddressGuard::ALLOW_PRIVATE;
    let client = mercer_vendure::vendure::Vendure::new(&vendure.url, &vendure.api_key, guard);
    let relay =
        mercer_vendure::relay::Relay::new(&world.server.base_url, &world.token, &world.shop, guard);
    let pass = |expected: &str| {
        mercer_vendure::reconcile::run_pass(&client, &relay, &elsewhere)
            .unwrap_or_else(|error| panic!("{expected}: {error}"))
    };
    assert_eq!(pass("the first pass starts the clock"), 0);
    admin(
        vendure,
        "mutation($id: ID!) { updateCustomer(input: {id: $id, lastName: \"Reconciled\"}) { ... on Customer { id } } }",
        json!({ "id": made }),
    );
    assert!(pass("the second pass sends the change") >= 1);
    assert!(wait_until(Duration::from_secs(30), || {
        world.wait_for(EntityKind::Customer, &made, false)["last_name"] == "Reconciled"
    }));
    admin(
        vendure,
        "mutation($url: String!) { removeMercerConnector(url: $url) }",
        json!({ "url": elsewhere }),
    );
}

/// Vendure killed while a push waits for the connector, then started again: the change still
/// reaches Mercer (the plugin's job and the reconcile time are kept in Vendure's database).
fn a_change_survives_a_vendure_crash(backend: Backend) {
    let setup = vendure::VendureSetup::new(Database::Sqlite);
    // Leaked: the world keeps a reference for its whole life, and the process ends with the
    // test binary (it watches its parent).
    let vendure: &'static RunningVendure = Box::leak(Box::new(setup.start()));
    let mut world = World::on(backend, vendure, &[]);
    let email = format!("across-a-crash-{}@example.com", world.shop);
    let mut made = String::new();
    let mut restarted = None;
    world.connector_down(|| {
        made = vendure_customer(vendure, &email);
        // Its push fails meanwhile (no connector), and is kept to be tried again.
        std::thread::sleep(Duration::from_secs(2));
        vendure.kill();
        restarted = Some(setup.start());
    });
    let restarted = restarted.expect("Vendure started again");
    assert_eq!(
        restarted.url, vendure.url,
        "the same address after the restart"
    );
    let saved = world.wait_for(EntityKind::Customer, &made, false);
    assert_eq!(saved["email"], email.as_str());
}

backend_tests!(
    a_change_survives_a_vendure_crash,
    changes_made_while_the_connector_is_down_arrive_when_it_is_back,
    vendure_changes_reach_the_directory_and_the_catalogue,
    due_subscriptions_become_one_paid_vendure_order_each,
    a_box_subscriptions_vendure_order_holds_the_customers_selection,
    a_shop_api_session_opens_the_customers_box_builder_routes,
    a_headless_checkout_creates_the_signed_in_customers_vendure_order,
);
