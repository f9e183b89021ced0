//! Property test (issue 11 part 5): every event route and every JSON body, given a string with a
//! NUL, a lone surrogate or an extreme length (among control characters and other text) in
//! any of its fields, answers 4xx on both databases and leaves the stored data as it was.
//!
//! The server runs with `--allow-private-targets`, so that the loopback URLs in the bodies do
//! not already make them 422: what is refused is refused for its text. (Nothing listens at
//! those URLs.)

use mercer_domain::directory::parse_directory_query;
use mercer_domain::ports::Database;
use mercer_domain::webhooks::WebhookKind;
use mercer_store::Store;
use mercer_tests::{Backend, MercerServer, backend_tests};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use serde_json::{Value, json};

/// Stands for the hostile string in a body; replaced in the JSON text, since a lone surrogate
/// cannot be held by a `serde_json::Value`.
const MARKER: &str = "HOSTILE_VALUE";

/// The storefront routes taking a JSON body, of checkout `order` (its token is the bearer).
fn storefront_routes(shop: &str, order: &str) -> Vec<(&'static str, String, Value)> {
    let base = format!("/checkout/storefront/{shop}/{order}");
    let address = json!({"first_name": "Ada", "address_line_1": "1 Main St", "city": "Ottawa",
                         "country_code": "CA", "postal_code": "K1A"});
    vec![
        (
            "POST",
            format!("{base}/customer/guest"),
            json!({"first_name": "Ada", "last_name": "L", "email_address": "ada@x.test"}),
        ),
        (
            "POST",
            format!("{base}/addresses/shipping"),
            address.clone(),
        ),
        ("PUT", format!("{base}/addresses/billing"), address),
        (
            "POST",
            format!("{base}/items"),
            json!({"platform_id": "var-1", "quantity": 1, "line_item_key": "k"}),
        ),
        ("POST", format!("{base}/discounts"), json!({"code": "TEN"})),
        (
            "POST",
            format!("{base}/payments"),
            json!({"gateway_public_id": "test", "token": "tok_success"}),
        ),
        (
            "PATCH",
            format!("{base}/meta_data"),
            json!({"notes": "gift", "tags": ["a"], "cart_parameters": {"k": "v"}}),
        ),
    ]
}

/// Every route taking a JSON body, as (method, path, body); `override_id` names a stored
/// override (its update answers 404 before reading the body).
fn routes(shop: &str, override_id: &str) -> Vec<(&'static str, String, Value)> {
    let time = "2026-01-01T00:00:00Z";
    let mut routes = Vec::new();
    for (service, collection, key) in [
        ("customers", "customers", "customer"),
        ("orders", "orders", "order"),
        ("products", "products", "product"),
        ("products", "categories", "category"),
    ] {
        let base = format!("/{service}/v1/shops/{shop}/platforms/custom/webhooks/{collection}");
        routes.push((
            "POST",
            format!("{base}/saved"),
            json!({"data": {key: {
                "platform_id": "x1", "platform_customer_id": "c1", "email": "a@x.test",
                "first_name": "Ada", "name": "Thing", "platform_updated_at": time,
                "addresses": [{"platform_id": "a1", "city": "Berlin", "email": "b@x.test"}],
                "custom_attributes": {"size": {"description": "Size", "value": "M"}},
            }}}),
        ));
        routes.push((
            "POST",
            format!("{base}/deleted"),
            json!({"data": {key: {"platform_id": "x1", "platform_deleted_at": time}}}),
        ));
    }
    let destinations = format!("/integrations/v1/shops/{shop}/platform_connector_destinations");
    let destination = json!({"data": {"destination": {
        "shop_identifier": shop, "topic": "customers",
        "destination": "http://127.0.0.1:9/connector", "version": "v1", "timeout_ms": 500,
    }}});
    routes.push(("POST", destinations.clone(), destination.clone()));
    routes.push(("PUT", format!("{destinations}/1"), destination.clone()));
    routes.push(("PATCH", format!("{destinations}/1"), destination));
    let override_body = json!({
        "override_type": "tax", "url": "http://127.0.0.1:9/tax", "shared_secret": "0123456789abcdef",
    });
    routes.push((
        "POST",
        format!("/checkout/shop/{shop}/overrides"),
        override_body.clone(),
    ));
    routes.push((
        "PATCH",
        format!("/checkout/shop/{shop}/overrides/{override_id}"),
        override_body,
    ));
    let webhook = json!({"webhook_topic_id": 1, "callback_url": "http://127.0.0.1:9/hook"});
    routes.push((
        "POST",
        format!("/checkout/shop/{shop}/webhooks"),
        webhook.clone(),
    ));
    routes.push((
        "PATCH",
        format!("/checkout/shop/{shop}/webhooks/1"),
        webhook,
    ));
    routes.push((
        "POST",
        format!("/checkout/shop/{shop}/webhooks/1/recover"),
        json!({"since": time}),
    ));
    routes.push((
        "POST",
        format!("/checkout/shop/{shop}/integration/config"),
        json!({"shared_secret": "0123456789abcdef"}),
    ));
    routes.push((
        "POST",
        format!("/checkout/orders/{shop}/init"),
        json!({"cart_items": [{"platform_id": "var-1", "quantity": 1, "line_item_key": "k",
                               "line_item_properties": {"note": "n"}}],
               "customer": {"email_address": "ada@x.test", "first_name": "Ada"}}),
    ));
    routes.push((
        "PATCH",
        format!("/checkout/shop/{shop}/settings"),
        json!({"gift_card_skus": ["GC-1"]}),
    ));
    routes.push((
        "POST",
        format!("/customers/v2/shops/{shop}/customers/1/labels"),
        json!({"name": "vip"}),
    ));
    routes.push((
        "POST",
        "/auth/oauth2/token".to_string(),
        json!({"grant_type": "authorization_code", "code": "abc", "client_id": "mci_x",
               "redirect_uri": "http://127.0.0.1:9/cb", "code_verifier": "v"}),
    ));
    routes
}

/// The paths of a body's string values, as [key or index, …].
fn string_places(value: &Value, path: &mut Vec<String>, places: &mut Vec<Vec<String>>) {
    match value {
        Value::String(_) => places.push(path.clone()),
        Value::Array(items) => {
            for (index, item) in items.iter().enumerate() {
                path.push(index.to_string());
                string_places(item, path, places);
                path.pop();
            }
        }
        Value::Object(fields) => {
            for (name, item) in fields {
                path.push(name.clone());
                string_places(item, path, places);
                path.pop();
            }
        }
        _ => {}
    }
}

/// The dotted path the error names for a place (`data.customer.addresses[0].city`).
fn dotted(value: &Value, path: &[String]) -> String {
    let mut dotted = String::new();
    let mut current = value;
    for step in path {
        match current {
            Value::Array(items) => {
                dotted.push_str(&format!("[{step}]"));
                current = &items[step.parse::<usize>().unwrap()];
            }
            _ => {
                if !dotted.is_empty() {
                    dotted.push('.');
                }
                dotted.push_str(step);
                current = &current[step.as_str()];
            }
        }
    }
    dotted
}

fn replace_at(value: &mut Value, path: &[String]) {
    match path.split_first() {
        None => *value = Value::String(MARKER.to_string()),
        Some((step, rest)) => {
            let next = match value {
                Value::Array(items) => step.parse::<usize>().ok().and_then(|i| items.get_mut(i)),
                Value::Object(fields) => fields.get_mut(step),
                _ => None,
            };
            if let Some(next) = next {
                replace_at(next, rest);
            }
        }
    }
}

/// JSON string contents (without quotes) that no database may be handed: a NUL, a lone
/// surrogate or a length over every limit, with arbitrary text (control characters included)
/// around it.
fn hostile_fragment() -> impl Strategy<Value = String> {
    let text = proptest::collection::vec(
        prop_oneof![
            (1u32..0x20).prop_map(|c| format!("\\u{c:04x}")),
            Just("\\u007f".to_string()),
            any::<char>()
                .prop_filter("plain text", |c| *c != '"' && *c != '\\' && !c.is_control())
                .prop_map(String::from),
        ],
        0..8,
    )
    .prop_map(|parts| parts.concat());
    let poison = prop_oneof![
        Just("\\u0000".to_string()),
        Just("\\ud800".to_string()),
        Just("\\udfff".to_string()),
        Just("a".repeat(64 * 1024 + 1)),
        Just("\\u00e9".repeat(64 * 1024 + 1)),
    ];
    (text.clone(), poison, text).prop_map(|(before, poison, after)| before + &poison + &after)
}

/// What a client could have changed: counts of every kind of record the routes write, and the
/// version of checkout `order` (every change of it adds one).
fn snapshot(store: &Store, order: &str) -> Vec<i64> {
    store
        .read(|tx| {
            let mut counts = vec![
                tx.count_pending_inbound_events()?,
                tx.count_failed_inbound_events()?,
            ];
            for shop in tx.list_shops()? {
                let query = parse_directory_query(&[])?;
                counts.push(tx.list_directory_customers(shop.id, &query)?.total);
                counts.push(tx.live_destinations(shop.id)?.len() as i64);
                counts.push(tx.overrides_of_shop(shop.id)?.len() as i64);
                counts.push(tx.webhook_endpoints(shop.id, WebhookKind::Checkout)?.len() as i64);
                counts.push(tx.checkout_order(shop.id, order)?.map_or(0, |o| o.version));
                counts.push(shop.checkout.gift_card_skus.len() as i64);
            }
            Ok(counts)
        })
        .unwrap()
}

fn hostile_strings_in_any_json_body_are_refused_and_change_nothing(backend: Backend) {
    let server = MercerServer::start_with(
        mercer_tests::TestDatabase::create(backend),
        &["--allow-private-targets"],
    );
    let demo = server.demo().clone();
    let store = server.database().open_store();
    let created = server
        .post(&format!("/checkout/shop/{}/overrides", demo.shop))
        .bearer(&demo.token)
        .json(&json!({"override_type": "tax", "url": "http://127.0.0.1:9/tax", "shared_secret": "0123456789abcdef"}));
    assert_eq!(created.status, 200, "{}", created.text);
    let override_id = created.json()["data"]["id"].as_str().unwrap().to_string();
    let checkout = server
        .post(&format!("/checkout/orders/{}/init", demo.shop))
        .bearer(&demo.token)
        .json(&json!({"cart_items": []}));
    assert_eq!(checkout.status, 200, "{}", checkout.text);
    let checkout = checkout.json()["data"].clone();
    let (order, jwt) = (
        checkout["public_order_id"].as_str().unwrap().to_string(),
        checkout["jwt_token"].as_str().unwrap().to_string(),
    );
    let routes: Vec<(&str, String, Value, &str)> = routes(&demo.shop, &override_id)
        .into_iter()
        .map(|(method, path, body)| (method, path, body, demo.token.as_str()))
        .chain(
            storefront_routes(&demo.shop, &order)
                .into_iter()
                .map(|(method, path, body)| (method, path, body, jwt.as_str())),
        )
        .collect();
    let before = snapshot(&store, &order);
    let cases: Vec<(usize, Vec<String>)> = routes
        .iter()
        .enumerate()
        .flat_map(|(index, (_, _, body, _))| {
            let mut places = Vec::new();
            string_places(body, &mut Vec::new(), &mut places);
            places.into_iter().map(move |place| (index, place))
        })
        .collect();
    let mut runner = TestRunner::new(Config {
        cases: 96,
        failure_persistence: None,
        ..Config::default()
    });
    runner
        .run(
            &(proptest::sample::select(cases), hostile_fragment()),
            |((route, place), fragment)| {
                let (method, path, body, bearer) = &routes[route];
                let field = if fragment.contains("\\ud800") || fragment.contains("\\udfff") {
                    "body".to_string()
                } else {
                    dotted(body, &place)
                };
                let mut body = body.clone();
                replace_at(&mut body, &place);
                let text = body
                    .to_string()
                    .replace(&format!("\"{MARKER}\""), &format!("\"{fragment}\""));
                let answer = server
                    .request(method, path)
                    .bearer(bearer)
                    .header("Content-Type", "application/json")
                    .send_bytes(Some(text.into_bytes()));
                let what = format!(
                    "{method} {path} with {field} = {fragment:.80}: {} {}",
                    answer.status, answer.text
                );
                let json = answer.json();
                if path.starts_with("/auth/") {
                    // RFC 6749's error body: the description names the field.
                    prop_assert_eq!(answer.status, 400, "{}", what);
                    prop_assert_eq!(&json["error"], "invalid_request", "{}", what);
                    let description = json["error_description"].as_str().unwrap_or_default();
                    prop_assert!(field == "body" || description.contains(&field), "{}", what);
                } else {
                    prop_assert_eq!(answer.status, 422, "{}", what);
                    let error = &json["errors"][0];
                    prop_assert_eq!(&error["type"], "validation.failed", "{}", what);
                    prop_assert_eq!(&error["field"], field.as_str(), "{}", what);
                    prop_assert!(
                        error["sub_type"] == "invalid_character" || error["sub_type"] == "length",
                        "{}",
                        what
                    );
                }
                prop_assert_eq!(snapshot(&store, &order), before.clone());
                Ok::<(), TestCaseError>(())
            },
        )
        .unwrap();
}

backend_tests!(hostile_strings_in_any_json_body_are_refused_and_change_nothing);
