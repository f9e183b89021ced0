//! Input no database can store, and events that cannot be applied (issue 11 parts 1 and 2):
//! the real `mercer` binary, on SQLite and on PostgreSQL.

use std::time::Duration;

use mercer_domain::access::shop::ShopIdentifier;
use mercer_domain::ports::Database;
use mercer_store::Store;
use mercer_store::testing::POISONED_EMAIL;
use mercer_tests::{Answer, Backend, MercerServer, backend_tests, wait_until};
use serde_json::{Value, json};

pub(crate) struct Shop {
    pub(crate) identifier: String,
    pub(crate) token: String,
}

pub(crate) fn customer_saved(server: &MercerServer, shop: &Shop, customer: &Value) -> Answer {
    server
        .post(&format!(
            "/customers/v1/shops/{}/platforms/custom/webhooks/customers/saved",
            shop.identifier
        ))
        .bearer(&shop.token)
        .json(&json!({"data": {"customer": customer}}))
}

pub(crate) fn customer(platform_id: &str, email: &str) -> Value {
    json!({
        "platform_id": platform_id,
        "email": email,
        "first_name": "Ada",
        "platform_updated_at": "2026-01-01T00:00:00Z",
    })
}

pub(crate) fn counts(store: &Store) -> (i64, i64) {
    store
        .read(|tx| {
            Ok((
                tx.count_pending_inbound_events()?,
                tx.count_failed_inbound_events()?,
            ))
        })
        .unwrap()
}

pub(crate) fn stored_email(store: &Store, shop: &str, platform_id: &str) -> Option<String> {
    store
        .read(|tx| {
            let identifier = ShopIdentifier::parse(shop).unwrap();
            let Some(shop) = tx.shop_by_identifier(&identifier)? else {
                return Ok(None);
            };
            Ok(tx
                .directory_customer_by_platform_id(shop.id, platform_id)?
                .map(|customer| customer.email.unwrap_or_default()))
        })
        .unwrap()
}

fn text_no_database_can_store_is_refused_with_its_field(backend: Backend) {
    let server = MercerServer::in_process(backend);
    let demo = server.demo();
    let shop = Shop {
        identifier: demo.shop.clone(),
        token: demo.token.clone(),
    };
    let store = server.database().open_store();
    for (body, field) in [
        (customer("c1", "a\u{0}b@x"), "data.customer.email"),
        (
            customer("c1", &format!("{}@x.test", "a".repeat(320))),
            "data.customer.email",
        ),
        (
            customer(&"9".repeat(256), "a@x.test"),
            "data.customer.platform_id",
        ),
        (
            json!({"platform_id": "c1", "note": "n".repeat(64 * 1024 + 1)}),
            "data.customer.note",
        ),
        (
            json!({"platform_id": "c1", "addresses": [{"city": "B\u{0}"}]}),
            "data.customer.addresses[0].city",
        ),
    ] {
        let answer = customer_saved(&server, &shop, &body);
        let errors = answer.assert_error(422, "validation.failed");
        assert_eq!(errors[0]["field"], field, "{}", answer.text);
    }
    assert_eq!(counts(&store), (0, 0), "nothing was stored");
    assert_eq!(stored_email(&store, &shop.identifier, "c1"), None);
    // A lone surrogate is not text at all: refused wherever it is, even in a field the event
    // does not read.
    let answer = server
        .post(&format!(
            "/customers/v1/shops/{}/platforms/custom/webhooks/customers/saved",
            shop.identifier
        ))
        .bearer(&shop.token)
        .header("Content-Type", "application/json")
        .send_bytes(Some(
            br#"{"data":{"customer":{"platform_id":"c1","ignored":"\ud800"}}}"#.to_vec(),
        ));
    let errors = answer.assert_error(422, "validation.failed");
    assert_eq!(errors[0]["field"], "body", "{}", answer.text);
    // Within the limits, the same event is taken.
    let answer = customer_saved(&server, &shop, &customer(&"9".repeat(255), "a@x.test"));
    assert_eq!(answer.status, 202, "{}", answer.text);
}

fn bad_query_and_path_input_is_400(backend: Backend) {
    let server = MercerServer::in_process(backend);
    let demo = server.demo();
    let customers = format!("/customers/v2/shops/{}/customers", demo.shop);
    // One customer, so that a search matching everything would show.
    let shop = Shop {
        identifier: demo.shop.clone(),
        token: demo.token.clone(),
    };
    assert_eq!(
        customer_saved(&server, &shop, &customer("c1", "ada@example.test")).status,
        202
    );
    let long = "a".repeat(257);
    let huge = "a".repeat(50_000);
    for (query, field) in [
        ("search=%00".to_string(), "search"),
        ("search=ada%00".to_string(), "search"),
        (format!("search={long}"), "search"),
        (format!("search={huge}"), "search"),
        ("filter=like(email:%25%00%25)".to_string(), "filter"),
        (format!("filter=like(email:{long})"), "filter"),
        (format!("filter=eq(first_name:{long})"), "filter"),
        ("label=vip%00".to_string(), "label"),
        ("orderby=id%00".to_string(), "orderby"),
    ] {
        let answer = server
            .get(&format!("{customers}?{query}"))
            .bearer(&demo.token)
            .call();
        let errors = answer.assert_error(400, "request.invalid_query");
        assert_eq!(errors[0]["field"], field, "{query}: {}", answer.text);
    }
    for path in [
        format!("{customers}/pid/c1%00"),
        format!("{customers}/1%00"),
        format!("{customers}/1/labels/1%00"),
    ] {
        let answer = server.request("GET", &path).bearer(&demo.token).call();
        let errors = answer.assert_error(400, "request.invalid_path");
        assert_eq!(errors[0]["field"], "path", "{path}: {}", answer.text);
    }
    // A label name is a JSON body: 422 naming it. The 202 came before the event was applied.
    let by_platform_id = || {
        server
            .get(&format!("{customers}/pid/c1"))
            .bearer(&demo.token)
            .call()
    };
    assert!(
        wait_until(Duration::from_secs(10), || by_platform_id().status == 200),
        "the customer was not applied"
    );
    let id = by_platform_id().json()["customer"]["id"].clone();
    let answer = server
        .post(&format!("{customers}/{id}/labels"))
        .bearer(&demo.token)
        .json(&json!({"name": "v\u{0}ip"}));
    let errors = answer.assert_error(422, "validation.failed");
    assert_eq!(errors[0]["field"], "name", "{}", answer.text);
    // Forms of the OAuth routes: refused before any lookup.
    let answer = server.post("/auth/oauth2/token").form(&[
        ("grant_type", "authorization_code"),
        ("code", "abc"),
        ("client_id", "mci_\u{0}"),
    ]);
    assert_eq!(answer.status, 400, "{}", answer.text);
    assert_eq!(answer.json()["error"], "invalid_request", "{}", answer.text);
    let answer = server
        .post("/auth/oauth2/token")
        .header("Authorization", "Basic bWNpXwA6c2VjcmV0") // "mci_\0:secret"
        .form(&[("grant_type", "authorization_code"), ("code", "abc")]);
    // Told apart on PostgreSQL, where looking the NUL up was a 500.
    assert!(matches!(answer.status, 400 | 401), "{}", answer.text);
    // The sign-in form of a real app and shop, so only the NUL can make it a 400 (a wrong
    // password re-renders the page; on PostgreSQL the lookup itself failed with a 500).
    let world = crate::oauth::oauth_world(&server, crate::oauth::REDIRECT);
    let answer = server.post("/accounts/dashboard/authorize").form(&[
        ("response_type", "code"),
        ("client_id", &world.client_id),
        ("redirect_uri", crate::oauth::REDIRECT),
        ("scope", "read_orders"),
        ("state", "s"),
        ("shop", &world.shop),
        ("email", "owner\u{0}@demo.test"),
        ("password", crate::oauth::PASSWORD),
        ("decision", "approve"),
    ]);
    assert_eq!(answer.status, 400, "{}", answer.text);
    assert!(answer.text.contains("cannot be read"), "{}", answer.text);

    // The last page an i64 can number is past the last customer: an empty page, not a 500
    // (found by the schema fuzzer: the next page's number overflowed).
    let answer = server
        .get(&format!("{customers}?limit=1&page={}", i64::MAX))
        .bearer(&demo.token)
        .call();
    assert_eq!(answer.status, 200, "{}", answer.text);
    assert_eq!(answer.json()["customers"], json!([]), "{}", answer.text);

    // The longest search term allowed still searches.
    let answer = server
        .get(&format!("{customers}?search={}", "a".repeat(256)))
        .bearer(&demo.token)
        .call();
    assert_eq!(answer.status, 200, "{}", answer.text);
}

fn an_event_that_cannot_be_applied_is_set_aside_while_later_events_apply(backend: Backend) {
    let server = MercerServer::start(backend);
    let demo = server.demo();
    let a = Shop {
        identifier: demo.shop.clone(),
        token: demo.token.clone(),
    };
    let b_identifier = server
        .cli(&["shop", "create", "--domain", "b.shop.test"])
        .values()[0]
        .clone();
    let b = Shop {
        token: server
            .cli(&["token", "create", "--shop", &b_identifier, "--scope", "all"])
            .value(),
        identifier: b_identifier,
    };
    let store = server.database().open_store();
    server.database().fail_customer_writes();

    let answer = customer_saved(&server, &a, &customer("poisoned", POISONED_EMAIL));
    assert_eq!(answer.status, 202, "{}", answer.text);
    for index in 0..500 {
        for shop in [&a, &b] {
            let id = format!("c{index}");
            let answer = customer_saved(&server, shop, &customer(&id, &format!("{id}@x.test")));
            assert_eq!(answer.status, 202, "{}", answer.text);
        }
    }
    // Three attempts (again after 1 s, then 4 s), then set aside; everything else applied.
    let settled = wait_until(Duration::from_secs(60), || counts(&store) == (0, 1));
    assert!(settled, "pending, failed: {:?}", counts(&store));
    for index in [0, 1, 250, 498, 499] {
        let id = format!("c{index}");
        for shop in [&a, &b] {
            assert_eq!(
                stored_email(&store, &shop.identifier, &id),
                Some(format!("{id}@x.test"))
            );
        }
    }
    let total: i64 = store
        .read(|tx| {
            let mut total = 0;
            for shop in tx.list_shops()? {
                let query = mercer_domain::directory::parse_directory_query(&[])?;
                total += tx.list_directory_customers(shop.id, &query)?.total;
            }
            Ok(total)
        })
        .unwrap();
    assert_eq!(total, 1000, "every later event of both shops applied");
    assert_eq!(stored_email(&store, &a.identifier, "poisoned"), None);

    let listed = server.cli(&["events", "failed"]);
    assert!(listed.success, "{}", listed.stderr);
    let line = listed
        .stdout
        .lines()
        .find(|line| line.contains("poisoned"))
        .unwrap_or_else(|| panic!("not listed: {}", listed.stdout));
    assert!(line.contains(&a.identifier), "{line}");
    assert!(line.contains("customer saved"), "{line}");
    assert!(line.contains("forced failure"), "{line}");
    let id = line.split_whitespace().next().unwrap().to_string();
    let metrics = server.get("/metrics").call().text;
    assert!(
        metrics.contains("mercer_inbound_events_failed 1"),
        "{metrics}"
    );

    server
        .cli(&["events", "retry", "999999999"])
        .assert_failed_with("not found");
    server.database().heal_customer_writes();
    assert_eq!(server.cli(&["events", "retry", &id]).value(), "1");
    let applied = wait_until(Duration::from_secs(30), || counts(&store) == (0, 0));
    assert!(applied, "pending, failed: {:?}", counts(&store));
    assert_eq!(
        stored_email(&store, &a.identifier, "poisoned").as_deref(),
        Some(POISONED_EMAIL)
    );
    assert_eq!(server.cli(&["events", "retry", "--all"]).value(), "0");
    let listed = server.cli(&["events", "failed"]);
    assert!(listed.stdout.is_empty() && listed.stderr.contains("No event"));
    let metrics = server.get("/metrics").call().text;
    assert!(
        metrics.contains("mercer_inbound_events_failed 0"),
        "{metrics}"
    );
}

/// A body of a hundred thousand invalid array elements costs what a body at its array's limit
/// costs: one `too_many` problem for the array, the elements past the limit not read, and an
/// answer of at most 100 problems (the first found), whatever the route.
fn long_invalid_arrays_answer_a_short_422(backend: Backend) {
    let server = MercerServer::in_process(backend);
    let demo = server.demo().clone();
    let empties = || Value::Array(vec![json!({}); 100_000]);
    let first_problems = |answer: &Answer, field: &str| {
        let entries = answer.assert_error(422, "validation.failed");
        assert_eq!(
            entries.len(),
            100,
            "the first 100 problems: {}",
            entries.len()
        );
        assert_eq!(
            (&entries[0]["field"], &entries[0]["sub_type"]),
            (&json!(field), &json!("too_many")),
            "{}",
            entries[0]
        );
        assert!(answer.text.len() < 64 * 1024, "{} bytes", answer.text.len());
        entries
    };

    // Init Order with 100,000 cart items that each lack their platform id and quantity.
    let init = server
        .post(&format!("/checkout/orders/{}/init", demo.shop))
        .bearer(&demo.token)
        .json(&json!({"cart_items": empties()}));
    let entries = first_problems(&init, "cart_items");
    assert_eq!(entries[1]["field"], "cart_items[0].platform_id");
    let last = entries[99]["field"].as_str().unwrap();
    assert!(last.starts_with("cart_items[49]."), "{last}");

    // The bulk box-size update with 100,000 empty sizes, bare and wrapped.
    let bulk = format!("/box_builder/v1/shops/{}/boxes/1/box_sizes", demo.shop);
    for body in [empties(), json!({"box_sizes": empties()})] {
        let answer = server.request("PUT", &bulk).bearer(&demo.token).json(&body);
        let entries = first_problems(&answer, "box_sizes");
        let second = entries[1]["field"].as_str().unwrap();
        assert!(second.ends_with("[0].box_size_name"), "{second}");
    }
}

/// An id in a path that is not a number is answered as any other unknown id: after the
/// credentials (401 without a token), then 404 naming the resource the id was to find.
fn a_path_id_that_is_not_a_number_is_checked_after_the_credentials(backend: Backend) {
    let server = MercerServer::in_process(backend);
    let demo = server.demo();
    let shop = &demo.shop;
    for (method, path, resource) in [
        (
            "GET",
            format!("/customers/v2/shops/{shop}/customers/abc"),
            "customer",
        ),
        (
            "GET",
            format!("/customers/v2/shops/{shop}/customers/1/addresses/x"),
            "address",
        ),
        (
            "DELETE",
            format!("/customers/v2/shops/{shop}/customers/1/labels/1.5"),
            "label",
        ),
        (
            "GET",
            format!("/integrations/v1/shops/{shop}/platform_connector_destinations/abc"),
            "destination",
        ),
        ("GET", format!("/customers/v2/shops/{shop}/sync/x"), "sync"),
    ] {
        server
            .request(method, &path)
            .call()
            .assert_error(401, "auth.unauthenticated");
        let answer = server.request(method, &path).bearer(&demo.token).call();
        let errors = answer.assert_error(404, "resource.not_found");
        assert_eq!(errors[0]["sub_type"], resource, "{path}: {}", answer.text);
    }
}

backend_tests!(
    text_no_database_can_store_is_refused_with_its_field,
    bad_query_and_path_input_is_400,
    an_event_that_cannot_be_applied_is_set_aside_while_later_events_apply,
    long_invalid_arrays_answer_a_short_422,
    a_path_id_that_is_not_a_number_is_checked_after_the_credentials,
);
