//! Box orders end to end (issue 24 part 7; docs/box-builder.md "Box orders"), on SQLite and
//! PostgreSQL: the real `mercer` binary, its clock started before a slot's deadline, takes a
//! customer's selection; restarted with its clock at the order date, its scheduler places the
//! orders through the platform simulator, the selecting customer's with exactly the chosen
//! products, another customer's with the merchant's pick, both less the group's discount.

use mercer_platform_sim::RunningSimulator;
use std::time::Duration;

use mercer_tests::{Backend, TestDatabase, backend_tests, wait_until};
use serde_json::{Value, json};

use crate::box_builder::{Admin, box_product, customer_saved, set_up, subscribe};
use crate::scheduler::{connect_orders, orders, start};
use crate::subscriptions::Api;

/// The order date of both subscriptions (`box_builder::subscribe`).
const ORDER_DATE: &str = "2030-01-10T09:00:00Z";

/// A veg box of the group: a size of 2 to 4, a slot holding the order date (choices until
/// 4 January) offering carrot then kale. The box products' ids.
fn veg_box(admin: &Admin<'_>, group: i64) -> (i64, i64, i64, i64) {
    let make = |rest: &str, body: Value, status| admin.ok("POST", rest, Some(&body), status);
    let box_id = make(
        "/boxes",
        json!({"svc_subscription_group_id": group, "box_name": "Veg box"}),
        201,
    )["data"]["box"]["id"]
        .as_i64()
        .unwrap();
    let carrot = box_product(admin, "carrot")["id"].as_i64().unwrap();
    let kale = box_product(admin, "kale")["id"].as_i64().unwrap();
    let size = make(
        &format!("/boxes/{box_id}/box_sizes"),
        json!({"box_size_name": "Small", "min_quantity": 2, "max_quantity": 4}),
        200,
    )["data"]["id"]
        .as_i64()
        .unwrap();
    let slot = make(
        &format!("/boxes/{box_id}/time_slots"),
        json!({"time_slot_name": "Week 2", "visibility_date": "2030-01-01T00:00:00Z",
            "selection_deadline_date": "2030-01-04T00:00:00Z",
            "start_date": "2030-01-07T00:00:00Z", "end_date": "2030-01-13T23:59:59Z"}),
        201,
    )["data"]["time-slot"]["id"]
        .as_i64()
        .unwrap();
    for product in [carrot, kale] {
        make(
            &format!("/time_slots/{slot}/options"),
            json!({"box_product_id": product}),
            200,
        );
    }
    (carrot, kale, size, slot)
}

/// The order's lines: variant, quantity, price per item.
fn lines(order: &mercer_domain::platform::resources::Order) -> Vec<(String, i64, String)> {
    order
        .line_items
        .iter()
        .flatten()
        .map(|line| {
            (
                line.platform_variant_id
                    .as_ref()
                    .map(|id| id.as_str().to_string())
                    .unwrap_or_default(),
                line.quantity.unwrap_or_default(),
                line.price_per_item
                    .as_ref()
                    .map(|price| price.as_str().to_string())
                    .unwrap_or_default(),
            )
        })
        .collect()
}

fn box_orders_hold_the_selection_or_the_merchants_pick(backend: Backend) {
    let sim = RunningSimulator::start().unwrap();
    let server = start(
        TestDatabase::create(backend),
        &["--clock-start", "2030-01-03T00:00:00Z"],
    );
    let (admin, group) = set_up(&server);
    connect_orders(&server, &admin.shop, &admin.token, &sim);
    let (carrot, kale, size, slot) = veg_box(&admin, group);
    // The group's discount, which its subscriptions take and their orders apply.
    let discounted = server
        .request(
            "PATCH",
            &format!(
                "/subscriptions/v1/shops/{}/subscription_groups/{group}",
                admin.shop
            ),
        )
        .bearer(&admin.token)
        .json(&json!({"subscription_group": {"percent_discount": 10}}));
    assert_eq!(discounted.status, 200, "{}", discounted.text);
    let ada_email = customer_saved(&admin, "cust-ada");
    let (ada_box, _) = subscribe(&admin, "cust-ada", &ada_email, group);
    let bob_email = customer_saved(&admin, "cust-bob");
    subscribe(&admin, "cust-bob", &bob_email, group);
    // Ada chooses three kales, before the deadline; Bob chooses nothing.
    admin.ok(
        "POST",
        "/customers/cust-ada/selections",
        Some(
            &json!({"selection": {"svc_platform_subscription_line_item_id": ada_box,
            "box_size_id": size, "time_slot_id": slot, "order_datetime": ORDER_DATE,
            "line_items": [{"box_product_id": kale, "choice_quantity": 3}]}}),
        ),
        200,
    );
    let (shop, token) = (admin.shop.clone(), admin.token.clone());
    drop(admin);

    // The order date comes.
    let server = start(
        server.into_database(),
        &["--clock-start", "2030-01-10T08:59:58Z"],
    );
    let api = Api {
        server: &server,
        shop: shop.clone(),
        token,
    };
    // Both orders placed: each subscription has gone on to its next date.
    let processed = || {
        let listed = api.get("/subscriptions").json();
        listed["subscriptions"]
            .as_array()
            .is_some_and(|all| all.len() == 2 && all.iter().all(|s| s["orders_processed"] == 1))
    };
    assert!(
        wait_until(Duration::from_secs(30), processed),
        "{}",
        api.server.log()
    );
    let placed = orders(&sim, &shop);
    let of = |customer: &str| {
        placed
            .iter()
            .find(|order| {
                order.platform_customer_id.as_ref().map(|id| id.as_str()) == Some(customer)
            })
            .unwrap_or_else(|| panic!("an order of {customer}: {placed:?}"))
    };
    let (ada, bob) = (of("cust-ada"), of("cust-bob"));
    // Ada's box holds exactly her selection, at the catalogue's price; the mug as subscribed.
    assert_eq!(
        lines(ada),
        [
            ("kale".to_string(), 3, "3.00".to_string()),
            ("mug".to_string(), 1, "9.00".to_string()),
        ]
    );
    // Less the subscription's 10 %.
    let amounts = |order: &mercer_domain::platform::resources::Order| {
        [&order.subtotal, &order.discount, &order.total]
            .map(|amount| amount.as_ref().unwrap().as_str().to_string())
    };
    assert_eq!(amounts(ada), ["18.00", "1.80", "16.20"]);
    let kale_line = &ada.line_items.as_ref().unwrap()[0];
    let attributes = kale_line.custom_attributes.as_ref().unwrap();
    assert_eq!(attributes["box_product_id"].value, kale.to_string());
    assert_eq!(
        attributes["gift_note"].value, "For Ada",
        "the line item's own"
    );
    assert!(
        ada.notes
            .as_deref()
            .unwrap()
            .contains("the customer's selection for Week 2"),
        "{:?}",
        ada.notes
    );
    // Bob's holds the merchant's pick: the slot's options in order, up to the size's minimum.
    assert_eq!(
        lines(bob),
        [
            ("carrot".to_string(), 1, "2.00".to_string()),
            ("kale".to_string(), 1, "3.00".to_string()),
            ("mug".to_string(), 1, "9.00".to_string()),
        ]
    );
    assert!(
        bob.notes
            .as_deref()
            .unwrap()
            .contains("the merchant's pick from Week 2"),
        "{:?}",
        bob.notes
    );
    assert_eq!(amounts(bob), ["14.00", "1.40", "12.60"]);
    let carrot_line = &bob.line_items.as_ref().unwrap()[0];
    let attributes = carrot_line.custom_attributes.as_ref().unwrap();
    assert_eq!(attributes["box_product_id"].value, carrot.to_string());
}

backend_tests!(box_orders_hold_the_selection_or_the_merchants_pick);
