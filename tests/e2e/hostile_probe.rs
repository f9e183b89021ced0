//! The holes a hostile probe of the release binary found (issue 23), each reproduced over HTTP
//! and held shut, on SQLite and on PostgreSQL: one discount applied many times, negative
//! catalogue prices, subscription plans charged for and dropped, metrics series a client could
//! grow without end, bodies that never finish, unbounded filters, plain-text 413s on the OAuth
//! endpoints, ids given as text, a wrong balance in a refusal, dates past 9999. The sign-in
//! lockout's part is in `oauth.rs`.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use mercer_domain::access::shop::ShopIdentifier;
use mercer_domain::platform::events::{
    EntityDocument, EntityKind, EventAction, EventDocument, EventSource, apply_event,
    parse_event_body,
};
use mercer_domain::platform::resources::{Decimal, Product};
use mercer_domain::ports::Database;
use mercer_tests::receiver::Receiver;
use mercer_tests::{Answer, Backend, MercerServer, TestDatabase, backend_tests, wait_until};
use serde_json::{Value, json};

use crate::subscriptions::{ALLOW_PRIVATE, Api, id_of, ok, running_rule, seed_body};

/// A Product Saved event of `product`, as the connector sends it.
fn product_saved(server: &MercerServer, product: Value) -> Answer {
    let demo = server.demo();
    server
        .post(&format!(
            "/products/v1/shops/{}/platforms/custom/webhooks/products/saved",
            demo.shop
        ))
        .bearer(&demo.token)
        .json(&json!({ "data": { "product": product } }))
}

fn coffee(price: &str) -> Value {
    json!({"platform_id": "prd-coffee", "platform_updated_at": "2026-11-01T00:00:00Z",
           "name": "Coffee", "variants": [{"platform_id": "var-coffee", "name": "Coffee 1kg",
           "price": price, "require_shipping": false}]})
}

fn init(server: &MercerServer, cart_items: Value) -> Answer {
    let demo = server.demo();
    server
        .post(&format!("/checkout/orders/{}/init", demo.shop))
        .bearer(&demo.token)
        .json(&json!({ "cart_items": cart_items }))
}

/// A checkout of one coffee (12.50), once the catalogue has it: its storefront.
struct Checkout<'a> {
    server: &'a MercerServer,
    base: String,
    jwt: String,
}

impl<'a> Checkout<'a> {
    fn start(server: &'a MercerServer) -> Checkout<'a> {
        let items = json!([{"platform_id": "var-coffee", "quantity": 1}]);
        let mut answer = None;
        assert!(
            wait_until(Duration::from_secs(10), || {
                let tried = init(server, items.clone());
                let done = tried.status == 200;
                answer = Some(tried);
                done
            }),
            "init: {:?}",
            answer.map(|a| a.text)
        );
        let data = answer.unwrap().json()["data"].clone();
        Checkout {
            server,
            base: format!(
                "/checkout/storefront/{}/{}",
                server.demo().shop,
                data["public_order_id"].as_str().unwrap()
            ),
            jwt: data["jwt_token"].as_str().unwrap().to_string(),
        }
    }

    fn send(&self, method: &str, path: &str, body: &Value) -> Answer {
        self.server
            .request(method, &format!("{}{path}", self.base))
            .bearer(&self.jwt)
            .json(body)
    }

    fn state(&self) -> Value {
        let answer = self
            .server
            .get(&format!("{}/refresh", self.base))
            .bearer(&self.jwt)
            .call();
        assert_eq!(answer.status, 200, "{}", answer.text);
        answer.json()["data"]["application_state"].clone()
    }
}

/// An override server answering `discount` as the probe's did: any case of a code is valid,
/// answered upper case, for 500 cents.
fn lenient_discount_override(server: &MercerServer) -> Receiver {
    let overrides = Receiver::answering(|request| {
        let body: Value = serde_json::from_slice(&request.body).unwrap_or_default();
        let code = body["data"]["code"]
            .as_str()
            .unwrap_or_default()
            .to_uppercase();
        let answer = json!({"valid": true,
                            "discount": {"code": code, "amount": 500, "text": "5 off"}});
        (200, answer.to_string())
    });
    let demo = server.demo();
    let created = server
        .post(&format!("/checkout/shop/{}/overrides", demo.shop))
        .bearer(&demo.token)
        .json(
            &json!({"override_type": "discount", "url": format!("{}/discount", overrides.url),
                      "shared_secret": "override-shared-secret"}),
        );
    assert_eq!(created.status, 200, "{}", created.text);
    overrides
}

fn one_discount_per_code_the_override_answers(backend: Backend) {
    let server = MercerServer::in_process_with(backend, ALLOW_PRIVATE);
    let overrides = lenient_discount_override(&server);
    assert_eq!(product_saved(&server, coffee("12.50")).status, 202);
    let checkout = Checkout::start(&server);
    for code in ["canon", "Canon", "CANON", "cAnOn"] {
        let added = checkout.send("POST", "/discounts", &json!({ "code": code }));
        assert_eq!(added.status, 200, "{code}: {}", added.text);
    }
    let state = checkout.state();
    assert_eq!(state["discounts"].as_array().unwrap().len(), 1, "{state}");
    assert_eq!(state["discounts"][0]["code"], "CANON");
    assert_eq!(state["order_total"], 1250 - 500);
    // The override was shown every discount applied already, the same code in another letter
    // case included, so a rule of one discount per order can refuse it.
    let asked = || -> Vec<Value> {
        overrides
            .received()
            .iter()
            .map(|request| serde_json::from_slice::<Value>(&request.body).unwrap()["data"].clone())
            .collect()
    };
    assert_eq!(asked().len(), 4);
    assert_eq!(asked()[0]["applied_discounts"], json!([]));
    for data in &asked()[1..] {
        assert_eq!(
            data["applied_discounts"],
            json!([{"code": "CANON", "amount": 500, "text": "5 off"}]),
            "{data}"
        );
    }
    // A code holding an invisible character is refused before the override is asked.
    for code in ["CA\u{200B}NON", "CANON\u{FEFF}", "CA\u{2060}NON"] {
        let refused = checkout.send("POST", "/discounts", &json!({ "code": code }));
        let entries = refused.assert_error(422, "validation.failed");
        assert_eq!(
            (&entries[0]["field"], &entries[0]["sub_type"]),
            (&json!("code"), &json!("invalid_character")),
            "{code:?}"
        );
    }
    assert_eq!(asked().len(), 4, "the override was not asked");
    // Paid in full, then a second code: the refusal of another payment names the balance.
    let paid = checkout.send(
        "POST",
        "/payments",
        &json!({"gateway_public_id": "test", "token": "tok_success"}),
    );
    assert_eq!(paid.status, 200, "{}", paid.text);
    let second = checkout.send("POST", "/discounts", &json!({"code": "extra"}));
    assert_eq!(second.status, 200, "{}", second.text);
    assert_eq!(
        asked()[4]["applied_discounts"],
        json!([{"code": "CANON", "amount": 500, "text": "5 off"}])
    );
    assert_eq!(checkout.state()["order_balance"], -500);
    let refused = checkout.send(
        "POST",
        "/payments",
        &json!({"gateway_public_id": "test", "token": "tok_success"}),
    );
    let entries = refused.assert_error(422, "validation.failed");
    assert_eq!(entries[0]["sub_type"], "nothing_to_pay");
    let message = entries[0]["message"].as_str().unwrap();
    assert!(message.contains("-500 cents"), "{message}");
}

fn negative_prices_are_refused_at_intake_and_never_sold(backend: Backend) {
    let server = MercerServer::in_process(backend);
    for field in ["price", "compare_at_price", "cost"] {
        let mut product = coffee("12.50");
        product["variants"][0][field] = json!("-5.00");
        let refused = product_saved(&server, product);
        let entries = refused.assert_error(422, "validation.failed");
        assert_eq!(
            entries[0]["field"],
            format!("data.product.variants[0].{field}")
        );
        assert_eq!(entries[0]["sub_type"], "negative");
    }
    // Nothing was stored: the variant is unknown.
    let unknown = init(
        &server,
        json!([{"platform_id": "var-coffee", "quantity": 1}]),
    );
    assert_eq!(
        unknown.assert_error(422, "validation.failed")[0]["sub_type"],
        "unknown_variant"
    );
    // A negative price stored before intake refused them is never sold.
    let store = server.database().open_store();
    let shop = store
        .read(|tx| Ok(tx.shop_by_identifier(&ShopIdentifier::parse(&server.demo().shop).unwrap())?))
        .unwrap()
        .unwrap();
    let mut event = parse_event_body(
        shop.id,
        EntityKind::Product,
        EventAction::Saved,
        json!({ "data": { "product": coffee("12.50") } })
            .to_string()
            .as_bytes(),
        EventSource::Webhook,
        mercer_domain::Timestamp::now(),
    )
    .unwrap();
    let mut product: Product = serde_json::from_value(coffee("12.50")).unwrap();
    product.variants.as_mut().unwrap()[0].price = Decimal::parse("-5.00");
    event.document = Some(EventDocument::new(EntityDocument::Product(Box::new(product))).unwrap());
    store
        .write(|tx| apply_event(tx, &event, mercer_domain::Timestamp::now()))
        .unwrap();
    let refused = init(
        &server,
        json!([{"platform_id": "var-coffee", "quantity": 1}]),
    );
    let entries = refused.assert_error(422, "validation.failed");
    assert_eq!(
        (&entries[0]["field"], &entries[0]["sub_type"]),
        (
            &json!("cart_items[0].platform_id"),
            &json!("unpriced_variant")
        )
    );
}

/// The probe's plan: two days of 2020, long gone.
const ENDED_RULE: &str = "DTSTART:20200101T090000Z\nRRULE:FREQ=DAILY;COUNT=2";

fn plans_and_rules_without_an_upcoming_order_are_refused(backend: Backend) {
    let server = MercerServer::in_process(backend);
    assert_eq!(product_saved(&server, coffee("12.50")).status, 202);
    Checkout::start(&server);
    let plan = |rule: &str| {
        init(
            &server,
            json!([{"platform_id": "var-coffee", "quantity": 1,
                    "line_item_properties": {"order_rrule": rule}}]),
        )
    };
    let refused = plan(ENDED_RULE);
    let entries = refused.assert_error(422, "validation.failed");
    assert_eq!(
        (&entries[0]["field"], &entries[0]["sub_type"]),
        (
            &json!("cart_items[0].line_item_properties.order_rrule"),
            &json!("no_upcoming_order")
        )
    );
    // A daily rule begun in 1900 has dates ahead, at init and at creation.
    let old_daily = "DTSTART:19000101T090000Z\nRRULE:FREQ=DAILY";
    assert_eq!(plan(old_daily).status, 200);
    let api = Api::demo(&server);
    let old = api.create(&seed_body("old@example.test", old_daily));
    assert_eq!(old["subscription_status"], "active");
    let next =
        mercer_domain::Timestamp::parse_rfc3339(old["next_order_datetime"].as_str().unwrap())
            .unwrap();
    let now = mercer_domain::Timestamp::now();
    assert!(next > now && next <= now.plus_seconds(86_400), "{next}");

    // Change Frequency and Update Subscription refuse the rule, and change nothing.
    let sub = api.create(&seed_body("plan@example.test", &running_rule()));
    let id = id_of(&sub);
    let refused = api.send(
        "PUT",
        &format!("/subscriptions/{id}/frequency"),
        &json!({ "order_rrule": ENDED_RULE }),
    );
    let entries = refused.assert_error(422, "validation.failed");
    assert_eq!(
        (&entries[0]["field"], &entries[0]["sub_type"]),
        (&json!("order_rrule"), &json!("no_upcoming_order"))
    );
    let refused = api.send(
        "PUT",
        &format!("/subscriptions/{id}"),
        &json!({"subscription": { "order_rrule": ENDED_RULE }}),
    );
    let entries = refused.assert_error(422, "validation.failed");
    assert_eq!(
        (&entries[0]["field"], &entries[0]["sub_type"]),
        (
            &json!("subscription.order_rrule"),
            &json!("no_upcoming_order")
        )
    );
    let after = api.subscription(id);
    assert_eq!(after["order_rrule"], sub["order_rrule"]);
    assert_eq!(after["next_order_datetime"], sub["next_order_datetime"]);
    assert_eq!(after["subscription_status"], "active");

    // An address id given as decimal text is read, as elsewhere.
    let customer = sub["customer_id"].as_i64().unwrap();
    let address = ok(api.send(
        "POST",
        &format!("/customers/{customer}/addresses"),
        &json!({"customer_address": crate::subscriptions::address("2 Rue Sherbrooke", "Montréal")}),
    ));
    let address_id = address["customer_address"]["id"]
        .as_i64()
        .unwrap_or_else(|| panic!("{address}"));
    let moved = api.send(
        "PUT",
        &format!("/subscriptions/{id}/shipping_address"),
        &json!({ "address_id": address_id.to_string() }),
    );
    assert_eq!(ok(moved)["subscription"]["shipping_address_id"], address_id);
}

fn dates_past_the_year_9999_are_refused_at_intake(backend: Backend) {
    let server = MercerServer::in_process(backend);
    let api = Api::demo(&server);
    // 9999-12-31T23:59:59-05:00 is in the year 10000 in UTC: it could not be written back.
    let late = "9999-12-31T23:59:59-05:00";
    let mut body = seed_body("late@example.test", &running_rule());
    body["subscription"]["next_order_datetime"] = json!(late);
    let entries = api
        .send("POST", "/subscriptions", &body)
        .assert_error(422, "validation.failed");
    assert_eq!(entries[0]["field"], "subscription.next_order_datetime");
    let demo = server.demo();
    let saved = server
        .post(&format!(
            "/customers/v1/shops/{}/platforms/custom/webhooks/customers/saved",
            demo.shop
        ))
        .bearer(&demo.token)
        .json(&json!({"data": {"customer": {"platform_id": "c-late",
                                            "platform_updated_at": late}}}));
    assert_eq!(
        saved.assert_error(422, "validation.failed")[0]["field"],
        "data.customer.platform_updated_at"
    );
    let listed = api.get(&format!(
        "/subscriptions?filter=lt(next_order_datetime:{})",
        late.replace('+', "%2B")
    ));
    assert_eq!(
        listed.assert_error(400, "request.invalid_query")[0]["field"],
        "filter"
    );
    // The last instant that can be written is taken.
    let mut body = seed_body("last@example.test", &running_rule());
    body["subscription"]["next_order_datetime"] = json!("9999-12-31T23:59:59Z");
    let created = api.create(&body);
    assert_eq!(created["next_order_datetime"], "9999-12-31T23:59:59Z");
}

fn filters_past_the_condition_limit_are_400_naming_it(backend: Backend) {
    let server = MercerServer::in_process(backend);
    let demo = server.demo();
    let directory = |filter: String| {
        server
            .get(&format!(
                "/customers/v2/shops/{}/customers?filter={filter}",
                demo.shop
            ))
            .bearer(&demo.token)
            .call()
    };
    let conditions = |condition: &str, n: usize| vec![condition; n].join(",");
    assert_eq!(directory(conditions("gt(id:1)", 100)).status, 200);
    let refused = directory(conditions("gt(id:1)", 1000));
    let entries = refused.assert_error(400, "request.invalid_query");
    assert_eq!(entries[0]["field"], "filter");
    let message = entries[0]["message"].as_str().unwrap();
    assert!(message.contains("at most 100 conditions"), "{message}");
    let api = Api::demo(&server);
    api.create(&seed_body("filter@example.test", &running_rule()));
    let listed = api.get(&format!(
        "/subscriptions?filter={}",
        conditions("gte(orders_processed:0)", 100)
    ));
    assert_eq!(ok(listed)["subscriptions"].as_array().unwrap().len(), 1);
    let refused = api.get(&format!(
        "/subscriptions?filter={}",
        conditions("gte(orders_processed:0)", 1000)
    ));
    assert_eq!(
        refused.assert_error(400, "request.invalid_query")[0]["field"],
        "filter"
    );
}

fn oversized_oauth_bodies_get_json_413s(backend: Backend) {
    let server = MercerServer::in_process_with(backend, &["--max-body-bytes", "1024"]);
    let big = "x".repeat(2048);
    let token = server
        .post("/auth/oauth2/token")
        .form(&[("grant_type", "authorization_code"), ("code", &big)]);
    assert_eq!(token.status, 413, "{}", token.text);
    let body = token.json();
    assert_eq!(body["error"], "invalid_request", "RFC 6749's body: {body}");
    assert!(
        body["error_description"]
            .as_str()
            .unwrap()
            .contains("1024 bytes"),
        "{body}"
    );
    let authorize = server
        .post("/accounts/dashboard/authorize")
        .form(&[("client_id", "mci_x"), ("state", &big)]);
    authorize.assert_error(413, "request.too_large");
}

fn metric_series(server: &MercerServer) -> Vec<String> {
    let metrics = server.get("/metrics").call();
    assert_eq!(metrics.status, 200);
    metrics
        .text
        .lines()
        .filter(|line| line.starts_with("mercer_http_"))
        .map(|line| {
            line.rsplit_once(' ')
                .map_or(line, |(series, _)| series)
                .to_string()
        })
        .collect()
}

fn metrics_series_stay_fixed_whatever_the_client_sends(backend: Backend) {
    let server = MercerServer::start(backend);
    // Methods of the client's own invention go out by hand: HTTP clients refuse them.
    let raw = |method: &str, path: &str| {
        let mut stream = connect(&server);
        write!(
            stream,
            "{method} {path} HTTP/1.1\r\nHost: mercer\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        let (status, _) = read_answer(&mut BufReader::new(stream)).unwrap();
        assert!(
            status.starts_with("HTTP/1.1 4"),
            "{method} {path}: {status}"
        );
    };
    let invent = |from: usize, to: usize| {
        for n in from..to {
            let method = format!("INVENTED{n}");
            raw(&method, "/healthz");
            raw(&method, &format!("/made/up/{n}"));
            server.get(&format!("/no/such/route/{n}")).call();
        }
    };
    invent(0, 5);
    // The first read of /metrics makes the series of its own route.
    metric_series(&server);
    let before = metric_series(&server);
    invent(5, 400);
    let after = metric_series(&server);
    assert_eq!(before.len(), after.len(), "new series: {after:#?}");
    assert!(
        after.iter().all(|series| !series.contains("INVENTED")),
        "{after:#?}"
    );
    assert!(
        after
            .iter()
            .any(|series| series.contains("method=\"other\"")),
        "{after:#?}"
    );
}

/// Reads one HTTP/1.1 answer (head and a `Content-Length` body) from `reader`.
fn read_answer(reader: &mut BufReader<TcpStream>) -> std::io::Result<(String, String)> {
    let mut status = String::new();
    reader.read_line(&mut status)?;
    let mut length = 0;
    loop {
        let mut line = String::new();
        reader.read_line(&mut line)?;
        if line.trim().is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':')
            && name.eq_ignore_ascii_case("content-length")
        {
            length = value.trim().parse().unwrap_or(0);
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body)?;
    Ok((status, String::from_utf8_lossy(&body).into_owned()))
}

fn connect(server: &MercerServer) -> TcpStream {
    TcpStream::connect(server.base_url.trim_start_matches("http://")).unwrap()
}

/// Sends `head` (a request's head and the first bytes of a body that never comes whole) and
/// reads the answer; then checks that the connection was closed after it.
fn answer_to_unfinished_body(server: &MercerServer, head: &str) -> (String, Value) {
    let mut stream = connect(server);
    stream.write_all(head.as_bytes()).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let mut reader = BufReader::new(stream);
    let (status, body) = read_answer(&mut reader).unwrap();
    let mut rest = Vec::new();
    assert_eq!(
        reader.read_to_end(&mut rest).unwrap(),
        0,
        "the connection stays open"
    );
    (status, serde_json::from_str(&body).unwrap())
}

fn a_body_that_never_finishes_gets_408_and_its_connection_closed(backend: Backend) {
    let server = MercerServer::start_with(
        TestDatabase::create_migrated(backend),
        &["--body-timeout-s", "1"],
    );
    let demo = server.demo().clone();
    // A million bytes announced, one sent, to the token endpoint that needs no credentials.
    let (status, body) = answer_to_unfinished_body(
        &server,
        "POST /auth/oauth2/token HTTP/1.1\r\nHost: mercer\r\n\
         Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 1000000\r\n\r\ng",
    );
    assert!(status.starts_with("HTTP/1.1 408"), "{status}");
    assert_eq!(body["error"], "invalid_request", "RFC 6749's body: {body}");
    // The same on a route of JSON errors, with credentials.
    let (status, body) = answer_to_unfinished_body(
        &server,
        &format!(
            "POST /customers/v1/shops/{}/platforms/custom/webhooks/customers/saved HTTP/1.1\r\n\
             Host: mercer\r\nAuthorization: Bearer {}\r\nContent-Type: application/json\r\n\
             Content-Length: 1000000\r\n\r\n{{",
            demo.shop, demo.token
        ),
    );
    assert!(status.starts_with("HTTP/1.1 408"), "{status}");
    assert_eq!(body["errors"][0]["type"], "request.timeout", "{body}");
    assert_eq!(body["errors"][0]["sub_type"], "body", "{body}");
    // A chunked body, one chunk and then nothing: the same.
    let (status, body) = answer_to_unfinished_body(
        &server,
        "POST /auth/oauth2/token HTTP/1.1\r\nHost: mercer\r\n\
         Content-Type: application/x-www-form-urlencoded\r\nTransfer-Encoding: chunked\r\n\r\n\
         1\r\ng\r\n",
    );
    assert!(status.starts_with("HTTP/1.1 408"), "{status}");
    assert_eq!(body["error"], "invalid_request", "{body}");
    // A route that reads no body answers at once, and does not wait for the chunks to end
    // either: the connection is closed after the answer.
    let (status, body) = answer_to_unfinished_body(
        &server,
        "GET /healthz HTTP/1.1\r\nHost: mercer\r\nTransfer-Encoding: chunked\r\n\r\n1\r\na\r\n",
    );
    assert!(status.starts_with("HTTP/1.1 200"), "{status} {body}");
}

fn past_the_connection_cap_new_clients_wait_for_a_free_one(backend: Backend) {
    let server = MercerServer::start_with(
        TestDatabase::create_migrated(backend),
        // Two workers (the harness's): one connection each.
        &["--max-connections", "2", "--body-timeout-s", "60"],
    );
    // Two clients hold a connection each: served once (so they are in), then sending a body
    // slowly.
    let hold = || {
        let stream = connect(&server);
        let mut reader = BufReader::new(stream.try_clone().unwrap());
        let mut writer = stream;
        writer
            .write_all(b"GET /healthz HTTP/1.1\r\nHost: mercer\r\n\r\n")
            .unwrap();
        let (status, _) = read_answer(&mut reader).unwrap();
        assert!(status.starts_with("HTTP/1.1 200"), "{status}");
        writer
            .write_all(
                b"POST /auth/oauth2/token HTTP/1.1\r\nHost: mercer\r\n\
                  Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 100\r\n\r\ng",
            )
            .unwrap();
        writer
    };
    let first = hold();
    let _second = hold();
    // A third is not served while they hold the two...
    let third = connect(&server);
    let mut third_reader = BufReader::new(third.try_clone().unwrap());
    (&third)
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: mercer\r\n\r\n")
        .unwrap();
    third
        .set_read_timeout(Some(Duration::from_secs(1)))
        .unwrap();
    let mut byte = [0u8; 1];
    let waited = third_reader.read(&mut byte);
    assert!(
        matches!(&waited, Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut)),
        "the third connection was served past the cap: {waited:?}"
    );
    // ...and is, once one of them goes.
    drop(first);
    third
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let (status, _) = read_answer(&mut third_reader).unwrap();
    assert!(status.starts_with("HTTP/1.1 200"), "{status}");
}

backend_tests!(
    one_discount_per_code_the_override_answers,
    negative_prices_are_refused_at_intake_and_never_sold,
    plans_and_rules_without_an_upcoming_order_are_refused,
    dates_past_the_year_9999_are_refused_at_intake,
    filters_past_the_condition_limit_are_400_naming_it,
    oversized_oauth_bodies_get_json_413s,
    metrics_series_stay_fixed_whatever_the_client_sends,
    a_body_that_never_finishes_gets_408_and_its_connection_closed,
    past_the_connection_cap_new_clients_wait_for_a_free_one,
);
