//! Shop isolation on every route of the OpenAPI document (`docs/openapi.json`, read here, not a
//! table of our own): on a shop's route, another shop's API token, holding every scope, is 403
//! `other_shop`; the shop's own token without the route's scope is 403 `missing_scope`; and a
//! checkout JWT of another shop's order opens none of this shop's storefront routes (401).
//!
//! Left out, by what they are: the routes of no shop (health, metrics, the document, OAuth),
//! the box builder's storefront (public by design), and its customer routes, whose `token` the
//! path's own shop's connector validates (box_shoppers.rs), so no other shop's credential
//! applies to them.

use std::collections::BTreeMap;

use mercer_tests::chaos::Figures;
use mercer_tests::{Backend, MercerServer, backend_tests};
use serde_json::{Value, json};

use crate::route_scopes::{SCOPES, concrete};

/// `(method, path template, security scheme, scopes)` of every operation in the document.
fn operations() -> Vec<(String, String, String, Vec<String>)> {
    let document: Value = serde_json::from_str(
        &std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/openapi.json"),
        )
        .expect("docs/openapi.json"),
    )
    .expect("the document is JSON");
    let mut operations = Vec::new();
    for (path, methods) in document["paths"].as_object().expect("paths") {
        for (method, operation) in methods.as_object().expect("methods") {
            if !["get", "post", "put", "patch", "delete"].contains(&method.as_str()) {
                continue;
            }
            let (scheme, scopes) = operation["security"][0]
                .as_object()
                .and_then(|first| first.iter().next())
                .map(|(scheme, scopes)| {
                    let scopes = scopes
                        .as_array()
                        .map(|scopes| {
                            scopes
                                .iter()
                                .filter_map(|scope| scope.as_str().map(str::to_string))
                                .collect()
                        })
                        .unwrap_or_default();
                    (scheme.clone(), scopes)
                })
                .unwrap_or_else(|| ("none".to_string(), Vec::new()));
            operations.push((method.to_uppercase(), path.clone(), scheme, scopes));
        }
    }
    operations
}

fn first_error(answer: &mercer_tests::Answer) -> (u16, String, String) {
    let entry = if answer.status >= 400 {
        answer.errors().into_iter().next().unwrap_or(Value::Null)
    } else {
        Value::Null
    };
    (
        answer.status,
        entry["type"].as_str().unwrap_or_default().to_string(),
        entry["sub_type"].as_str().unwrap_or_default().to_string(),
    )
}

fn every_route_of_the_document_keeps_shops_apart(backend: Backend) {
    let server = MercerServer::in_process(backend);
    let ours = server.demo().clone();
    let theirs = server
        .cli(&["shop", "create", "--domain", "other.isolation.test"])
        .values()[0]
        .clone();
    let token = |shop: &str, scopes: &[&str]| {
        server
            .cli(&[
                "token",
                "create",
                "--shop",
                shop,
                "--scope",
                &scopes.join(","),
            ])
            .value()
    };
    let their_token = token(&theirs, &SCOPES);
    let ours_without: BTreeMap<&str, String> = SCOPES
        .iter()
        .map(|missing| {
            let others: Vec<&str> = SCOPES.iter().copied().filter(|s| s != missing).collect();
            (*missing, token(&ours.shop, &others))
        })
        .collect();
    // A checkout of their shop, and its JWT.
    let their_checkout = server
        .post(&format!("/checkout/orders/{theirs}/init"))
        .bearer(&their_token)
        .json(&json!({"cart_items": []}));
    assert_eq!(their_checkout.status, 200, "{}", their_checkout.text);
    let their_checkout = their_checkout.json()["data"].clone();
    let their_jwt = their_checkout["jwt_token"].as_str().unwrap().to_string();
    let their_order = their_checkout["public_order_id"]
        .as_str()
        .unwrap()
        .to_string();

    let (mut checked, mut failures) = (BTreeMap::<&str, usize>::new(), Vec::new());
    for (method, template, scheme, scopes) in operations() {
        if !template.contains("{shop}") {
            continue;
        }
        let path = concrete(&template, &ours.shop);
        match scheme.as_str() {
            "api_token" => {
                let other_shop =
                    first_error(&server.request(&method, &path).bearer(&their_token).call());
                if other_shop != (403, "auth.forbidden".into(), "other_shop".into()) {
                    failures.push(format!(
                        "{method} {template}, another shop's token: {other_shop:?}"
                    ));
                }
                *checked.entry("another_shops_token_403").or_default() += 1;
                for scope in &scopes {
                    let without = &ours_without[scope.as_str()];
                    let missing =
                        first_error(&server.request(&method, &path).bearer(without).call());
                    if missing != (403, "auth.forbidden".into(), "missing_scope".into()) {
                        failures.push(format!("{method} {template} without {scope}: {missing:?}"));
                    }
                    *checked.entry("missing_scope_403").or_default() += 1;
                }
            }
            "checkout_jwt" => {
                let path = template
                    .replace("{shop}", &ours.shop)
                    .replace("{public_order_id}", &their_order);
                let answer = first_error(&server.request(&method, &path).bearer(&their_jwt).call());
                if answer.0 != 401 {
                    failures.push(format!(
                        "{method} {template}, another shop's checkout JWT: {answer:?}"
                    ));
                }
                *checked.entry("another_shops_checkout_jwt_401").or_default() += 1;
            }
            _ => *checked.entry("left_out").or_default() += 1,
        }
    }
    let mut figures = Figures::new("shop isolation on every documented route", backend);
    for (name, count) in &checked {
        figures.set(name, *count);
    }
    figures.set("failures", failures.len());
    figures.report();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(checked["another_shops_token_403"] > 100, "{checked:?}");
}

backend_tests!(every_route_of_the_document_keeps_shops_apart);
