//! The OpenAPI document (`GET /openapi.json`) against the routes: the same (method, path) pairs
//! as the route folders register, each with the credentials the scope tables of
//! `route_scopes.rs` name, and each one routed by the live server (no other method is).

use std::collections::BTreeSet;

use mercer_tests::{Backend, MercerServer};
use serde_json::{Value, json};

use crate::route_scopes::{
    ANY_TOKEN, BOX_SHOPPERS, CONSOLE, PORTAL, PUBLIC, ROUTES, STOREFRONT, concrete,
    registered_routes,
};

const METHODS: [&str; 5] = ["GET", "POST", "PUT", "PATCH", "DELETE"];

/// (method, path) of every operation of the document, methods upper case.
fn documented(document: &Value) -> BTreeSet<(String, String)> {
    let mut operations = BTreeSet::new();
    for (path, item) in document["paths"].as_object().unwrap() {
        for method in item.as_object().unwrap().keys() {
            operations.insert((method.to_uppercase(), path.clone()));
        }
    }
    operations
}

/// The security requirements a route's table says it has.
fn expected_security(method: &str, path: &str) -> Value {
    let is = |table: &[(&str, &str)]| table.iter().any(|(m, p)| *m == method && *p == path);
    if let Some((_, _, scope)) = ROUTES.iter().find(|(m, p, _)| *m == method && *p == path) {
        json!([{ "api_token": [scope] }, { "oauth2": [scope] }])
    } else if is(ANY_TOKEN) {
        json!([{ "api_token": [] }, { "oauth2": [] }])
    } else if is(STOREFRONT) {
        json!([{ "checkout_jwt": [] }])
    } else if is(BOX_SHOPPERS) && path.contains("/customer/") {
        json!([{ "customer_token": [] }])
    } else {
        assert!(
            is(PUBLIC) || is(BOX_SHOPPERS),
            "{method} {path} is in no table"
        );
        Value::Null
    }
}

#[test]
fn the_document_holds_every_route_with_its_credentials_and_nothing_else() {
    let server = MercerServer::in_process(Backend::Sqlite);
    let answer = server.get("/openapi.json").call();
    assert_eq!(answer.status, 200);
    let document = answer.json();
    assert_eq!(document["openapi"], "3.1.0");
    let documented = documented(&document);
    // The console's and the portal's HTML pages are left out on purpose (docs/console.md and
    // docs/portal.md say so).
    let registered: BTreeSet<(String, String)> = registered_routes()
        .into_iter()
        .filter(|(method, path)| !CONSOLE.contains(&(method.as_str(), path.as_str())))
        .filter(|(method, path)| !PORTAL.contains(&(method.as_str(), path.as_str())))
        .collect();
    let missing: Vec<_> = registered.difference(&documented).collect();
    let extra: Vec<_> = documented.difference(&registered).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "registered but not documented: {missing:?}\ndocumented but not registered: {extra:?}"
    );
    let mut wrong = Vec::new();
    for (method, path) in &documented {
        let operation = &document["paths"][path][method.to_lowercase()];
        let security = operation.get("security").cloned().unwrap_or(Value::Null);
        let security = match security {
            Value::Array(list) if list.is_empty() => Value::Null,
            other => other,
        };
        let expected = expected_security(method, path);
        if security != expected {
            wrong.push(format!("{method} {path}: {security} instead of {expected}"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// Every documented operation reaches a handler of the live server (whatever it then answers
/// without credentials, it is not the "no such route" 404 or a 405), and every other method of a
/// documented path is a 405: the document and actix's route table agree both ways.
#[test]
fn the_live_server_routes_exactly_the_documented_operations() {
    let server = MercerServer::in_process(Backend::Sqlite);
    let document = server.get("/openapi.json").call().json();
    let documented = documented(&document);
    let shop = server.demo().shop.clone();
    let paths: BTreeSet<&String> = documented.iter().map(|(_, path)| path).collect();
    let mut wrong = Vec::new();
    for template in paths {
        let path = concrete(template, &shop);
        for method in METHODS {
            let answer = server.request(method, &path).call();
            let unrouted = answer.status == 405
                || (answer.status == 404
                    && answer
                        .errors()
                        .first()
                        .is_some_and(|entry| entry["sub_type"] == "route"));
            let listed = documented.contains(&(method.to_string(), template.clone()));
            if listed == unrouted {
                wrong.push(format!(
                    "{method} {template}: documented {listed}, answered {} {}",
                    answer.status, answer.text
                ));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// `GET /docs` is the document rendered for people: an HTML page holding the same document.
#[test]
fn the_reference_page_holds_the_document() {
    let server = MercerServer::in_process(Backend::Sqlite);
    let page = server.get("/docs").call();
    assert_eq!(page.status, 200);
    assert!(
        page.header("content-type")
            .is_some_and(|value| value.starts_with("text/html")),
        "{:?}",
        page.header("content-type")
    );
    assert!(
        page.text.contains("<title>Mercer API</title>"),
        "{}",
        page.text
    );
    assert!(
        page.text
            .contains("\"operationId\":\"get_openapi_document\"")
    );
}

/// A directory customer's `groups` is a list of group objects (id, name, shop, platform id,
/// times), in the document and in the answers.
#[test]
fn directory_customers_answer_groups_as_the_documented_group_objects() {
    let server = MercerServer::in_process(Backend::Sqlite);
    let document = server.get("/openapi.json").call().json();
    let schemas = &document["components"]["schemas"];
    assert_eq!(
        schemas["CustomerResource"]["properties"]["groups"]["items"]["$ref"],
        "#/components/schemas/DirectoryCustomerGroup"
    );
    let group = &schemas["DirectoryCustomerGroup"];
    assert_eq!(group["type"], "object");
    let mut required: Vec<&str> = group["required"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    required.sort_unstable();
    assert_eq!(
        required,
        [
            "created_at",
            "id",
            "name",
            "platform_id",
            "shop_identifier",
            "updated_at"
        ]
    );
    assert_eq!(group["properties"]["id"]["type"], "integer");
    assert_eq!(group["properties"]["name"]["type"], "string");

    // A customer made by Create Subscription: in the directory, with its groups.
    let demo = server.demo().clone();
    let created = server
        .post(&format!(
            "/subscriptions/v1/shops/{}/subscriptions",
            demo.shop
        ))
        .bearer(&demo.token)
        .json(&json!({
            "customer": {"email": "grouped@example.com"},
            "subscription": {
                "order_rrule": crate::subscriptions::running_rule(),
                "line_items": [{"platform_product_id": "101", "platform_variant_id": "201",
                                "quantity": 1, "price": 500}],
                "shipping_address": {"street1": "1 Main St", "city": "Springfield",
                                     "country_code": "US"}}}));
    assert_eq!(created.status, 200, "{}", created.text);
    let listed = server
        .get(&format!("/customers/v2/shops/{}/customers", demo.shop))
        .bearer(&demo.token)
        .call();
    assert_eq!(listed.status, 200, "{}", listed.text);
    let customer = &listed.json()["customers"][0];
    assert_eq!(customer["email"], "grouped@example.com");
    assert_eq!(customer["groups"], json!([]), "{customer}");
}
