//! The connector client (`mercer-connector`) against the platform simulator: every operation,
//! paging, and each way a connector can fail.

#![allow(clippy::unwrap_used)] // test code: a panic is a failed assertion

use std::time::{Duration, Instant};

use mercer_connector::types::{Customer, CustomerAddress, Order, Payment};
use mercer_connector::{ConnectorError, ConnectorTarget, HttpConnector, PlatformConnector};
use mercer_domain::access::credentials::Secret;
use mercer_outbound::PrivateAddressGuard;
use mercer_platform_sim::{Faults, RunningSimulator};
use serde_json::json;

const SHOP: &str = "0123456789abcdef0123456789abcdef";
const SECRET: &str = "the-connector-secret";

fn setup() -> (RunningSimulator, ConnectorTarget) {
    let sim = RunningSimulator::start().unwrap();
    sim.simulator.add_shop(SHOP, SECRET, None);
    let target = ConnectorTarget {
        base_url: sim.base_url.clone(),
        version: "v1".into(),
        shop_identifier: SHOP.into(),
        timeout: Duration::from_millis(1500),
        secret: Secret::new(SECRET),
        compatible_secret: Secret::new(SECRET),
    };
    (sim, target)
}

fn customer(value: serde_json::Value) -> Customer {
    serde_json::from_value(value).unwrap()
}

fn fault(sim: &RunningSimulator, faults: Faults) {
    sim.simulator.lock().faults = faults;
}

#[test]
fn verification_succeeds_with_the_shared_secret() {
    let (_sim, target) = setup();
    HttpConnector::new(PrivateAddressGuard::ALLOW_PRIVATE)
        .verify(&target)
        .unwrap();
}

#[test]
fn verification_takes_only_the_current_secret() {
    let (sim, mut target) = setup();
    target.secret = Secret::new("the-new-secret");
    target.compatible_secret = Secret::new(SECRET);
    // The connector still on the previous secret answers with its HMAC: refused.
    assert!(matches!(
        HttpConnector::new(PrivateAddressGuard::ALLOW_PRIVATE).verify(&target),
        Err(ConnectorError::BadSignature)
    ));
    sim.simulator.add_shop(SHOP, "the-new-secret", None);
    HttpConnector::new(PrivateAddressGuard::ALLOW_PRIVATE)
        .verify(&target)
        .unwrap();
}

#[test]
fn each_failure_of_a_connector_is_told_apart() {
    let (sim, target) = setup();
    let client = HttpConnector::new(PrivateAddressGuard::ALLOW_PRIVATE);
    fault(
        &sim,
        Faults {
            wrong_hmac: true,
            ..Faults::default()
        },
    );
    assert_eq!(client.verify(&target), Err(ConnectorError::BadSignature));
    fault(
        &sim,
        Faults {
            status: Some(500),
            ..Faults::default()
        },
    );
    assert_eq!(
        client.verify(&target),
        Err(ConnectorError::Failed { status: 500 })
    );
    fault(
        &sim,
        Faults {
            delay_ms: Some(3000),
            times: Some(1),
            ..Faults::default()
        },
    );
    let started = Instant::now();
    assert!(matches!(
        client.verify(&target),
        Err(ConnectorError::Timeout(_))
    ));
    assert!(
        started.elapsed() < Duration::from_millis(2900),
        "the destination's timeout applies"
    );
    fault(
        &sim,
        Faults {
            malformed_json: true,
            ..Faults::default()
        },
    );
    assert!(matches!(
        client.list_customers(&target, None, None, None),
        Err(ConnectorError::Malformed(_))
    ));
    fault(&sim, Faults::default());

    let mut wrong_secret = target.clone();
    wrong_secret.secret = Secret::new("not-it");
    wrong_secret.compatible_secret = Secret::new("not-it-either");
    assert_eq!(
        client.verify(&wrong_secret),
        Err(ConnectorError::Failed { status: 401 }),
        "the simulator refuses bad HMACs"
    );

    let mut gone = target.clone();
    gone.base_url = "http://127.0.0.1:9".into();
    assert!(matches!(
        client.verify(&gone),
        Err(ConnectorError::Unreachable(_))
    ));
}

#[test]
fn customers_and_addresses_round_trip() {
    let (sim, target) = setup();
    let client = HttpConnector::new(PrivateAddressGuard::ALLOW_PRIVATE);
    let created = client
        .create_customer(&target, &customer(json!({"email": "ada@example.test", "first_name": "Ada", "addresses": [{"city": "Lyon"}]})))
        .unwrap();
    let id = created.platform_id.clone().unwrap();
    assert!(created.platform_created_at.is_some() && created.platform_updated_at.is_some());
    let address_id = created.addresses.as_ref().unwrap()[0]
        .platform_id
        .clone()
        .unwrap();

    let updated = client
        .update_customer(
            &target,
            id.as_str(),
            &customer(json!({"last_name": "Lovelace"})),
        )
        .unwrap();
    assert_eq!(
        (updated.first_name.as_deref(), updated.last_name.as_deref()),
        (Some("Ada"), Some("Lovelace")),
        "omitted fields stay"
    );

    let page = client
        .list_customers(&target, Some(10), None, Some("ada@example.test"))
        .unwrap();
    assert_eq!(page.items.len(), 1);
    assert_eq!(
        client
            .list_customers(&target, Some(10), None, Some("nobody@example.test"))
            .unwrap()
            .items
            .len(),
        0
    );

    let new_address: CustomerAddress =
        serde_json::from_value(json!({"city": "Paris", "country_code": "FR"})).unwrap();
    let added = client
        .create_address(&target, id.as_str(), &new_address)
        .unwrap();
    assert_eq!(added.platform_customer_id.as_ref(), Some(&id));
    let patch: CustomerAddress = serde_json::from_value(json!({"city": "Marseille"})).unwrap();
    let moved = client
        .update_address(&target, id.as_str(), address_id.as_str(), &patch)
        .unwrap();
    assert_eq!(moved.city.as_deref(), Some("Marseille"));
    client
        .delete_address(
            &target,
            id.as_str(),
            added.platform_id.as_ref().unwrap().as_str(),
        )
        .unwrap();
    assert_eq!(
        client.delete_address(&target, id.as_str(), "adr_missing"),
        Err(ConnectorError::NotFound)
    );

    let token = sim
        .simulator
        .lock()
        .issue_customer_token(SHOP, id.as_str())
        .unwrap();
    assert!(
        client
            .validate_customer_jwt(&target, id.as_str(), &token)
            .unwrap()
    );
    assert!(
        !client
            .validate_customer_jwt(&target, id.as_str(), "forged")
            .unwrap()
    );

    client.delete_customer(&target, id.as_str()).unwrap();
    assert_eq!(
        client.delete_customer(&target, id.as_str()),
        Err(ConnectorError::NotFound)
    );
    assert_eq!(
        client
            .update_customer(&target, id.as_str(), &Customer::default())
            .map(drop),
        Err(ConnectorError::NotFound)
    );
}

#[test]
fn orders_and_payments_round_trip_and_create_order_is_idempotent() {
    let (sim, target) = setup();
    let client = HttpConnector::new(PrivateAddressGuard::ALLOW_PRIVATE);
    let order: Order = serde_json::from_value(json!({"order_number": "1001", "total": "24.00", "line_items": [{"sku": "TEA", "quantity": 2}]})).unwrap();
    let first = client
        .create_order(&target, &order, Some("sub-1-2024-03-01"))
        .unwrap();
    let again = client
        .create_order(&target, &order, Some("sub-1-2024-03-01"))
        .unwrap();
    assert_eq!(first.platform_id, again.platform_id);
    let id = first.platform_id.clone().unwrap();
    let requests = sim.simulator.lock().requests.clone();
    assert!(
        requests
            .iter()
            .any(|r| r.idempotency_key.as_deref() == Some("sub-1-2024-03-01"))
    );

    assert_eq!(
        client
            .get_order(&target, id.as_str())
            .unwrap()
            .order_number
            .as_deref(),
        Some("1001")
    );
    let patch: Order = serde_json::from_value(json!({"fulfillment_status": "fulfilled"})).unwrap();
    let updated = client.update_order(&target, id.as_str(), &patch).unwrap();
    assert_eq!(
        (
            updated.fulfillment_status.as_deref(),
            updated.total.as_ref().map(|t| t.as_str())
        ),
        (Some("fulfilled"), Some("24.00"))
    );
    let payment: Payment = serde_json::from_value(json!({"amount_planned": "24.00", "provider": "test", "transactions": [{"amount": "24.00", "type": "sale", "status": "success"}]})).unwrap();
    let paid = client
        .create_payment(&target, id.as_str(), &payment)
        .unwrap();
    assert!(paid.platform_id.is_some());
    assert_eq!(
        client.get_order(&target, "ord_missing").map(drop),
        Err(ConnectorError::NotFound)
    );
    assert_eq!(
        client
            .create_payment(&target, "ord_missing", &payment)
            .map(drop),
        Err(ConnectorError::NotFound)
    );
    assert_eq!(
        client.list_orders(&target, None, None).unwrap().items.len(),
        1
    );
}

#[test]
fn the_page_iterator_walks_every_page_in_order() {
    let (sim, target) = setup();
    {
        let mut state = sim.simulator.lock();
        for n in 0..7 {
            state
                .create_customer(
                    SHOP,
                    customer(json!({"email": format!("{n}@example.test")})),
                )
                .unwrap();
        }
    }
    let client = HttpConnector::new(PrivateAddressGuard::ALLOW_PRIVATE);
    let pages: Vec<Vec<Customer>> = client
        .customer_pages(&target, Some(3), None)
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(pages.iter().map(Vec::len).collect::<Vec<_>>(), [3, 3, 1]);
    let ids: Vec<String> = pages
        .iter()
        .flatten()
        .map(|c| c.platform_id.clone().unwrap().as_str().to_string())
        .collect();
    let mut sorted = ids.clone();
    sorted.sort();
    assert_eq!(ids, sorted, "ascending by platform_id");
    // An invalid limit falls back to 250: one page.
    assert_eq!(client.customer_pages(&target, Some(0), None).count(), 1);
}

#[test]
fn products_and_categories_are_listed_a_page_at_a_time() {
    let (sim, target) = setup();
    // The admin API's seed: 12 products of two variants, in categories of ten.
    let seeded = ureq::post(&format!("{}/admin/shops/{SHOP}/seed", sim.base_url))
        .send_json(json!({"products": 12}))
        .unwrap();
    assert_eq!(seeded.status().as_u16(), 200);
    let client = HttpConnector::new(PrivateAddressGuard::ALLOW_PRIVATE);
    let categories = client.list_categories(&target, Some(250), None).unwrap();
    assert_eq!(categories.items.len(), 2);
    assert_eq!(categories.pagination.next_cursor(), None);
    let first = client.list_products(&target, Some(5), None).unwrap();
    assert_eq!(first.items.len(), 5);
    let cursor = first.pagination.next_cursor().unwrap().to_string();
    let second = client
        .list_products(&target, Some(250), Some(&cursor))
        .unwrap();
    assert_eq!(second.items.len(), 7);
    assert_eq!(second.pagination.next_cursor(), None);
    let product = &first.items[0];
    assert_eq!(product.variants.as_ref().unwrap().len(), 2);
    assert!(product.platform_updated_at.is_some());
    assert_eq!(
        product.categories.as_ref().unwrap()[0].platform_id,
        categories.items[0].platform_id
    );
}
