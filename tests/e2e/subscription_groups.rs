//! Subscription groups (issue 24 part 1) over HTTP, on SQLite and PostgreSQL:
//! create, list, get, update, delete (409 while a live subscription uses one), and a Create
//! Subscription written as a TypeScript integration writes it (every id a string, no
//! `order_rrule`: the group's billing rule gives it; the group's discount).

use mercer_tests::{Answer, Backend, MercerServer, backend_tests};
use serde_json::{Value, json};

use crate::subscriptions::{Api, ok};

/// A request to `…/subscription_groups{rest}`.
fn send(api: &Api<'_>, method: &str, rest: &str, body: &Value) -> Answer {
    api.send(method, &format!("/subscription_groups{rest}"), body)
}

fn coffee_club() -> Value {
    json!({"subscription_group": {
    "name": "Coffee club", "percent_discount": 15,
    "products": [{"platform_product_id": "101", "platform_variant_id": null}],
    "billing_rules": [
        {"interval_number": 2, "interval_type": "week"},
        {"interval_number": 1, "interval_type": "month", "interval_name": "Monthly"}
    ]}})
}

fn problems(answer: &Answer) -> Vec<(String, String)> {
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

fn groups_are_created_listed_read_updated_and_deleted(backend: Backend) {
    let server = MercerServer::in_process(backend);
    let api = Api::demo(&server);
    let created = send(&api, "POST", "", &coffee_club());
    assert_eq!(created.status, 201, "{}", created.text);
    let group = created.json()["subscription_group"].clone();
    let id = group["id"].as_i64().unwrap();
    assert_eq!(group["shop_identifier"], api.shop.as_str());
    assert_eq!(group["percent_discount"], 15.0);
    assert_eq!(
        group["products"],
        json!([{"platform_product_id": "101", "platform_variant_id": null}])
    );
    let rules = group["billing_rules"].as_array().unwrap();
    assert_eq!(rules[0]["billing_rule"], "FREQ=WEEKLY;INTERVAL=2");
    assert_eq!(rules[0]["interval_name"], "Every 2 weeks");
    assert_eq!(rules[0]["subscription_group_id"], id);
    assert_eq!(rules[1]["interval_name"], "Monthly");
    for key in ["created_at", "updated_at"] {
        assert!(group[key].is_string(), "{key}: {group}");
    }
    // A bare body, with its numbers as text and a billing rule given as an RRULE.
    let tea = send(
        &api,
        "POST",
        "",
        &json!({"name": "Tea", "percent_discount": "5",
                "billing_rules": [{"billing_rule": "FREQ=MONTHLY;INTERVAL=3;BYMONTHDAY=1"}]}),
    );
    assert_eq!(tea.status, 201, "{}", tea.text);
    let tea = tea.json()["subscription_group"].clone();
    assert_eq!(
        (
            &tea["billing_rules"][0]["interval_type"],
            &tea["billing_rules"][0]["interval_number"]
        ),
        (&json!("month"), &json!(3))
    );
    let listed = ok(api.get("/subscription_groups?limit=1&page=2"));
    assert_eq!(listed["subscription_groups"][0]["name"], "Tea");
    assert_eq!(
        listed["pagination"],
        json!({"count": 1, "current_page": 2, "per_page": 1, "total": 2, "total_pages": 2})
    );
    assert_eq!(
        ok(api.get(&format!("/subscription_groups/{id}")))["subscription_group"],
        group
    );
    // PATCH and PUT replace the fields given.
    let renamed = ok(send(
        &api,
        "PATCH",
        &format!("/{id}"),
        &json!({"subscription_group": {"name": "Coffee club+"}}),
    ));
    assert_eq!(renamed["subscription_group"]["name"], "Coffee club+");
    assert_eq!(
        renamed["subscription_group"]["billing_rules"],
        group["billing_rules"]
    );
    let rules = ok(send(
        &api,
        "PUT",
        &format!("/{id}"),
        &json!({"subscription_group": {"billing_rules": [
            {"id": group["billing_rules"][1]["id"], "interval_number": 1, "interval_type": "month"}]}}),
    ));
    assert_eq!(
        rules["subscription_group"]["billing_rules"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    assert_eq!(
        rules["subscription_group"]["billing_rules"][0]["id"],
        group["billing_rules"][1]["id"]
    );
    // Problems, each on its path.
    assert_eq!(
        problems(&send(
            &api,
            "POST",
            "",
            &json!({"subscription_group": {"percent_discount": 120,
            "billing_rules": [{"interval_number": 400, "interval_type": "week"},
                              {"interval_number": 1, "interval_type": "hour"}]}})
        )),
        [
            (
                "subscription_group.name".to_string(),
                "required".to_string()
            ),
            (
                "subscription_group.percent_discount".to_string(),
                "out_of_range".to_string()
            ),
            (
                "subscription_group.billing_rules[0].interval_number".to_string(),
                "out_of_range".to_string()
            ),
            (
                "subscription_group.billing_rules[1].interval_type".to_string(),
                "invalid_value".to_string()
            ),
        ]
    );
    api.get("/subscription_groups/999999")
        .assert_error(404, "resource.not_found");
    // Deleted: 204, then 404.
    let deleted = api.delete(&format!("/subscription_groups/{}", tea["id"]));
    assert_eq!(deleted.status, 204, "{}", deleted.text);
    api.get(&format!("/subscription_groups/{}", tea["id"]))
        .assert_error(404, "resource.not_found");
}

/// A Create Subscription body as a TypeScript integration writes it.
fn typescript_body(group: &Value, rule: &Value, email: &str) -> Value {
    json!({
        "customer": {"first_name": "Ada", "last_name": "Lovelace", "email": email},
        "subscription": {
            "idempotency_key": format!("ts-{email}"),
            "subscription_status": "active",
            "next_order_datetime": "2030-01-07T09:00:00Z",
            "line_items": [{"platform_product_id": "101", "platform_variant_id": "202",
                            "quantity": "2", "price": "1250",
                            "subscription_group_id": group["id"].to_string(),
                            "interval_id": rule["id"].to_string(),
                            "__typename": "SubscriptionLineItem"}],
            "shipping_address": {"street1": "1 Analytical Way", "city": "London",
                                 "country_code": "GB", "zip": null},
            "payment_details": {"gateway_name": "stripe", "gateway_customer_id": "cus_1"},
            "metadata": {"source": "storefront"}
        }
    })
}

fn a_subscription_sold_under_a_group_takes_its_rule_and_discount(backend: Backend) {
    let server = MercerServer::in_process(backend);
    let api = Api::demo(&server);
    let group = ok_created(send(&api, "POST", "", &coffee_club()));
    let weekly = group["billing_rules"][0].clone();
    let created = ok(api.send(
        "POST",
        "/subscriptions",
        &typescript_body(&group, &weekly, "ts@example.test"),
    ))["subscription"]
        .clone();
    assert_eq!(
        created["order_rrule"],
        "DTSTART:20300107T090000Z\nRRULE:FREQ=WEEKLY;INTERVAL=2"
    );
    assert_eq!(created["order_rrule_text"], "every 2 weeks on Monday");
    assert_eq!(created["next_order_datetime"], "2030-01-07T09:00:00Z");
    assert_eq!(created["percent_discount"], 15.0);
    assert_eq!(created["payment_method_token"], Value::Null);
    let item = &created["line_items"][0];
    assert_eq!(item["subscription_group_id"], group["id"]);
    assert_eq!(item["subscription_group_billing_rules_id"], weekly["id"]);
    assert_eq!(
        (&item["quantity"], &item["price"]),
        (&json!(2), &json!(1250))
    );
    // A group or a rule the shop does not have: 422 on the field.
    let mut unknown = typescript_body(&group, &weekly, "unknown@example.test");
    unknown["subscription"]["line_items"][0]["subscription_group_id"] = json!("999999");
    assert_eq!(
        problems(&api.send("POST", "/subscriptions", &unknown)),
        [(
            "subscription.line_items[0].subscription_group_id".to_string(),
            "unknown_group".to_string()
        )]
    );
    let mut other_rule = typescript_body(&group, &weekly, "rule@example.test");
    other_rule["subscription"]["line_items"][0]["interval_id"] = json!("999999");
    assert_eq!(
        problems(&api.send("POST", "/subscriptions", &other_rule)),
        [(
            "subscription.line_items[0].interval_id".to_string(),
            "unknown_billing_rule".to_string()
        )]
    );
    // The group and the rule it follows stay while it lives.
    let id = group["id"].as_i64().unwrap();
    api.delete(&format!("/subscription_groups/{id}"))
        .assert_error(409, "subscription_group.in_use");
    send(
        &api,
        "PUT",
        &format!("/{id}"),
        &json!({"subscription_group": {"billing_rules": [{"interval_number": 1, "interval_type": "day"}]}}),
    )
    .assert_error(409, "subscription_group.in_use");
    let cancelled = api.send(
        "POST",
        &format!("/subscriptions/{}/cancel", created["id"]),
        &json!({}),
    );
    assert_eq!(cancelled.status, 200, "{}", cancelled.text);
    let deleted = api.delete(&format!("/subscription_groups/{id}"));
    assert_eq!(deleted.status, 204, "{}", deleted.text);
}

fn ok_created(answer: Answer) -> Value {
    assert_eq!(answer.status, 201, "{}", answer.text);
    answer.json()["subscription_group"].clone()
}

backend_tests!(
    groups_are_created_listed_read_updated_and_deleted,
    a_subscription_sold_under_a_group_takes_its_rule_and_discount,
);
