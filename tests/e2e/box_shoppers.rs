//! The box builder for shoppers (issue 24; docs/box-builder.md), on SQLite and
//! PostgreSQL, against the real `mercer` binary and the platform simulator: the storefront with
//! no credentials (only visible slots, any origin, a public Cache-Control, 404 for no shop), and
//! the customer's own routes opened by the token the platform issued them, checked through the
//! connector's Validate Customer JWT: an active token (kept a minute), an inactive one (401), a
//! failing connector (502) and a slow one (504).

use std::time::Duration;

use mercer_platform_sim::{MercerLink, RunningSimulator};
use mercer_tests::{Answer, Backend, MercerServer, TestDatabase, backend_tests};
use serde_json::{Value, json};

use crate::box_builder::{Admin, box_product, set_up, subscribe};

/// The simulator's admin API: the answer's status and JSON body.
pub(crate) fn sim_admin(method: &str, url: &str, body: Option<Value>) -> (u16, Value) {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(30)))
        .build()
        .into();
    let answer = match (method, body) {
        ("DELETE", _) => agent.delete(url).call(),
        ("PUT", Some(body)) => agent.put(url).send_json(body),
        ("POST", Some(body)) => agent.post(url).send_json(body),
        ("POST", None) => agent.post(url).send_empty(),
        _ => agent.get(url).call(),
    };
    let mut answer = answer.unwrap_or_else(|error| panic!("{method} {url}: {error}"));
    let status = answer.status().as_u16();
    let text = answer.body_mut().read_to_string().unwrap_or_default();
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

/// The simulator serving the demo shop, pushing its events to Mercer, and registered as the
/// shop's destination of each topic (timeout 500 ms).
pub(crate) fn platform(admin: &Admin<'_>, topics: &[&str]) -> RunningSimulator {
    let server = admin.server;
    let rotated = server
        .post(&format!(
            "/integrations/v1/shops/{}/shared_secret/rotate",
            admin.shop
        ))
        .bearer(&admin.token)
        .call()
        .json();
    let secret = rotated["data"]["shared_secret"].as_str().unwrap();
    let sim = RunningSimulator::start().unwrap();
    let link = MercerLink {
        base_url: server.base_url.clone(),
        token: admin.token.clone(),
    };
    sim.simulator.add_shop(&admin.shop, secret, Some(link));
    for topic in topics {
        let destination = server
            .post(&format!(
                "/integrations/v1/shops/{}/platform_connector_destinations",
                admin.shop
            ))
            .bearer(&admin.token)
            .json(&json!({"data": {"destination": {"topic": topic,
                "destination": sim.base_url, "version": "v1", "timeout_ms": 500}}}));
        assert_eq!(destination.status, 200, "{}", destination.text);
    }
    sim
}

/// A customer made on the platform (which pushes Customer Saved to Mercer): their platform id
/// and email.
fn platform_customer(sim: &RunningSimulator, shop: &str, name: &str) -> (String, String) {
    let email = format!("{name}@example.test");
    let (status, made) = sim_admin(
        "POST",
        &format!("{}/admin/shops/{shop}/customers", sim.base_url),
        Some(json!({"email": email, "first_name": name})),
    );
    assert_eq!(status, 200, "{made}");
    assert_eq!(made["push"]["status"], 202, "{made}");
    let id = made["data"]["platform_id"].as_str().unwrap().to_string();
    (id, email)
}

fn issue_token(sim: &RunningSimulator, shop: &str, customer: &str) -> String {
    let (status, issued) = sim_admin(
        "POST",
        &format!(
            "{}/admin/shops/{shop}/customers/{customer}/token",
            sim.base_url
        ),
        None,
    );
    assert_eq!(status, 200, "{issued}");
    issued["token"].as_str().unwrap().to_string()
}

fn validations(sim: &RunningSimulator) -> usize {
    sim.simulator
        .lock()
        .requests
        .iter()
        .filter(|request| request.path.ends_with("/validate"))
        .count()
}

fn the_storefront_shows_the_public_catalogue_to_anyone(backend: Backend) {
    let server = MercerServer::start(backend);
    let (admin, group) = set_up(&server);
    let box_id = admin.ok(
        "POST",
        "/boxes",
        Some(
            &json!({"svc_subscription_group_id": group, "box_name": "Veg box",
            "attributes": [{"attribute_key": "diet", "attribute_value": "vegan"}]}),
        ),
        201,
    )["data"]["box"]["id"]
        .as_i64()
        .unwrap();
    let carrot = box_product(&admin, "carrot")["id"].clone();
    admin.ok(
        "POST",
        &format!("/boxes/{box_id}/box_sizes"),
        Some(&json!({"box_size_name": "Small", "min_quantity": 2, "max_quantity": 4})),
        200,
    );
    let slot = |name: &str, visible: &str, deadline: &str, start: &str, end: &str| {
        let body = json!({"time_slot_name": name, "visibility_date": visible,
            "selection_deadline_date": deadline, "start_date": start, "end_date": end});
        let id = admin.ok(
            "POST",
            &format!("/boxes/{box_id}/time_slots"),
            Some(&body),
            201,
        )["data"]["time-slot"]["id"]
            .clone();
        admin.ok(
            "POST",
            &format!("/time_slots/{id}/options"),
            Some(&json!({"box_product_id": carrot})),
            200,
        );
        id
    };
    let shown = slot(
        "Shown",
        "2020-01-01T00:00:00Z",
        "2030-01-04T00:00:00Z",
        "2030-01-07T00:00:00Z",
        "2030-01-13T23:59:59Z",
    );
    slot(
        "Not yet",
        "2029-06-01T00:00:00Z",
        "2029-12-01T00:00:00Z",
        "2030-02-01T00:00:00Z",
        "2030-02-07T23:59:59Z",
    );
    let base = format!("/box_builder/v1/storefront/shops/{}", admin.shop);
    let get = |rest: &str| -> Answer {
        server
            .get(&format!("{base}{rest}"))
            .header("Origin", "https://shop.example")
            .call()
    };
    let public = |answer: &Answer| {
        assert_eq!(answer.status, 200, "{}", answer.text);
        assert_eq!(answer.header("cache-control"), Some("public, max-age=60"));
        assert_eq!(
            answer.header("access-control-allow-origin"),
            Some("https://shop.example")
        );
        answer.json()
    };
    let boxes = public(&get("/boxes"));
    assert_eq!(boxes["data"]["boxes"][0]["id"], box_id);
    assert_eq!(
        boxes["data"]["boxes"][0]["attributes"][0]["attribute_value"],
        "vegan"
    );
    assert_eq!(boxes["pagination"]["total"], 1);
    assert_eq!(
        public(&get(&format!("/boxes/{box_id}")))["data"]["box"]["box_name"],
        "Veg box"
    );
    // Only the slot whose visibility date has passed.
    let slots = public(&get(&format!("/boxes/{box_id}/time_slots")));
    assert_eq!(slots["pagination"]["total"], 1);
    assert_eq!(slots["data"]["time_slots"][0]["id"], shown);
    assert_eq!(
        slots["data"]["time_slots"][0]["box_products"][0]["id"],
        carrot
    );
    let holding = public(&get(&format!(
        "/boxes/{box_id}/time_slots?order_datetime=2030-02-03T00:00:00Z"
    )));
    assert_eq!(
        holding["pagination"]["total"], 0,
        "hidden, though it holds that date"
    );
    let sizes = public(&get(&format!("/boxes/{box_id}/box_sizes")));
    assert_eq!(sizes["data"]["box_sizes"][0]["box_size_name"], "Small");
    // A browser's preflight is answered for any origin.
    let preflight = server
        .request("OPTIONS", &format!("{base}/boxes"))
        .header("Origin", "https://shop.example")
        .header("Access-Control-Request-Method", "GET")
        .call();
    assert_eq!(preflight.status, 204);
    // Nothing else: no shop, no box of it, another shop's nothing; no admin route opens.
    get("/boxes/999999").assert_error(404, "resource.not_found");
    server
        .get("/box_builder/v1/storefront/shops/0123456789abcdef0123456789abcdef/boxes")
        .call()
        .assert_error(404, "resource.not_found");
    let other = server
        .cli(&["shop", "create", "--domain", "other.shop.test"])
        .values()[0]
        .clone();
    let theirs = server
        .get(&format!("/box_builder/v1/storefront/shops/{other}/boxes"))
        .call();
    assert_eq!(theirs.json()["pagination"]["total"], 0);
    server
        .get(&format!(
            "/box_builder/v1/storefront/shops/{other}/boxes/{box_id}"
        ))
        .call()
        .assert_error(404, "resource.not_found");
    server
        .get(&format!("/box_builder/v1/shops/{}/boxes", admin.shop))
        .call()
        .assert_error(401, "auth.unauthenticated");
}

fn customers_choose_with_the_token_their_platform_issued(backend: Backend) {
    let server =
        MercerServer::start_with(TestDatabase::create(backend), &["--allow-private-targets"]);
    let (admin, group) = set_up(&server);
    let sim = platform(&admin, &["customers"]);
    let box_id = admin.ok(
        "POST",
        "/boxes",
        Some(&json!({"svc_subscription_group_id": group, "box_name": "Veg box"})),
        201,
    )["data"]["box"]["id"]
        .as_i64()
        .unwrap();
    let carrot = box_product(&admin, "carrot")["id"].clone();
    let size = admin.ok(
        "POST",
        &format!("/boxes/{box_id}/box_sizes"),
        Some(&json!({"box_size_name": "Small", "min_quantity": 1, "max_quantity": 4})),
        200,
    )["data"]["id"]
        .clone();
    let slot = admin.ok(
        "POST",
        &format!("/boxes/{box_id}/time_slots"),
        Some(
            &json!({"time_slot_name": "Week 1", "visibility_date": "2020-01-01T00:00:00Z",
            "selection_deadline_date": "2030-01-04T00:00:00Z",
            "start_date": "2030-01-07T00:00:00Z", "end_date": "2030-01-13T23:59:59Z"}),
        ),
        201,
    )["data"]["time-slot"]["id"]
        .clone();
    admin.ok(
        "POST",
        &format!("/time_slots/{slot}/options"),
        Some(&json!({"box_product_id": carrot})),
        200,
    );
    let (ada, ada_email) = platform_customer(&sim, &admin.shop, "ada");
    let (ada_item, _) = subscribe(&admin, &ada, &ada_email, group);
    let (bob, bob_email) = platform_customer(&sim, &admin.shop, "bob");
    let (bob_item, _) = subscribe(&admin, &bob, &bob_email, group);
    let choice = |item: i64, at: &str| {
        json!({"selection": {"svc_platform_subscription_line_item_id": item,
            "box_size_id": size, "time_slot_id": slot, "order_datetime": at,
            "line_items": [{"box_product_id": carrot, "choice_quantity": 2}]}})
    };
    // Bob's selection, made by the merchant's app.
    let bobs = admin.ok(
        "POST",
        &format!("/customers/{bob}/selections"),
        Some(&choice(bob_item, "2030-01-10T09:00:00Z")),
        200,
    )["data"]["selection"]["id"]
        .clone();

    let mine = |customer: &str, rest: &str, token: Option<&str>| {
        let query = token.map(|t| format!("?token={t}")).unwrap_or_default();
        format!(
            "/box_builder/v1/customer/shops/{}/customers/{customer}/selections{rest}{query}",
            admin.shop
        )
    };
    server
        .get(&mine(&ada, "", None))
        .call()
        .assert_error(401, "auth.unauthenticated");
    let token = issue_token(&sim, &admin.shop, &ada);
    let made = server
        .post(&mine(&ada, "", Some(&token)))
        .header("Origin", "https://shop.example")
        .json(&choice(ada_item, "2030-01-10T09:00:00Z"));
    assert_eq!(made.status, 200, "{}", made.text);
    assert_eq!(
        made.header("access-control-allow-origin"),
        Some("https://shop.example")
    );
    let selection = made.json()["data"]["selection"].clone();
    let id = selection["id"].as_i64().unwrap();
    let listed = server.get(&mine(&ada, "", Some(&token))).call().json();
    assert_eq!(listed["pagination"]["total"], 1, "Ada's only");
    assert_eq!(listed["data"]["selections"][0]["id"], id);
    let read = server
        .get(&mine(&ada, &format!("/{id}"), Some(&token)))
        .call();
    assert_eq!(read.json()["data"]["selection"], selection);
    let changed = server
        .request("PATCH", &mine(&ada, &format!("/{id}"), Some(&token)))
        .json(&json!({"line_items": [{"box_product_id": carrot, "choice_quantity": 3}]}));
    assert_eq!(changed.status, 200, "{}", changed.text);
    assert_eq!(
        changed.json()["data"]["selection"]["line_items"][0]["choice_quantity"],
        3
    );
    // Her token opens none of Bob's, and Bob's selection is not hers to see.
    server
        .get(&mine(&ada, &format!("/{bobs}"), Some(&token)))
        .call()
        .assert_error(404, "resource.not_found");
    server
        .get(&mine(&bob, "", Some(&token)))
        .call()
        .assert_error(401, "auth.unauthenticated");
    let refused = server
        .post(&mine(&ada, "", Some(&token)))
        .json(&choice(bob_item, "2030-01-11T09:00:00Z"));
    assert_eq!(
        crate::box_builder::problems(&refused),
        [(
            "selection.svc_platform_subscription_line_item_id".to_string(),
            "not_the_customers".to_string()
        )]
    );
    // Once her slot's deadline has passed, her selection stays in it: moving it to a slot still
    // open is 422 on the slot, and it is unchanged.
    let later = admin.ok(
        "POST",
        &format!("/boxes/{box_id}/time_slots"),
        Some(
            &json!({"time_slot_name": "Week 1, late", "visibility_date": "2020-01-01T00:00:00Z",
            "selection_deadline_date": "2030-01-05T00:00:00Z",
            "start_date": "2030-01-07T00:00:00Z", "end_date": "2030-01-13T23:59:59Z"}),
        ),
        201,
    )["data"]["time-slot"]["id"]
        .clone();
    admin.ok(
        "POST",
        &format!("/time_slots/{later}/options"),
        Some(&json!({"box_product_id": carrot})),
        200,
    );
    admin.ok(
        "PATCH",
        &format!("/time_slots/{slot}"),
        Some(&json!({"time_slot": {"selection_deadline_date": "2020-01-05T00:00:00Z"}})),
        200,
    );
    let moved = server
        .request("PATCH", &mine(&ada, &format!("/{id}"), Some(&token)))
        .json(&json!({"selection": {"time_slot_id": later}}));
    assert_eq!(
        crate::box_builder::problems(&moved),
        [(
            "selection.time_slot_id".to_string(),
            "past_deadline".to_string()
        )]
    );
    let kept = server
        .get(&mine(&ada, &format!("/{id}"), Some(&token)))
        .call()
        .json();
    assert_eq!(kept["data"]["selection"]["time_slot_id"], slot);
    // The connector was asked once for Ada's token (then it was kept), once for Bob's path.
    assert_eq!(validations(&sim), 2);

    // A token revoked before its first use is inactive: 401, asked each time.
    let revoked = issue_token(&sim, &admin.shop, &ada);
    let (status, _) = sim_admin(
        "DELETE",
        &format!(
            "{}/admin/shops/{}/customers/{ada}/token",
            sim.base_url, admin.shop
        ),
        None,
    );
    assert_eq!(status, 200);
    for _ in 0..2 {
        server
            .get(&mine(&ada, "", Some(&revoked)))
            .call()
            .assert_error(401, "auth.unauthenticated");
    }
    assert_eq!(validations(&sim), 4);
    // The token checked before stays open for its minute, even revoked since.
    assert_eq!(server.get(&mine(&ada, "", Some(&token))).call().status, 200);

    // A failing connector is 502, a slow one 504; neither is kept.
    let fresh = issue_token(&sim, &admin.shop, &bob);
    let faults = format!("{}/admin/faults", sim.base_url);
    sim_admin("PUT", &faults, Some(json!({"status": 500})));
    server
        .get(&mine(&bob, "", Some(&fresh)))
        .call()
        .assert_error(502, "connector.failed");
    sim_admin("PUT", &faults, Some(json!({"delay_ms": 2000})));
    server
        .get(&mine(&bob, "", Some(&fresh)))
        .call()
        .assert_error(504, "connector.timeout");
    sim_admin("DELETE", &faults, None);
    let bob_sees = server.get(&mine(&bob, "", Some(&fresh))).call();
    assert_eq!(bob_sees.status, 200, "{}", bob_sees.text);
    assert_eq!(bob_sees.json()["data"]["selections"][0]["id"], bobs);
}

backend_tests!(
    the_storefront_shows_the_public_catalogue_to_anyone,
    customers_choose_with_the_token_their_platform_issued,
);
