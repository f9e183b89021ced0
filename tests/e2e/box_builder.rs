//! The box builder's admin routes (issue 24 part 2; docs/box-builder.md) over HTTP,
//! on SQLite and PostgreSQL: boxes sold under a subscription group, box products of the
//! catalogue (Product Saved events), box sizes with their bulk update all or nothing, time
//! slots with their dates in order and the `order_datetime` filter, and their options;
//! customers' selections by the box rules (each refusal on its field), and the box line items.
//! The scopes of every route are `route_scopes.rs`'s.

use std::time::Duration;

use mercer_tests::{Answer, Backend, MercerServer, backend_tests, wait_until};
use serde_json::{Value, json};

pub(crate) struct Admin<'a> {
    pub(crate) server: &'a MercerServer,
    pub(crate) shop: String,
    pub(crate) token: String,
}

impl Admin<'_> {
    pub(crate) fn send(&self, method: &str, rest: &str, body: Option<&Value>) -> Answer {
        let call = self
            .server
            .request(
                method,
                &format!("/box_builder/v1/shops/{}{rest}", self.shop),
            )
            .bearer(&self.token);
        match body {
            Some(body) => call.json(body),
            None => call.call(),
        }
    }

    pub(crate) fn ok(&self, method: &str, rest: &str, body: Option<&Value>, status: u16) -> Value {
        let answer = self.send(method, rest, body);
        assert_eq!(answer.status, status, "{method} {rest}: {}", answer.text);
        if status == 204 {
            Value::Null
        } else {
            answer.json()
        }
    }
}

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

/// The demo shop with a subscription group (its id) and, through a Product Saved event, a
/// product `veg` with the variants `carrot` and `kale`.
pub(crate) fn set_up(server: &MercerServer) -> (Admin<'_>, i64) {
    let demo = server.demo().clone();
    let group = server
        .post(&format!(
            "/subscriptions/v1/shops/{}/subscription_groups",
            demo.shop
        ))
        .bearer(&demo.token)
        .json(&json!({"subscription_group": {"name": "Veg club",
            "billing_rules": [{"interval_number": 1, "interval_type": "week"}]}}));
    assert_eq!(group.status, 201, "{}", group.text);
    let saved = server
        .post(&format!(
            "/products/v1/shops/{}/platforms/custom/webhooks/products/saved",
            demo.shop
        ))
        .bearer(&demo.token)
        .json(&json!({"data": {"product": {"platform_id": "veg",
            "platform_updated_at": "2026-11-01T00:00:00Z",
            "variants": [{"platform_id": "carrot", "price": "2.00"},
                         {"platform_id": "kale", "price": "3.00"}]}}}));
    assert_eq!(saved.status, 202, "{}", saved.text);
    let admin = Admin {
        server,
        shop: demo.shop,
        token: demo.token,
    };
    (
        admin,
        group.json()["subscription_group"]["id"].as_i64().unwrap(),
    )
}

pub(crate) fn box_product(admin: &Admin<'_>, variant: &str) -> Value {
    let body =
        json!({"box_product": {"platform_product_id": "veg", "platform_variant_id": variant}});
    // The event is applied a moment after its 202.
    let mut made = None;
    assert!(wait_until(Duration::from_secs(10), || {
        let answer = admin.send("POST", "/box_products", Some(&body));
        let done = answer.status == 201;
        made = Some(answer);
        done
    }));
    made.unwrap().json()["data"]["box_product"].clone()
}

fn boxes_and_their_products_sizes_slots_and_options(backend: Backend) {
    let server = MercerServer::in_process(backend);
    let (admin, group) = set_up(&server);

    // Boxes: one a group.
    let made = admin.ok(
        "POST",
        "/boxes",
        Some(
            &json!({"box": {"svc_subscription_group_id": group, "box_name": "Veg box",
            "attributes": [{"attribute_key": "color", "attribute_value": "green"}]}}),
        ),
        201,
    )["data"]["box"]
        .clone();
    let box_id = made["id"].as_i64().unwrap();
    assert_eq!(made["shop_identifier"], admin.shop.as_str());
    assert_eq!(made["svc_subscription_group_id"], group);
    assert_eq!(made["attributes"][0]["attribute_key"], "color");
    admin
        .send(
            "POST",
            "/boxes",
            Some(&json!({"svc_subscription_group_id": group, "box_name": "Again"})),
        )
        .assert_error(409, "box.group_taken");
    assert_eq!(
        problems(&admin.send(
            "POST",
            "/boxes",
            Some(&json!({"svc_subscription_group_id": 999999, "box_name": "x"}))
        )),
        [(
            "box.svc_subscription_group_id".to_string(),
            "unknown_group".to_string()
        )]
    );
    let listed = admin.ok("GET", "/boxes", None, 200);
    assert_eq!(listed["data"]["boxes"][0]["id"], box_id);
    assert_eq!(
        listed["pagination"],
        json!({"count": 1, "current_page": 1, "per_page": 50, "total": 1, "total_pages": 1})
    );
    let renamed = admin.ok(
        "PATCH",
        &format!("/boxes/{box_id}"),
        Some(&json!({"box": {"box_name": "Big veg box"}})),
        200,
    );
    assert_eq!(renamed["data"]["box"]["box_name"], "Big veg box");
    assert_eq!(renamed["data"]["box"]["attributes"], made["attributes"]);
    assert_eq!(
        admin.ok("GET", &format!("/boxes/{box_id}"), None, 200)["data"]["box"],
        renamed["data"]["box"]
    );

    // Box products: variants of the catalogue.
    let carrot = box_product(&admin, "carrot");
    let kale = box_product(&admin, "kale");
    let refused = admin.send(
        "POST",
        "/box_products",
        Some(&json!({"platform_product_id": "veg", "platform_variant_id": "parsnip"})),
    );
    let entries = refused.assert_error(422, "validation.failed");
    assert_eq!(entries[0]["field"], "box_product.platform_variant_id");
    assert!(
        entries[0]["message"]
            .as_str()
            .unwrap()
            .contains("not in the shop's catalogue")
    );
    assert_eq!(
        admin.ok("GET", "/box_products", None, 200)["pagination"]["total"],
        2
    );

    // Sizes: created, listed, changed one by one or all at once (or none).
    let small = admin.ok(
        "POST",
        &format!("/boxes/{box_id}/box_sizes"),
        Some(
            &json!({"box_size": {"box_size_name": "Small", "min_quantity": 2, "max_quantity": 4}}),
        ),
        200,
    )["data"]
        .clone();
    assert_eq!(
        (&small["pricing_mode"], &small["box_id"]),
        (&json!("flexible_pricing"), &json!(box_id))
    );
    let size_id = small["id"].as_i64().unwrap();
    let bulk = json!([{"id": size_id, "max_quantity": 5},
                      {"box_size_name": "Large", "min_quantity": 8, "max_quantity": 6}]);
    assert_eq!(
        problems(&admin.send("PUT", &format!("/boxes/{box_id}/box_sizes"), Some(&bulk))),
        [("[1].max_quantity".to_string(), "out_of_range".to_string())]
    );
    assert_eq!(
        admin.ok("GET", &format!("/box_sizes/{size_id}"), None, 200)["data"]["box_size"],
        small,
        "nothing written"
    );
    let saved = admin.ok(
        "PUT",
        &format!("/boxes/{box_id}/box_sizes"),
        Some(&json!({"box_sizes": [{"id": size_id, "max_quantity": 5},
                                   {"box_size_name": "Large", "min_quantity": 6, "max_quantity": 8}]})),
        200,
    )["data"]
        .clone();
    assert_eq!(
        (&saved[0]["id"], &saved[0]["max_quantity"]),
        (&json!(size_id), &json!(5))
    );
    assert_eq!(saved[1]["box_size_name"], "Large");
    let changed = admin.ok(
        "PATCH",
        &format!("/box_sizes/{size_id}"),
        Some(&json!({"min_quantity": 1})),
        200,
    );
    assert_eq!(changed["data"]["min_quantity"], 1);
    let sizes = admin.ok(
        "GET",
        &format!("/boxes/{box_id}/box_sizes?limit=1&page=2"),
        None,
        200,
    );
    assert_eq!(sizes["data"]["box_sizes"][0]["box_size_name"], "Large");
    assert_eq!(sizes["pagination"]["total"], 2);

    // Time slots: dates in order, the documented `time-slot` key, the order_datetime filter.
    let week = json!({"time_slot": {"time_slot_name": "Week 1",
        "visibility_date": "2030-01-01T00:00:00Z", "selection_deadline_date": "2030-01-04T00:00:00Z",
        "start_date": "2030-01-07T00:00:00Z", "end_date": "2030-01-13T23:59:59Z",
        "attributes": [{"attribute_key": "theme", "attribute_value": "roots"}]}});
    let slot = admin.ok(
        "POST",
        &format!("/boxes/{box_id}/time_slots"),
        Some(&week),
        201,
    )["data"]["time-slot"]
        .clone();
    let slot_id = slot["id"].as_i64().unwrap();
    assert_eq!(slot["start_date"], "2030-01-07T00:00:00Z");
    assert_eq!(slot["box_products"], json!([]));
    let mut late = week.clone();
    late["time_slot"]["selection_deadline_date"] = json!("2030-01-08T00:00:00Z");
    assert_eq!(
        problems(&admin.send("POST", &format!("/boxes/{box_id}/time_slots"), Some(&late))),
        [(
            "time_slot.start_date".to_string(),
            "out_of_order".to_string()
        )]
    );
    let holding = |instant: &str| {
        admin.ok(
            "GET",
            &format!("/boxes/{box_id}/time_slots?order_datetime={instant}"),
            None,
            200,
        )["data"]["time_slots"]
            .as_array()
            .unwrap()
            .len()
    };
    assert_eq!(
        (
            holding("2030-01-10T12:00:00Z"),
            holding("2030-02-01T00:00:00Z")
        ),
        (1, 0)
    );
    admin
        .send(
            "GET",
            &format!("/boxes/{box_id}/time_slots?order_datetime=soon"),
            None,
        )
        .assert_error(400, "request.invalid_query");

    // Options: the products a slot offers, in the order added.
    for product in [&kale, &carrot] {
        let option = admin.ok(
            "POST",
            &format!("/time_slots/{slot_id}/options"),
            Some(&json!({"box_product_id": product["id"]})),
            200,
        );
        assert_eq!(
            option["data"]["time_slot_option"],
            json!({"box_product_id": product["id"], "time_slot_id": slot_id})
        );
    }
    let read =
        admin.ok("GET", &format!("/time_slots/{slot_id}"), None, 200)["data"]["time_slot"].clone();
    assert_eq!(read["box_products"][0]["platform_variant_id"], "kale");
    assert_eq!(read["box_products"][1]["platform_variant_id"], "carrot");
    assert_eq!(
        problems(&admin.send(
            "POST",
            &format!("/time_slots/{slot_id}/options"),
            Some(&json!({"box_product_id": 999999}))
        )),
        [(
            "box_product_id".to_string(),
            "unknown_box_product".to_string()
        )]
    );
    // A product deleted leaves every slot's options.
    admin.ok(
        "DELETE",
        &format!("/box_products/{}", kale["id"]),
        None,
        204,
    );
    let options = admin.ok("GET", &format!("/time_slots/{slot_id}/options"), None, 200);
    assert_eq!(
        options["data"]["time_slot_options"],
        json!([{"box_product_id": carrot["id"], "time_slot_id": slot_id}])
    );
    admin.ok(
        "DELETE",
        &format!("/time_slots/{slot_id}/options/{}", carrot["id"]),
        None,
        204,
    );
    admin
        .send(
            "DELETE",
            &format!("/time_slots/{slot_id}/options/{}", carrot["id"]),
            None,
        )
        .assert_error(404, "resource.not_found");
    let patched = admin.ok(
        "PATCH",
        &format!("/time_slots/{slot_id}"),
        Some(&json!({"time_slot_name": "Week one"})),
        200,
    );
    assert_eq!(patched["data"]["time_slot"]["time_slot_name"], "Week one");

    // The group cannot go while the box is sold under it; the box takes its sizes and slots.
    let group_path = format!(
        "/subscriptions/v1/shops/{}/subscription_groups/{group}",
        admin.shop
    );
    let delete_group = || {
        server
            .request("DELETE", &group_path)
            .bearer(&admin.token)
            .call()
    };
    delete_group().assert_error(409, "subscription_group.in_use");
    admin.ok("DELETE", &format!("/boxes/{box_id}"), None, 204);
    admin
        .send("GET", &format!("/time_slots/{slot_id}"), None)
        .assert_error(404, "resource.not_found");
    admin
        .send("GET", &format!("/box_sizes/{size_id}"), None)
        .assert_error(404, "resource.not_found");
    assert_eq!(delete_group().status, 204);
}

/// The customer `platform_id`, made by a Customer Saved event: their email.
pub(crate) fn customer_saved(admin: &Admin<'_>, platform_id: &str) -> String {
    let email = format!("{platform_id}@example.test");
    let saved = admin
        .server
        .post(&format!(
            "/customers/v1/shops/{}/platforms/custom/webhooks/customers/saved",
            admin.shop
        ))
        .bearer(&admin.token)
        .json(
            &json!({"data": {"customer": {"platform_id": platform_id, "email": email,
            "first_name": "Ada", "platform_updated_at": "2026-11-01T00:00:00Z"}}}),
        );
    assert_eq!(saved.status, 202, "{}", saved.text);
    email
}

/// A subscription of the customer `platform_id` (once Mercer has them) with a line item sold
/// under `group` and a plain one: their ids.
pub(crate) fn subscribe(
    admin: &Admin<'_>,
    platform_id: &str,
    email: &str,
    group: i64,
) -> (i64, i64) {
    let server = admin.server;
    let known = format!(
        "/customers/v2/shops/{}/customers/pid/{platform_id}",
        admin.shop
    );
    assert!(wait_until(Duration::from_secs(10), || {
        server.get(&known).bearer(&admin.token).call().status == 200
    }));
    let groups = format!(
        "/subscriptions/v1/shops/{}/subscription_groups/{group}",
        admin.shop
    );
    let read = server.get(&groups).bearer(&admin.token).call().json();
    let rule = read["subscription_group"]["billing_rules"][0]["id"].clone();
    let made = server
        .post(&format!(
            "/subscriptions/v1/shops/{}/subscriptions",
            admin.shop
        ))
        .bearer(&admin.token)
        .json(&json!({
            "customer": {"email": email, "first_name": "Ada"},
            "subscription": {
                "subscription_status": "active",
                "next_order_datetime": "2030-01-10T09:00:00Z",
                "line_items": [
                    {"platform_product_id": "veg", "platform_variant_id": "carrot",
                     "quantity": 1, "price": 2000, "subscription_group_id": group,
                     "interval_id": rule,
                     "line_item_attributes": [{"name": "gift_note", "value": "For Ada"}]},
                    {"platform_product_id": "mug", "platform_variant_id": "mug",
                     "quantity": 1, "price": 900}],
                "shipping_address": {"street1": "1 Rue", "city": "Lyon", "country_code": "FR"},
                "payment_details": {"gateway_name": "stripe", "gateway_customer_id": "cus_1",
                                    "gateway_payment_id": "pm_1"}}}));
    assert_eq!(made.status, 200, "{}", made.text);
    let items = made.json()["subscription"]["line_items"].clone();
    (
        items[0]["id"].as_i64().unwrap(),
        items[1]["id"].as_i64().unwrap(),
    )
}

fn selections_follow_the_box_rules(backend: Backend) {
    let server = MercerServer::in_process(backend);
    let (admin, group) = set_up(&server);
    let make = |rest: &str, body: Value| admin.ok("POST", rest, Some(&body), 201)["data"].clone();
    let box_id = make(
        "/boxes",
        json!({"svc_subscription_group_id": group, "box_name": "Veg box"}),
    )["box"]["id"]
        .as_i64()
        .unwrap();
    let carrot = box_product(&admin, "carrot")["id"].as_i64().unwrap();
    let kale = box_product(&admin, "kale")["id"].as_i64().unwrap();
    let small = admin.ok(
        "POST",
        &format!("/boxes/{box_id}/box_sizes"),
        Some(&json!({"box_size_name": "Small", "min_quantity": 2, "max_quantity": 4})),
        200,
    )["data"]["id"]
        .as_i64()
        .unwrap();
    let slot = |name: &str, deadline: &str| {
        let body = json!({"time_slot_name": name, "visibility_date": "2020-01-01T00:00:00Z",
            "selection_deadline_date": deadline, "start_date": "2030-01-07T00:00:00Z",
            "end_date": "2030-01-13T23:59:59Z"});
        let id = make(&format!("/boxes/{box_id}/time_slots"), body)["time-slot"]["id"]
            .as_i64()
            .unwrap();
        admin.ok(
            "POST",
            &format!("/time_slots/{id}/options"),
            Some(&json!({"box_product_id": carrot})),
            200,
        );
        id
    };
    let open = slot("Open", "2030-01-04T00:00:00Z");
    let closed = slot("Closed", "2020-01-04T00:00:00Z");
    // Another box's size is not this box's.
    let fruit_group = server
        .post(&format!(
            "/subscriptions/v1/shops/{}/subscription_groups",
            admin.shop
        ))
        .bearer(&admin.token)
        .json(&json!({"name": "Fruit", "billing_rules": [{"interval_number": 1, "interval_type": "week"}]}))
        .json()["subscription_group"]["id"]
        .clone();
    let fruit = make(
        "/boxes",
        json!({"svc_subscription_group_id": fruit_group, "box_name": "Fruit box"}),
    )["box"]["id"]
        .as_i64()
        .unwrap();
    let fruit_size = admin.ok(
        "POST",
        &format!("/boxes/{fruit}/box_sizes"),
        Some(&json!({"box_size_name": "Fruit", "min_quantity": 0, "max_quantity": 9})),
        200,
    )["data"]["id"]
        .clone();
    let ada_email = customer_saved(&admin, "cust-ada");
    let (ada_box, ada_mug) = subscribe(&admin, "cust-ada", &ada_email, group);
    let bob_email = customer_saved(&admin, "cust-bob");
    let (bob_box, _) = subscribe(&admin, "cust-bob", &bob_email, group);

    let ada = "/customers/cust-ada/selections";
    let choice = |item: i64, at: &str, chosen: Value| {
        json!({"selection": {"svc_platform_subscription_line_item_id": item,
            "box_size_id": small, "time_slot_id": open, "order_datetime": at,
            "line_items": chosen}})
    };
    let two_carrots = json!([{"box_product_id": carrot, "choice_quantity": 2}]);
    let made = admin.ok(
        "POST",
        ada,
        Some(&choice(
            ada_box,
            "2030-01-10T09:00:00Z",
            two_carrots.clone(),
        )),
        200,
    )["data"]["selection"]
        .clone();
    let first = made["id"].as_i64().unwrap();
    assert_eq!(
        (
            &made["svc_platform_subscription_line_item_id"],
            &made["box_size_id"],
            &made["time_slot_id"],
            &made["order_datetime"],
            &made["line_items"]
        ),
        (
            &json!(ada_box),
            &json!(small),
            &json!(open),
            &json!("2030-01-10T09:00:00Z"),
            &two_carrots
        )
    );
    // The same line item and date again replaces it; another date is another selection.
    let three_carrots = json!([{"box_product_id": carrot, "choice_quantity": "3"}]);
    let replaced = admin.ok(
        "POST",
        ada,
        Some(&choice(ada_box, "2030-01-10T09:00:00Z", three_carrots)),
        200,
    )["data"]["selection"]
        .clone();
    assert_eq!(
        (
            &replaced["id"],
            &replaced["line_items"][0]["choice_quantity"]
        ),
        (&json!(first), &json!(3))
    );
    let second = admin.ok(
        "POST",
        ada,
        Some(&choice(
            ada_box,
            "2030-01-12T09:00:00Z",
            two_carrots.clone(),
        )),
        200,
    )["data"]["selection"]["id"]
        .as_i64()
        .unwrap();
    let listed = admin.ok("GET", ada, None, 200);
    assert_eq!(listed["pagination"]["total"], 2);
    let on_date = admin.ok(
        "GET",
        &format!("{ada}?svc_platform_subscription_line_item_id={ada_box}&order_datetime=2030-01-12T09:00:00Z"),
        None,
        200,
    );
    assert_eq!(on_date["data"]["selections"][0]["id"], second);
    assert_eq!(on_date["pagination"]["total"], 1);
    assert_eq!(
        admin.ok("GET", &format!("{ada}/{first}"), None, 200)["data"]["selection"],
        replaced
    );
    admin
        .send(
            "GET",
            &format!("/customers/cust-bob/selections/{first}"),
            None,
        )
        .assert_error(404, "resource.not_found");

    // Every rule, each on its field.
    let refused = |body: Value| problems(&admin.send("POST", ada, Some(&body)));
    let at = "2030-01-10T09:00:00Z";
    let on = |field: &str, code: &str| vec![(format!("selection.{field}"), code.to_string())];
    assert_eq!(
        refused(choice(999999, at, two_carrots.clone())),
        on(
            "svc_platform_subscription_line_item_id",
            "unknown_line_item"
        )
    );
    assert_eq!(
        refused(choice(bob_box, at, two_carrots.clone())),
        on(
            "svc_platform_subscription_line_item_id",
            "not_the_customers"
        )
    );
    assert_eq!(
        refused(choice(ada_mug, at, two_carrots.clone())),
        on(
            "svc_platform_subscription_line_item_id",
            "not_a_box_line_item"
        )
    );
    let mut other_size = choice(ada_box, at, two_carrots.clone());
    other_size["selection"]["box_size_id"] = fruit_size;
    assert_eq!(refused(other_size), on("box_size_id", "unknown_box_size"));
    assert_eq!(
        refused(choice(ada_box, "2030-02-01T09:00:00Z", two_carrots.clone())),
        on("order_datetime", "outside_time_slot")
    );
    let mut late = choice(ada_box, at, two_carrots.clone());
    late["selection"]["time_slot_id"] = json!(closed);
    assert_eq!(refused(late), on("time_slot_id", "past_deadline"));
    assert_eq!(
        refused(choice(
            ada_box,
            at,
            json!([{"box_product_id": carrot, "choice_quantity": 1},
                   {"box_product_id": kale, "choice_quantity": 1}])
        )),
        on("line_items[1].box_product_id", "not_offered")
    );
    assert_eq!(
        refused(choice(
            ada_box,
            at,
            json!([{"box_product_id": carrot, "choice_quantity": 5}])
        )),
        on("line_items", "quantity_out_of_range")
    );

    // Kale offered, the selection changes to it; moved onto the other's date it is 409.
    admin.ok(
        "POST",
        &format!("/time_slots/{open}/options"),
        Some(&json!({"box_product_id": kale})),
        200,
    );
    let mixed = json!([{"box_product_id": carrot, "choice_quantity": 1},
                       {"box_product_id": kale, "choice_quantity": 2}]);
    let changed = admin.ok(
        "PATCH",
        &format!("{ada}/{first}"),
        Some(&json!({"selection": {"line_items": mixed}})),
        200,
    )["data"]["selection"]
        .clone();
    assert_eq!(changed["line_items"], mixed);
    assert_eq!(changed["order_datetime"], "2030-01-10T09:00:00Z");
    admin
        .send(
            "PATCH",
            &format!("{ada}/{second}"),
            Some(&json!({"order_datetime": "2030-01-10T09:00:00Z"})),
        )
        .assert_error(409, "selection.taken");

    // The box's line items: those sold under its group.
    let items = admin.ok("GET", "/subscription_line_items", None, 200);
    let ids: Vec<&Value> = items["data"]["subscription_line_items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|item| &item["svc_platform_subscription_line_item_id"])
        .collect();
    assert_eq!(ids, [&json!(ada_box), &json!(bob_box)]);
    let item = admin.ok(
        "GET",
        &format!("/subscription_line_items/{ada_box}"),
        None,
        200,
    );
    assert_eq!(
        (
            &item["data"]["subscription_line_item"]["box_id"],
            &item["data"]["subscription_line_item"]["shop_identifier"]
        ),
        (&json!(box_id), &json!(admin.shop))
    );
    let attribute = &item["data"]["subscription_line_item"]["attributes"][0];
    assert_eq!(
        (&attribute["attribute_key"], &attribute["attribute_value"]),
        (&json!("gift_note"), &json!("For Ada"))
    );
    admin
        .send("GET", &format!("/subscription_line_items/{ada_mug}"), None)
        .assert_error(404, "resource.not_found");

    // A slot whose deadline has passed holds its selections: moving one out of it, even to a
    // slot still open that offers its products, is 422 on the slot, and nothing changes.
    let later = slot("Later", "2030-01-05T00:00:00Z");
    admin.ok(
        "POST",
        &format!("/time_slots/{later}/options"),
        Some(&json!({"box_product_id": kale})),
        200,
    );
    admin.ok(
        "PATCH",
        &format!("/time_slots/{open}"),
        Some(&json!({"time_slot": {"selection_deadline_date": "2020-01-05T00:00:00Z"}})),
        200,
    );
    let moved = admin.send(
        "PATCH",
        &format!("{ada}/{first}"),
        Some(&json!({"selection": {"time_slot_id": later}})),
    );
    assert_eq!(problems(&moved), on("time_slot_id", "past_deadline"));
    assert_eq!(
        admin.ok("GET", &format!("{ada}/{first}"), None, 200)["data"]["selection"],
        changed
    );
    admin.ok("DELETE", &format!("/time_slots/{later}"), None, 204);

    // What has selections stays; deleted, they let it go.
    admin
        .send("DELETE", &format!("/time_slots/{open}"), None)
        .assert_error(409, "time_slot.in_use");
    admin
        .send("DELETE", &format!("/boxes/{box_id}"), None)
        .assert_error(409, "box.in_use");
    for id in [first, second] {
        admin.ok("DELETE", &format!("{ada}/{id}"), None, 204);
    }
    admin
        .send("GET", &format!("{ada}/{first}"), None)
        .assert_error(404, "resource.not_found");
    admin.ok("DELETE", &format!("/time_slots/{open}"), None, 204);
    admin.ok("DELETE", &format!("/boxes/{box_id}"), None, 204);
}

/// Box sizes take the box builder's scopes: a token that may only read orders changes no size
/// (it once set a size's `min_quantity` to 50), and one that may read subscription groups
/// reads them but changes none.
fn box_sizes_take_the_box_builders_scopes(backend: Backend) {
    let server = MercerServer::in_process(backend);
    let (admin, group) = set_up(&server);
    let box_id = admin.ok(
        "POST",
        "/boxes",
        Some(&json!({"svc_subscription_group_id": group, "box_name": "Veg box"})),
        201,
    )["data"]["box"]["id"]
        .as_i64()
        .unwrap();
    let sizes = format!("/boxes/{box_id}/box_sizes");
    let small = json!({"box_size_name": "Small", "min_quantity": 2, "max_quantity": 4});
    let size = admin.ok("POST", &sizes, Some(&small), 200)["data"].clone();
    let one = format!("/box_sizes/{}", size["id"]);
    let token = |scope: &str| {
        server
            .cli(&["token", "create", "--shop", &admin.shop, "--scope", scope])
            .value()
    };
    let with = |token: &str| Admin {
        server: &server,
        shop: admin.shop.clone(),
        token: token.to_string(),
    };
    let fifty = json!({"box_size": {"min_quantity": 50, "max_quantity": 50}});
    let writes = [
        ("POST", sizes.clone(), small.clone()),
        (
            "PUT",
            sizes.clone(),
            json!([{"id": size["id"], "min_quantity": 50, "max_quantity": 50}]),
        ),
        ("PATCH", one.clone(), fifty),
    ];
    let orders_reader = with(&token("read_orders"));
    let groups_reader = with(&token("read_subscription_groups"));
    for (method, rest, body) in &writes {
        for (who, reader) in [
            ("read_orders", &orders_reader),
            ("read_subscription_groups", &groups_reader),
        ] {
            let answer = reader.send(method, rest, Some(body));
            let entries = answer.assert_error(403, "auth.forbidden");
            assert_eq!(
                entries[0]["sub_type"], "missing_scope",
                "{who} {method} {rest}"
            );
        }
    }
    for rest in [&sizes, &one] {
        orders_reader
            .send("GET", rest, None)
            .assert_error(403, "auth.forbidden");
        groups_reader.ok("GET", rest, None, 200);
    }
    // Nothing changed; a token that may write subscription groups changes the size.
    assert_eq!(admin.ok("GET", &one, None, 200)["data"]["box_size"], size);
    assert_eq!(admin.ok("GET", &sizes, None, 200)["pagination"]["total"], 1);
    let writer = with(&token("write_subscription_groups"));
    let changed = writer.ok(
        "PATCH",
        &one,
        Some(&json!({"box_size": {"min_quantity": 3}})),
        200,
    );
    assert_eq!(changed["data"]["min_quantity"], 3);
}

backend_tests!(
    boxes_and_their_products_sizes_slots_and_options,
    selections_follow_the_box_rules,
    box_sizes_take_the_box_builders_scopes,
);
