//! The catalogue boxes are built from (issue 24 part 6), on SQLite and PostgreSQL, against the
//! real `mercer` binary and the platform simulator: a product sync (categories, then products)
//! fills it, 409 while one runs, and box products are then made of its variants; a product
//! created on the platform reaches it as a Product Saved event.

use std::time::Duration;

use mercer_tests::{Backend, MercerServer, TestDatabase, backend_tests, wait_until};
use serde_json::{Value, json};

use crate::box_builder::set_up;
use crate::box_shoppers::{platform, sim_admin};

fn a_product_sync_fills_the_catalogue_box_products_are_made_from(backend: Backend) {
    let server =
        MercerServer::start_with(TestDatabase::create(backend), &["--allow-private-targets"]);
    let (admin, _) = set_up(&server);
    let sim = platform(&admin, &["products"]);
    let (status, seeded) = sim_admin(
        "POST",
        &format!("{}/admin/shops/{}/seed", sim.base_url, admin.shop),
        Some(json!({"products": 12})),
    );
    assert_eq!(status, 200, "{seeded}");
    // Nothing was pushed: the catalogue does not have them yet.
    let (product, variant) = {
        let state = sim.simulator.lock();
        let seeded = state.shops[&admin.shop].products.values().next().cloned();
        let seeded = seeded.expect("a seeded product");
        let variant = seeded.variants.as_ref().unwrap()[1].platform_id.clone();
        (
            seeded.platform_id.unwrap().as_str().to_string(),
            variant.unwrap().as_str().to_string(),
        )
    };
    let body =
        json!({"box_product": {"platform_product_id": product, "platform_variant_id": variant}});
    let refused = admin.send("POST", "/box_products", Some(&body));
    refused.assert_error(422, "validation.failed");

    // The sync, slowed so that a second one finds it running.
    let faults = format!("{}/admin/faults", sim.base_url);
    sim_admin("PUT", &faults, Some(json!({"delay_ms": 300})));
    let sync = format!("/products/v2/shops/{}/sync", admin.shop);
    let started = server.post(&sync).bearer(&admin.token).call();
    assert_eq!(started.status, 202, "{}", started.text);
    let run = started.json()["data"]["sync"].clone();
    assert_eq!(
        (&run["topic"], &run["status"]),
        (&json!("products"), &json!("running"))
    );
    server
        .post(&sync)
        .bearer(&admin.token)
        .call()
        .assert_error(409, "sync.running");
    let progress = format!("{sync}/{}", run["id"]);
    let mut ended = Value::Null;
    assert!(wait_until(Duration::from_secs(20), || {
        ended = server.get(&progress).bearer(&admin.token).call().json()["data"]["sync"].clone();
        ended["status"] != "running"
    }));
    sim_admin("DELETE", &faults, None);
    assert_eq!(ended["status"], "succeeded", "{ended}");
    // Two categories (one page), then twelve products (one page).
    assert_eq!((&ended["pages"], &ended["items"]), (&json!(2), &json!(14)));
    let listed: Vec<String> = sim
        .simulator
        .lock()
        .requests
        .iter()
        .filter(|r| {
            r.method == "GET" && (r.path.contains("/products") || r.path.contains("/categories"))
        })
        .map(|r| r.path.rsplit('/').next().unwrap_or_default().to_string())
        .collect();
    assert_eq!(listed, ["categories", "products"], "categories first");

    // The synced events are applied a moment after the run ends.
    let mut made = None;
    assert!(wait_until(Duration::from_secs(10), || {
        let answer = admin.send("POST", "/box_products", Some(&body));
        let done = answer.status == 201;
        made = Some(answer);
        done
    }));
    let made = made.unwrap().json()["data"]["box_product"].clone();
    assert_eq!(made["platform_variant_id"], variant.as_str());

    // A product created on the platform is pushed as Product Saved.
    let (status, created) = sim_admin(
        "POST",
        &format!("{}/admin/shops/{}/products", sim.base_url, admin.shop),
        Some(json!({"platform_id": "prd-kale", "name": "Kale",
            "variants": [{"platform_id": "kale-bunch", "price": "3.20"}]})),
    );
    assert_eq!(status, 200, "{created}");
    assert_eq!(created["push"]["status"], 202, "{created}");
    let kale = json!({"platform_product_id": "prd-kale", "platform_variant_id": "kale-bunch"});
    assert!(wait_until(Duration::from_secs(10), || {
        admin.send("POST", "/box_products", Some(&kale)).status == 201
    }));
}

backend_tests!(a_product_sync_fills_the_catalogue_box_products_are_made_from);
